"""The leader's order of placement by pool priority (issue 59), on a real ZooKeeper with a
stand-in member (one driver slot) and the leader's looks driven by the test, turn by turn:

- a slot that appears (a daemon joins, a pool's limit is raised: the jobs waiting are looked at
  on the next turn) goes to the higher-priority job waiting for one, not to a
  lower-priority job looked at first for its own reason (a new submission, a backoff that
  ended): that job waits, and says the slot is kept for a job ahead of it;
- a leader that knows nobody waiting yet (it has just taken over) places the highest priority
  first, not the first id.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from recovery.leader.election import LeaderElection
from recovery.leader.grant import LeaderProcess
from recovery.leader.loop import Leadership, Loop
from recovery.settings import DaemonSettings
from tests import jobs
from tests.helpers import HANDS_SESSION, leader_turn
from zkstore.cluster import Cluster
from zkstore.cluster.pools import set_pool
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.job_states import PENDING
from zkstore.records.strict import utc_now
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


@pytest.fixture
def leader(config: StoreConfig, cluster: Cluster) -> Iterator[LeaderProcess]:
    election = LeaderElection(cluster.zk, cluster.layout, "d1", lambda: None)
    election.contend()
    assert election.check()
    settings = DaemonSettings(store=config, daemon_id="d1")
    process = LeaderProcess(cluster, settings, Leadership(election.fence()), Loop(), election)
    process.clock.now()
    set_pool(cluster.zk, cluster.layout, "urgent", priority=10)
    set_pool(cluster.zk, cluster.layout, "bulk", priority=0)
    process.pools_changed()  # what its watch of R/pools does
    yield process
    election.resign()


def member(cluster: Cluster, zk: ZooKeeper, daemon_id: str) -> None:
    """A member with one driver slot, as a daemon registers (in the session ``zk``)."""
    info = MemberInfo(
        version=None, daemon_id=daemon_id, host="h", pid=1, slots=1, started=utc_now()
    )
    zk.create(cluster.layout.member(daemon_id), info.to_bytes(), ephemeral=True)
    zk.ensure_path(cluster.layout.member_assignments(daemon_id))


@pytest.fixture
def hands(config: StoreConfig, cluster: Cluster) -> Iterator[ZooKeeper]:
    """The stand-in members' session: member m1 with one driver slot."""
    zk = ZooKeeper.from_config(config.with_changes(session_timeout=HANDS_SESSION)).start()
    member(cluster, zk, "m1")
    yield zk
    zk.stop()


def submit(cluster: Cluster, job_id: str, pool: str | None = None) -> None:
    definition = JobDefinition.for_function(job_id, jobs.noop, pool=pool, typed_run=True)
    cluster.jobs.submit(definition)


def placed(cluster: Cluster, job_id: str, daemon_id: str = "m1") -> bool:
    return cluster.zk.exists(cluster.layout.assignment(daemon_id, job_id)) is not None


def test_a_new_slot_goes_to_the_higher_priority_job_waiting_not_a_new_one_looked_at_first(
    cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """A daemon joins: the jobs waiting are looked at on the next turn, but a job looked at in
    this turn for its own reason (here: just submitted) is decided first; the new slot is kept
    for the urgent job waiting, and given to it in this very turn."""
    submit(cluster, "blocker")
    leader_turn(leader, ["blocker"])
    assert placed(cluster, "blocker")
    submit(cluster, "urgent", pool="urgent")
    leader_turn(leader, ["urgent"])  # no slot: it waits
    assert not placed(cluster, "urgent")

    member(cluster, hands, "m2")
    leader.fleet_changed()  # what the daemon's turn does with the event of its watch first
    submit(cluster, "late-bulk", pool="bulk")
    leader_turn(leader, ["late-bulk"])  # then the turn's looks
    assert placed(cluster, "urgent", "m2"), "the waiting urgent job got the new slot"
    assert not placed(cluster, "late-bulk", "m2")
    status = cluster.state.status("late-bulk")
    assert status is not None and status.state == PENDING
    assert status.reason is not None and "kept for 1 job(s) ahead" in status.reason, status


def test_a_leader_that_knows_nobody_waiting_places_by_priority_not_by_id(
    cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    for job_id, pool in (("a-bulk", "bulk"), ("m-default", None), ("z-urgent", "urgent")):
        submit(cluster, job_id, pool=pool)
    leader_turn(leader, ["a-bulk", "m-default", "z-urgent"])
    assert placed(cluster, "z-urgent")
    assert not placed(cluster, "a-bulk") and not placed(cluster, "m-default")
