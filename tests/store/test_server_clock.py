"""ZooKeeper's time as a leader reads it (:mod:`zkstore.zookeeper.clock`), against a real server:
the offset of a clock an hour off is measured to within the round trip, used until a minute old,
measured again after, and said once."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import pytest

from zkstore.config import StoreConfig
from zkstore.layout import Layout
from zkstore.zookeeper.clock import REFRESH, ServerClock
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


class Host:
    """A host's clocks: the wall clock off by ``skew``, a monotonic clock the test moves."""

    def __init__(self, skew: float) -> None:
        self.skew = skew
        self.elapsed = 0.0

    def wall(self) -> float:
        return time.time() + self.skew

    def monotonic(self) -> float:
        return self.elapsed


@pytest.mark.parametrize("skew", [-3600.0, 3600.0, 0.0])
def test_the_offset_of_a_clock_off_is_measured_and_said(
    zk: ZooKeeper, config: StoreConfig, skew: float, caplog: pytest.LogCaptureFixture
) -> None:
    host = Host(skew)
    path = Layout(config.base_path).leader_clock
    clock = ServerClock(zk, path, wall=host.wall, monotonic=host.monotonic)
    with caplog.at_level(logging.WARNING, logger="zkstore.zookeeper.clock"):
        before = time.time()
        read = clock.now()
        after = time.time()
    # the server is on this machine's true clock: ZooKeeper's time is the true time, to within
    # half the write's round trip (the stamp may fall anywhere in it; the whole call bounds it)
    # and the stamp's millisecond
    span = after - before
    assert before - span / 2 - 0.001 <= read.timestamp() <= after + span / 2 + 0.001
    assert zk.exists(path) is not None  # made by the first measurement
    warned = [r.getMessage() for r in caplog.records]
    if skew:
        side = "behind" if skew < 0 else "ahead of"
        assert len(warned) == 1 and f"3600.0 s {side} ZooKeeper's" in warned[0]
    else:
        assert warned == []


def test_the_offset_is_used_for_a_minute_then_measured_again(
    zk: ZooKeeper, config: StoreConfig
) -> None:
    host = Host(-3600.0)
    path = Layout(config.base_path).leader_clock
    clock = ServerClock(zk, path, wall=host.wall, monotonic=host.monotonic)
    clock.now()
    version = zk.get(path)[1].version
    host.elapsed = REFRESH - 1
    clock.now()
    assert zk.get(path)[1].version == version  # within the minute: no write
    host.skew = 7200.0  # the host's clock was stepped meanwhile
    host.elapsed = REFRESH
    read = clock.now()
    assert zk.get(path)[1].version == version + 1
    assert abs(read.timestamp() - datetime.now(UTC).timestamp()) < 0.5
