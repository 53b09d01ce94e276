"""What a leader keeps of the jobs it has finished: nothing but a bounded cache (issue 62).

The leader's role is driven in this process over many no-op jobs, each through its whole life
(submitted, placed on a stand-in member, its driver's start and end, the member's record of the
exit, the result and the cleanup), and what it holds is compared before and after: the Python
memory allocated by the runtime's and kazoo's code (tracemalloc) and the watches kazoo and
ZooKeeper keep for the leader's session. A leader that kept per-job state (each finished job's
cancel and stop watches, the attempts it said were running) grew by some 700 bytes a job here,
and without bound; a leader that keeps nothing grows by what its bounded cache of cleaned-up
jobs holds (:data:`recovery.leader.grant.CLEANED_KEPT` ids).
"""

from __future__ import annotations

import gc
import logging
import threading
import tracemalloc
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from recovery.daemon import Daemon
from recovery.leader.election import LeaderElection
from recovery.leader.grant import LeaderProcess
from recovery.leader.loop import Leadership, Loop
from recovery.settings import DaemonSettings
from tests import jobs
from tests.helpers import HANDS_SESSION, hands_client, leader_turn, wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper, four_letter_word
from zkstore.jobs.definition import JobDefinition
from zkstore.records.fleet_records import Assignment, MemberInfo
from zkstore.records.job_records import Outcome, RunningInfo
from zkstore.records.job_states import CLEAN, SUCCEEDED
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.ops import Create, Delete
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration

#: Jobs run before the first measure (caches, interned strings, the first batches' buffers),
#: then between the two measures.
WARM_UP, MEASURED = 100, 150
#: What the leader may keep per finished job: the id in its bounded cache of cleaned-up jobs
#: (a dict entry and a short string: about 130 bytes), with room for the noise of one job.
BYTES_PER_JOB = 300
#: The code whose allocations are counted (the test's own and pytest's are not).
COUNTED = ("*/recovery/*", "*/zkstore/*", "*/kazoo/*")


@pytest.fixture
def hands(config: StoreConfig) -> Iterator[ZooKeeper]:
    """The session of the stand-in member and drivers."""
    zk = ZooKeeper.from_config(config.with_changes(session_timeout=HANDS_SESSION)).start()
    yield zk
    zk.stop()


@pytest.fixture
def leader(config: StoreConfig, cluster: Cluster, hands: ZooKeeper) -> Iterator[LeaderProcess]:
    """The leader's role, with member m1 (four slots) in the fleet."""
    election = LeaderElection(cluster.zk, cluster.layout, "d1", lambda: None)
    election.contend()
    assert election.check()
    settings = DaemonSettings(store=config, daemon_id="d1")
    process = LeaderProcess(cluster, settings, Leadership(election.fence()), Loop(), election)
    info = MemberInfo(
        version=None, daemon_id="m1", host="h", pid=1, slots=4, started=parse_time(utc_now())
    )
    hands.create(cluster.layout.member("m1"), info.to_bytes(), ephemeral=True)
    hands.ensure_path(cluster.layout.member_assignments("m1"))
    process.fleet_changed()
    yield process
    election.resign()


def run_job(cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper, job_id: str) -> None:
    """One no-op job's whole life, the leader's part as the daemon's turns do it."""
    layout = cluster.layout
    cluster.jobs.submit(JobDefinition.for_function(job_id, jobs.noop))
    leader_turn(leader, [job_id])  # placed on m1: its running, cancel and stop nodes watched
    running = RunningInfo(version=None, attempt=1, host="h", pid=2, started=parse_time(utc_now()))
    hands.create(layout.running(job_id), running.to_bytes(), ephemeral=True)
    leader_turn(leader, leader.triage(leader.loop.next_events(timeout=0.1)))
    outcome = Outcome(version=None, attempt=1, outcome=SUCCEEDED, finished=parse_time(utc_now()))
    hands.commit(
        [Create(layout.outcome(job_id), outcome.to_bytes()), Delete(layout.running(job_id))]
    )
    path = layout.assignment("m1", job_id)
    assignment = Assignment.from_znode(*hands.get(path), path)
    hands.set(path, replace(assignment, exited="exited with code 0").to_bytes())
    leader_turn(leader, leader.triage(leader.loop.next_events(timeout=0.1)) | {job_id})
    result = cluster.results.get(job_id)
    assert result is not None and result.state == CLEAN, result


