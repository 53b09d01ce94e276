"""An attempt's channel to take a warm JVM at first use (issue 56.1,
recovery/member/warm_jvms/asks.py), against a daemon's real pool with no JVM ready: the driver's
ask is answered once, with why none, and the channel is closed after it (a second ask finds it
closed: a driver takes at most one JVM); anything but the ask closes it unanswered; an attempt
that is over loses its channel. The hand-over of a real JVM is in tests/spark/test_warm_drivers.py.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.member.warm_jvms.asks import WarmAsks
from recovery.member.warm_jvms.class_data import ClassData
from recovery.member.warm_jvms.pool import PoolSetup, WarmPool
from recovery.shared.jvm_settings import ASK

pytestmark = pytest.mark.integration

#: Seconds the daemon's thread has to answer (it only looks at its pool here).
ANSWER = 30.0


@pytest.fixture
def asks(tmp_path: Path) -> Iterator[WarmAsks]:
    setup = PoolSetup(
        target=1,
        daemon_id="d1",
        spark_master="local[1]",
        python="python3",
        work_root=tmp_path / "work",
        log_dir=lambda: tmp_path / "logs",
        environment=lambda user: dict(os.environ),
        fork_server=None,
        users=None,
    )
    pool = WarmPool(setup, ClassData(None, lambda: dict(os.environ)))  # never started: none ready
    channels = WarmAsks(pool)
    yield channels
    channels.close()


def driver_end(asks: WarmAsks, job_id: str, attempt: int, tmp_path: Path) -> socket.socket:
    channel = socket.socket(fileno=asks.channel(job_id, attempt, tmp_path / "attempt"))
    channel.settimeout(ANSWER)
    return channel


def test_an_ask_is_answered_once_then_the_channel_is_closed(asks: WarmAsks, tmp_path: Path) -> None:
    with driver_end(asks, "job", 1, tmp_path) as channel:
        channel.sendall(ASK)
        data, fds, _, _ = socket.recv_fds(channel, 1 << 16, 2)
        assert fds == []
        assert json.loads(data) == {
            "none": "no warm driver was ready when the job first asked for Spark"
        }
        assert channel.recv(1) == b"", "closed after its one answer"
        with pytest.raises(OSError):
            for _ in range(100):  # the daemon's end is gone: a second ask cannot be read
                channel.sendall(ASK)
    assert asks.open == 0


def test_anything_but_the_ask_closes_the_channel_unanswered(asks: WarmAsks, tmp_path: Path) -> None:
    with driver_end(asks, "job", 1, tmp_path) as channel:
        channel.sendall(b"give me all of them\n")
        assert channel.recv(1 << 16) == b""
    assert asks.open == 0


def test_an_attempt_that_is_over_loses_its_channel(asks: WarmAsks, tmp_path: Path) -> None:
    with (
        driver_end(asks, "job", 1, tmp_path) as first,
        driver_end(asks, "job", 2, tmp_path) as second,
    ):
        assert asks.open == 2
        asks.attempt_over("job", 1)
        assert first.recv(1) == b""
        assert asks.open == 1
        second.sendall(ASK)
        assert b"none" in second.recv(1 << 16)
