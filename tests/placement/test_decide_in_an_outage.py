"""The leader's decision for one job reads ZooKeeper (``--after``: the dependencies' records).
An outage during that read is the cluster's, not the job's: the turn ends with it (the daemon
tries again when ZooKeeper answers), and the job is not quarantined as "internal error
deciding" (the guard of invariant 6 is for records nobody foresaw, not for an outage)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from recovery.leader.dependency_gate import DependencyGate
from recovery.leader.election import LeaderElection
from recovery.leader.grant import LeaderProcess
from recovery.leader.loop import Leadership, Loop
from recovery.settings import DaemonSettings
from tests import jobs
from tests.helpers import hands_client, leader_turn
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import StoreUnavailable
from zkstore.records.job_states import PENDING
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


@pytest.fixture
def leading(config: StoreConfig, cluster: Cluster) -> Iterator[LeaderProcess]:
    """This process as the elected leader, its turns driven by the test (no member: nothing
    is placed, the jobs wait)."""
    election = LeaderElection(cluster.zk, cluster.layout, "d1", lambda: None)
    election.contend()
    assert election.check()
    leadership = Leadership(election.fence())
    yield LeaderProcess(
        cluster, DaemonSettings(store=config, daemon_id="d1"), leadership, Loop(), election
    )
    election.resign()


def test_an_outage_reading_a_jobs_dependencies_ends_the_turn_and_quarantines_nothing(
    config: StoreConfig, cluster: Cluster, leading: LeaderProcess
) -> None:
    with hands_client(config) as client:
        client.submit_function(jobs.noop, job_id="first")
        client.submit_function(jobs.noop, job_id="second", after=["first"])
    leader_turn(leading, ["first", "second"])
    status = cluster.state.status("second")
    assert status is not None and status.state == PENDING and "first" in (status.reason or "")

    gone = ZooKeeper(config.zk_hosts, session_timeout=4.0, timeout=1.0).start()
    gone.stop()  # a session that no longer answers: each read raises StoreUnavailable
    answering, leading.dependencies = leading.dependencies, DependencyGate(gone, cluster.layout)
    with pytest.raises(StoreUnavailable):
        leading.reconcile(["second"])
    assert cluster.zk.exists(cluster.layout.quarantine_entry("second")) is None
    status = cluster.state.status("second")
    assert status is not None and status.state == PENDING, status

    leading.dependencies = answering  # ZooKeeper answers again: it waits, as before
    leader_turn(leading, ["second"])
    status = cluster.state.status("second")
    assert status is not None and status.state == PENDING and "first" in (status.reason or "")
