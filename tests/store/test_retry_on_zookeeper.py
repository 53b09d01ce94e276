"""The one retry policy on a real ZooKeeper: a leader record that cannot be replaced is said at
ERROR, and leadership goes on."""

from __future__ import annotations

import logging

import pytest

from recovery.leader.election import LeaderElection
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.records.fleet_records import LeaderInfo
from zkstore.records.record import read_record
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def test_the_leader_record_that_cannot_be_replaced_is_said_at_error_and_leads_on(
    config: StoreConfig, zk: ZooKeeper, caplog: pytest.LogCaptureFixture
) -> None:
    """A persistent node with a child planted at ``R/leader/info``: the leader cannot replace
    it. It says so at ERROR and goes on leading (it used to raise out of the takeover)."""
    with Cluster.open(config) as cluster:
        layout = cluster.layout
        zk.create(f"{layout.leader_info}/child", b"", makepath=True)
        election = LeaderElection(cluster.zk, layout, "d1", lambda: None)
        election.contend()
        assert election.check()
        with caplog.at_level(logging.ERROR, logger="recovery.leader.election"):
            election.publish_info()
        (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert "leading without a leader record" in line
        assert "node has children" in line
        zk.delete(f"{layout.leader_info}/child")
        zk.delete(layout.leader_info)
        election.publish_info()
        info = read_record(zk, LeaderInfo, layout.leader_info)
        assert info is not None and info.daemon_id == "d1"
        assert info.contender == election.node.rsplit("/", 1)[1]  # type: ignore[union-attr]