def watches_of(zk_server: EmbeddedZooKeeper) -> int:
    """The watches ZooKeeper keeps for every session (``mntr``)."""
    for line in four_letter_word("127.0.0.1", zk_server.port, "mntr").splitlines():
        key, _, value = line.partition("\t")
        if key == "zk_watch_count":
            return int(value)
    raise AssertionError("mntr told no zk_watch_count")


def held(cluster: Cluster) -> tuple[int, int]:
    """The watchers kazoo keeps for the leader's session: data and exists, children."""
    client = cluster.zk.kazoo
    return (
        sum(len(w) for w in client._data_watchers.values()),
        sum(len(w) for w in client._child_watchers.values()),
    )


def allocated(snapshot: tracemalloc.Snapshot) -> int:
    counted = [tracemalloc.Filter(True, pattern) for pattern in COUNTED]
    return sum(stat.size for stat in snapshot.filter_traces(counted).statistics("filename"))


def test_a_leader_keeps_nothing_of_the_jobs_it_has_finished(
    zk_server: EmbeddedZooKeeper, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    for n in range(WARM_UP):
        run_job(cluster, leader, hands, f"warm-{n:03d}")
    leader.loop.next_events(timeout=0)  # the cleanups' own events: stale, as the daemon skips
    gc.collect()
    watchers, server_watches = held(cluster), watches_of(zk_server)
    # The test runner keeps every log record of a test for its report, and their arguments
    # (job ids, times) were allocated by the code counted here: its memory, not the leader's.
    # How many records there are depends on the levels earlier tests of this worker left.
    logging.disable(logging.CRITICAL)
    tracemalloc.start(1)
    try:
        before = allocated(tracemalloc.take_snapshot())
        for n in range(MEASURED):
            run_job(cluster, leader, hands, f"job-{n:03d}")
        leader.loop.next_events(timeout=0)
        gc.collect()
        grown = allocated(tracemalloc.take_snapshot()) - before
    finally:
        tracemalloc.stop()
        logging.disable(logging.NOTSET)
    per_job = grown / MEASURED
    assert held(cluster) == watchers, "kazoo keeps no watcher of a finished job"
    assert watches_of(zk_server) <= server_watches, "nor does ZooKeeper keep its watches"
    per_job = grown / MEASURED
    assert per_job < BYTES_PER_JOB, f"the leader grew by {per_job:.0f} bytes per finished job"


def test_a_daemon_keeps_nothing_of_the_drivers_it_has_run(
    config: StoreConfig, tmp_path: Path
) -> None:
    """A whole daemon in this process, leader and member, running real drivers of no-op jobs:
    once every job is over, nothing of them is left in what it keeps. Its member kept every
    launch it made (the process, its paths) and the watch of each attempt's ``end`` node, its
    leader each job's cancel and stop watches."""
    settings = DaemonSettings(
        store=config,
        daemon_id="solo",
        log_dir=str(tmp_path / "logs"),
        work_dir=str(tmp_path / "work"),
    )
    daemon = Daemon(settings)
    thread = threading.Thread(target=daemon.run, kwargs={"install_signals": False})
    thread.start()
    try:
        wait_for(lambda: daemon.is_leader, timeout=30, what="leadership")
        assert daemon.cluster is not None and daemon.member is not None
        client = daemon.cluster.zk.kazoo
        with hands_client(config) as submitter:

            def run_all(count: int, prefix: str) -> None:
                ids = [
                    submitter.submit_function(jobs.noop, job_id=f"{prefix}-{n}")
                    for n in range(count)
                ]
                for job_id in ids:
                    assert submitter.wait(job_id, timeout=60).outcome == SUCCEEDED

            run_all(3, "warm")
            wait_for(lambda: not daemon.member.launches, timeout=30, what="the warm-up forgotten")
            watchers = sum(len(w) for w in client._data_watchers.values())
            run_all(12, "job")
            # the member looks again when the leader removes the assignments of the jobs it has
            # finished: within moments of the last result
            wait_for(lambda: not daemon.member.launches, timeout=30, what="launches forgotten")
            wait_for(
                lambda: sum(len(w) for w in client._data_watchers.values()) <= watchers,
                timeout=30,
                what="no watch of a finished job left",
            )
    finally:
        daemon.request_stop()
        thread.join(timeout=60)
