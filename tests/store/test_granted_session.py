"""Issue 28: the daemon says what session the servers granted, beside what it asked.

A production ZooKeeper's ``tickTime=2000`` grants at least 4 s (its ``minSessionTimeout``, two
ticks), so ``--session-timeout 2`` silently became 4 s and every failover took that long. The
suite's server ticks every 0.1 s: it grants 1 s at least and 60 s at most.
"""

from __future__ import annotations

import logging

import pytest

from recovery.daemon import say_session
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("asked", "granted", "said"),
    [
        (0.5, 1.0, "granted a 1 s session where 0.5 s was asked"),
        (3.0, 3.0, "session of 3 s granted as asked"),
        (90.0, 60.0, "granted a 60 s session where 90 s was asked"),
    ],
)
def test_the_granted_session_is_said_beside_the_asked_one(
    zk_server: EmbeddedZooKeeper,
    caplog: pytest.LogCaptureFixture,
    asked: float,
    granted: float,
    said: str,
) -> None:
    zk = ZooKeeper(zk_server.connect_string, session_timeout=asked, timeout=4.0).start()
    try:
        assert zk.negotiated_session_timeout == pytest.approx(granted)
        assert zk.granted_session_timeout == pytest.approx(min(asked, granted)), "leases: shorter"
        with caplog.at_level(logging.INFO, logger="recovery.daemon"):
            say_session(zk)
        assert said in caplog.text
    finally:
        zk.stop()
