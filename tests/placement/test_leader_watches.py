"""The leader's watches of a job's nodes, and the events they leave behind once it is gone.

A job's cleanup deletes nodes the leader watches (its assignment, its cancel node): the events
of those watches arrive after the job is gone, and a look at it then reads a dozen nodes to find
nothing to do; the job listing tells of the handle's delete too. They are told apart
(``LeaderProcess.outlived``) and skipped by the daemon; a job submitted again under the same id
is looked at as any new job. So are the events of a job whose result is recorded and whose
cleanup waits for the slots it freed to be refilled (the last tests).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from kazoo.protocol.states import EventType, KazooState, WatchedEvent

from recovery.leader import actions, finished
from recovery.leader.election import LeaderElection
from recovery.leader.grant import LeaderProcess
from recovery.leader.loop import Event, Leadership, Loop
from recovery.leader.watches import Fired
from recovery.settings import DaemonSettings
from tests import jobs
from tests.helpers import HANDS_SESSION, leader_turn, requests_sent, wait_for
from zkstore.cluster import Cluster
from zkstore.cluster.triage import forget
from zkstore.config import StoreConfig
from zkstore.errors import StoreUnavailable
from zkstore.jobs import history
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.graph import ADDED, REMOVED
from zkstore.jobs.history import JobHistory
from zkstore.jobs.logs import JobLogs
from zkstore.jobs.request_pins import gone_ops
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.lifecycle.stopstore import StopStore
from zkstore.records.fleet_records import Assignment, MemberInfo
from zkstore.records.job_records import Outcome, RunningInfo
from zkstore.records.job_states import CLEAN, PENDING, SUCCEEDED
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.ops import Create, Delete
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


@pytest.fixture
def leader(config: StoreConfig, cluster: Cluster) -> Iterator[LeaderProcess]:
    election = LeaderElection(cluster.zk, cluster.layout, "d1", lambda: None)
    election.contend()
    assert election.check()
    settings = DaemonSettings(store=config, daemon_id="d1")
    process = LeaderProcess(cluster, settings, Leadership(election.fence()), Loop(), election)
    process.clock.now()  # ZooKeeper's time, measured at takeover as start() does (a write)
    yield process
    election.resign()


def events_of(leader: LeaderProcess, job_id: str, timeout: float) -> list[Event]:
    """The loop's events about ``job_id``, once at least one came (within ``timeout``)."""
    deadline = time.monotonic() + timeout
    found: list[Event] = []
    while not found and time.monotonic() < deadline:
        events = leader.loop.next_events(timeout=deadline - time.monotonic())
        found += [e for e in events if e.job_id == job_id]
    assert found, f"no event about {job_id} within {timeout} s"
    return found


def test_the_events_of_a_cleaned_up_jobs_watches_are_told_apart(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess
) -> None:
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    leader_turn(leader, ["j"])  # no member: it waits for a slot, its cancel node watched
    cluster.state.request_cancel("j")
    (fired,) = events_of(leader, "j", timeout=config.timeout)
    assert not leader.outlived(fired), "the job lives: its watch's event is a look"
    leader.post("j")
    (posted,) = events_of(leader, "j", timeout=config.timeout)

    leader.post(REMOVED, "j")  # as the listing tells, before the cleanup
    (removed_early,) = events_of(leader, "j", timeout=config.timeout)
    assert not leader.outlived(removed_early), "not cleaned up by this leader: a look"

    leader_turn(leader, ["j"])  # cancelled: finished and cleaned up in the same look
    assert cluster.zk.exists(cluster.layout.job_dir("j")) is None
    assert leader.outlived(fired), "the job is gone: its watches' events are stale"
    leader.post(REMOVED, "j")  # its handle's delete, told by the listing
    (removed,) = events_of(leader, "j", timeout=config.timeout)
    assert leader.outlived(removed), "the cleanup's own delete"
    assert not leader.outlived(posted), "a look asked for is never skipped"

    # Forgotten and submitted again under its id: looked at as a new job, and watched anew.
    forget(cluster, "j")
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    leader.post(ADDED, "j")
    (added,) = events_of(leader, "j", timeout=config.timeout)
    assert not leader.outlived(added)
    leader_turn(leader, ["j"])
    cluster.state.request_cancel("j")
    (again,) = events_of(leader, "j", timeout=config.timeout)
    assert not leader.outlived(again)
    assert leader.outlived(fired)
    assert not leader.outlived(removed), "removed again: the new job's removal is a look"


def test_a_watch_of_an_earlier_leadership_is_never_taken_for_stale(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess
) -> None:
    """The next leadership of the daemon has none of the earlier one's watchers: their events
    are looks, as before (its first reconcile may have read a node before it changed)."""
    cluster.jobs.submit(JobDefinition.for_function("k", jobs.noop))
    leader_turn(leader, ["k"])
    cluster.state.request_cancel("k")
    (fired,) = events_of(leader, "k", timeout=config.timeout)
    settings = DaemonSettings(store=config, daemon_id="d1")
    successor = LeaderProcess(
        cluster, settings, Leadership(leader.election.fence()), Loop(), leader.election
    )
    assert not successor.outlived(fired)


def member(
    cluster: Cluster,
    hands: ZooKeeper,
    daemon_id: str = "m1",
    *,
    warm: int | None = None,
    directory: bool = True,
) -> None:
    """A member in the fleet, as a daemon registers (its record in a session of its own, with
    ``warm`` JVMs ready; then, with ``directory``, its directory of assignments)."""
    layout = cluster.layout
    info = MemberInfo(
        version=None,
        daemon_id=daemon_id,
        host="h",
        pid=1,
        slots=4,
        started=parse_time(utc_now()),
        warm_ready=warm,
    )
    hands.create(layout.member(daemon_id), info.to_bytes(), ephemeral=True)
    if directory:
        hands.ensure_path(layout.member_assignments(daemon_id))


def driver_starts(cluster: Cluster, hands: ZooKeeper, job_id: str, attempt: int = 1) -> None:
    running = RunningInfo(
        version=None, attempt=attempt, host="h", pid=2, started=parse_time(utc_now())
    )
    hands.create(cluster.layout.running(job_id), running.to_bytes(), ephemeral=True)


def placed_and_started(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper, job_id: str
) -> list[Event]:
    """A new job placed on member m1 and its driver of attempt 1 started: the start's events."""
    member(cluster, hands)
    cluster.jobs.submit(JobDefinition.for_function(job_id, jobs.noop))
    leader_turn(leader, [job_id])
    driver_starts(cluster, hands, job_id)
    return events_of(leader, job_id, timeout=config.timeout)


def looked_at(config: StoreConfig, leader: LeaderProcess, job_id: str) -> bool:
    """Whether the next events about ``job_id`` make the leader look at it."""
    return leader.triage(events_of(leader, job_id, timeout=config.timeout)) == {job_id}


def without_a_look(leader: LeaderProcess, events: list[Event]) -> list[str]:
    """``events`` confirmed by the leader with reads, not a look: the requests it sent."""
    with requests_sent(leader.cluster.zk) as sent:
        assert leader.triage(events) == set(), "nothing to decide: no look"
    return sorted(sent)


@pytest.fixture
def hands(config: StoreConfig) -> Iterator[ZooKeeper]:
    """The session of the stand-in member and driver."""
    zk = ZooKeeper.from_config(config.with_changes(session_timeout=HANDS_SESSION)).start()
    yield zk
    zk.stop()


def test_a_drivers_start_that_leaves_nothing_to_decide_costs_a_read_not_a_look(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    started = placed_and_started(config, cluster, leader, hands, "plain")
    status = cluster.state.status("plain")
    assert status is not None and status.daemon_id == "m1", "placed"
    sent = without_a_look(leader, started)
    assert sent == ["GetData", "GetData"], "its running node (watched) and stop node"
    # The read armed the watch again: the driver's end is a look.
    hands.delete(cluster.layout.running("plain"))
    assert looked_at(config, leader, "plain")


@pytest.mark.parametrize(
    "case", ["a limit", "a stop asked", "another attempt's driver", "gone already"]
)
def test_a_drivers_start_with_anything_to_decide_is_a_look(
    case: str, config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    member(cluster, hands)
    summary = {"timeout": 3600.0} if case == "a limit" else None
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop), summary=summary)
    leader_turn(leader, ["j"])
    if case == "a stop asked":
        StopStore(cluster).request("j")
    driver_starts(cluster, hands, "j", attempt=2 if case == "another attempt's driver" else 1)
    started = events_of(leader, "j", timeout=config.timeout)
    if case == "gone already":
        hands.delete(cluster.layout.running("j"))
    assert leader.triage(started) == {"j"}
    if case == "gone already":
        # The confirming read of the absent node set no watch: the look must set one, so that
        # the next driver's start is seen.
        leader_turn(leader, ["j"])
        driver_starts(cluster, hands, "j")
        assert events_of(leader, "j", timeout=config.timeout), "the start after is seen"


def ends_with_outcome(cluster: Cluster, hands: ZooKeeper, job_id: str, attempt: int = 1) -> None:
    """The driver records its outcome with the delete of its ``running`` node."""
    layout = cluster.layout
    outcome = Outcome(
        version=None, attempt=attempt, outcome=SUCCEEDED, finished=parse_time(utc_now())
    )
    hands.commit(
        [Create(layout.outcome(job_id), outcome.to_bytes()), Delete(layout.running(job_id))]
    )


def test_a_drivers_end_with_its_outcome_costs_a_read_and_its_exit_is_the_look(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """A look at the delete of ``running`` would find the outcome and wait for the member to
    record the exit: a read of the outcome and the assignment says so, and the look comes with
    the assignment's watch, when the member records the exit."""
    assert leader.triage(placed_and_started(config, cluster, leader, hands, "plain")) == set()
    ends_with_outcome(cluster, hands, "plain")
    ended = events_of(leader, "plain", timeout=config.timeout)
    sent = without_a_look(leader, ended)
    assert sent == ["GetData", "GetData"], "its outcome and its assignment"
    exit_seen(cluster, hands, "plain")
    assert looked_at(config, leader, "plain")
    leader_turn(leader, ["plain"])
    result = cluster.results.get("plain")
    assert result is not None and result.outcome == SUCCEEDED and result.state == CLEAN


def test_a_short_drivers_start_read_after_its_end_is_taken_as_its_end(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """A driver that is over by the time its start is confirmed: its node is gone, and the
    watch fired by its creation is not there to tell of its delete. Its end is confirmed in the
    same turn (the outcome and the assignment read), and the look waits for the exit."""
    started = placed_and_started(config, cluster, leader, hands, "short")
    ends_with_outcome(cluster, hands, "short")
    sent = without_a_look(leader, started)
    assert sent == ["GetData"] * 4, "its running and stop nodes, its outcome, assignment"
    exit_seen(cluster, hands, "short")
    assert looked_at(config, leader, "short")


@pytest.mark.parametrize(
    "case", ["another attempt's outcome", "the exit recorded", "its member gone", "a stop asked"]
)
def test_a_drivers_end_with_anything_to_decide_is_a_look(
    case: str, config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    assert leader.triage(placed_and_started(config, cluster, leader, hands, "j")) == set()
    if case == "the exit recorded":
        exit_seen(cluster, hands, "j")
    if case == "its member gone":
        hands.delete(cluster.layout.member("m1"))
        leader.fleet_changed()  # as the fleet's watch makes it; its own looks set aside
        assert "m1" not in leader.fleet.members
        leader.loop.next_events(timeout=0)
    if case == "a stop asked":
        StopStore(cluster).request("j")
    ends_with_outcome(cluster, hands, "j", attempt=2 if case == "another attempt's outcome" else 1)
    assert looked_at(config, leader, "j")


def test_a_look_the_leader_scheduled_for_a_job_it_has_cleaned_up_since_is_skipped(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess
) -> None:
    """A wait's bound (most often: for a driver's exit) outlives the job's cleanup: a look
    then would read a dozen nodes to find nothing. Skipped; a look anybody asks for is not."""
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    leader_turn(leader, ["j"])  # no member: it waits
    leader.post_at(time.monotonic(), "j")
    (timer,) = events_of(leader, "j", timeout=config.timeout)
    assert not leader.outlived(timer), "the job lives: a look"
    cluster.state.request_cancel("j")
    leader_turn(leader, ["j"])  # cancelled: finished and cleaned up
    assert cluster.zk.exists(cluster.layout.job_dir("j")) is None
    assert leader.outlived(timer)
    leader.post("j")
    # the cleanup's deletes fired the job's watches too: their events are stale
    events = events_of(leader, "j", timeout=config.timeout)
    (asked,) = [e for e in events if e.data is None]
    assert not leader.outlived(asked)


#: The requests that write to ZooKeeper's log (a failed one too: it is logged and fsynced).
WRITES = ("Transaction", "Create", "Delete", "SetData")


def test_a_no_op_jobs_life_costs_the_leader_one_write_per_step(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """Every write is a proposal and an fsync in ZooKeeper and a round trip of the leader's
    loop: a new job placed at once is made and placed in one transaction, not three; its
    assignment goes with its result; its records are deleted in one transaction, not one per
    node; and nothing is deleted blindly (a delete of what is not there is a failed write,
    logged as well)."""
    member(cluster, hands)
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    with requests_sent(cluster.zk) as placing:
        leader_turn(leader, ["j"])
    assert cluster.zk.exists(cluster.layout.assignment("m1", "j")) is not None, "placed"
    # its node, its status, its assignment and its history, all in one
    assert [r for r in placing if r in WRITES] == ["Transaction"], placing
    (placed,) = history.read(cluster.zk, cluster.layout.history("j"), JobHistory).entries()
    assert (placed.attempt, placed.daemon, placed.outcome) == (1, "m1", history.PLACED)

    layout = cluster.layout
    succeeds(cluster, hands, "j")
    with requests_sent(cluster.zk, paths=True) as finishing:
        leader_turn(leader, ["j"])
    result = cluster.results.get("j")
    assert result is not None and result.outcome == SUCCEEDED and result.state == CLEAN
    assert cluster.zk.exists(layout.job_dir("j")) is None
    assert cluster.zk.exists(layout.assignment("m1", "j")) is None
    # the result with the assignment's delete; the records; the handle's mark and then the
    # handle (its payload deleted between them); the result marked clean. The history's end
    # is not written to its record, which goes: it is in the history kept beside the logs.
    kinds = [r.split()[0] for r in finishing]
    assert [r for r in kinds if r in WRITES] == ["Transaction"] * 5, finishing
    # reads: no listing of a record that has no children (the records are one level deep), no
    # look for the cleanup index entry a DIRTY result always has: the job's snapshot, its
    # artifacts, its checkpoints and its records are listed; the one look is for a lock; the
    # result is read once, by the snapshot (none yet), not again once the leader wrote it
    assert (kinds.count("GetChildren"), kinds.count("Exists")) == (4, 1), finishing
    assert finishing.count(f"GetData {layout.result('j')}") == 1, finishing
    kept = JobLogs(cluster.storage, cluster.storage_layout, "j").kept_history()
    assert kept is not None
    (ended,) = JobHistory.from_znode(kept, None, "kept").entries()
    assert (ended.attempt, ended.daemon, ended.outcome) == (1, "m1", history.SUCCEEDED)
    assert ended.placed == placed.placed and ended.ended is not None


def succeeds(cluster: Cluster, hands: ZooKeeper, job_id: str, member_id: str = "m1") -> None:
    """The driver of attempt 1 starts, records SUCCEEDED, and its member sees it exit."""
    layout = cluster.layout
    driver_starts(cluster, hands, job_id)
    outcome = Outcome(version=None, attempt=1, outcome=SUCCEEDED, finished=parse_time(utc_now()))
    hands.commit(
        [Create(layout.outcome(job_id), outcome.to_bytes()), Delete(layout.running(job_id))]
    )
    exit_seen(cluster, hands, job_id, member_id)


def exit_seen(cluster: Cluster, hands: ZooKeeper, job_id: str, member_id: str = "m1") -> None:
    """The member records its driver's exit in the job's assignment."""
    path = cluster.layout.assignment(member_id, job_id)
    assignment = Assignment.from_znode(*hands.get(path), path)
    hands.set(path, replace(assignment, exited="exited with code 0").to_bytes())


def told(zk: ZooKeeper, data: bytes | None = None, path: str = "") -> list[tuple[Any, ...]]:
    """The attempts a history tells of: its record at ``path``, or ``data``."""
    if data is None:
        record = history.read(zk, path, JobHistory)
        assert record is not None, f"no history at {path}"
    else:
        record = JobHistory.from_znode(data, None, "kept")
    return [(e.attempt, e.daemon, e.outcome) for e in record.entries()]


def test_a_new_jobs_placement_makes_its_node_unless_it_is_there(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """A new job's node may be there before its status (a control change, a stop or a
    schedule's run made it) without a listing to say so: the placement is made without it."""
    member(cluster, hands)
    for job_id in ("a", "b"):
        cluster.jobs.submit(JobDefinition.for_function(job_id, jobs.noop))
    hands.create(cluster.layout.job_dir("a"))
    leader_turn(leader, ["a", "b"])
    for job_id in ("a", "b"):
        status = cluster.state.status(job_id)
        assert status is not None and status.daemon_id == "m1" and status.version == 0
        path = cluster.layout.assignment("m1", job_id)
        assert Assignment.from_znode(*cluster.zk.get(path), path).status_version == 0


def test_a_new_job_initialized_behind_the_leaders_back_is_placed_at_the_next_look(
    config: StoreConfig,
    cluster: Cluster,
    leader: LeaderProcess,
    hands: ZooKeeper,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between the leader's read of a new job and its placement, another writer (a deposed
    leader's last write) creates the status: the placement fails as a whole, its slot is
    given back, and the job is placed at its next look, from the status that is there."""
    member(cluster, hands)
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    layout = cluster.layout
    flush = leader.actions.flush_starts

    def initialized_first() -> None:
        status = leader.actions.status(JobSnapshot(job_id="j"), state=PENDING, attempt=0)
        hands.commit([Create(layout.job_dir("j")), Create(layout.status("j"), status.to_bytes())])
        flush()

    monkeypatch.setattr(leader.actions, "flush_starts", initialized_first)
    leader_turn(leader, ["j"])
    assert cluster.zk.exists(layout.assignment("m1", "j")) is None, "not placed"
    assert "j" not in leader.fleet.members["m1"].assigned, "its slot given back"
    monkeypatch.setattr(leader.actions, "flush_starts", flush)
    leader_turn(leader, ["j"])
    status = cluster.state.status("j")
    assert status is not None and status.daemon_id == "m1" and status.version == 1


def test_a_first_placement_that_finds_a_history_there_goes_on_and_replaces_it(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """A first placement makes the job's history in its own transaction; a node there already
    (planted, garbage) must not keep the job from starting: it is placed without it, and the
    history's separate write replaces the garbage."""
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    leader_turn(leader, ["j"])  # no member yet: its records made, waiting for a slot
    path = cluster.layout.history("j")
    hands.create(path, b"\x00 not a history")
    member(cluster, hands)
    leader.reconcile_all()  # the fleet read again: the member joined
    assert cluster.zk.exists(cluster.layout.assignment("m1", "j")) is not None, "placed"
    assert told(cluster.zk, path=path) == [(1, "m1", history.PLACED)]


def test_a_cleanup_that_must_wait_tells_the_attempts_end_in_the_record_it_keeps(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """The end of a finished job's last attempt goes straight into the history kept beside its
    logs; a cleanup that cannot finish yet (a checkpoint another session still locks) leaves
    the records a while, and the end is told there, so that the page says it meanwhile and the
    copy kept when the cleanup finishes has it."""
    member(cluster, hands)
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    leader_turn(leader, ["j"])
    checkpoints = cluster.checkpoints("j")
    checkpoints.add({"step": 1})
    (name,) = checkpoints.handles.names()
    lock = f"{checkpoints.handles.node(name)}/locks/another-instance"
    hands.create(lock, b"", ephemeral=True)
    succeeds(cluster, hands, "j")
    leader_turn(leader, ["j"])
    result = cluster.results.get("j")
    assert result is not None and result.state != CLEAN, "recorded; the cleanup waits"
    path = cluster.layout.history("j")
    assert told(cluster.zk, path=path) == [(1, "m1", history.SUCCEEDED)]

    hands.delete(lock)
    leader_turn(leader, ["j"])
    result = cluster.results.get("j")
    assert result is not None and result.state == CLEAN
    kept = JobLogs(cluster.storage, cluster.storage_layout, "j").kept_history()
    assert told(cluster.zk, kept) == [(1, "m1", history.SUCCEEDED)]


def test_a_cleanup_that_waits_past_the_records_has_kept_the_end_beside_the_logs(
    config: StoreConfig,
    cluster: Cluster,
    leader: LeaderProcess,
    hands: ZooKeeper,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A cleanup that waits only for the definition's lock (a driver's session not yet gone)
    has deleted the records, and kept the history with the end: nothing left to tell, and no
    warning about a record it could not write."""
    member(cluster, hands)
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    leader_turn(leader, ["j"])
    lock = f"{cluster.layout.current_jobs}/j/locks/a-driver"
    hands.create(lock, b"", ephemeral=True)
    succeeds(cluster, hands, "j")
    with caplog.at_level(logging.INFO):
        leader_turn(leader, ["j"])
    assert cluster.zk.exists(cluster.layout.job_dir("j")) is None, "the records are gone"
    kept = JobLogs(cluster.storage, cluster.storage_layout, "j").kept_history()
    assert told(cluster.zk, kept) == [(1, "m1", history.SUCCEEDED)]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    hands.delete(lock)
    leader_turn(leader, ["j"])
    result = cluster.results.get("j")
    assert result is not None and result.state == CLEAN


def test_a_new_job_with_no_free_slot_is_created_with_the_reason_it_waits(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """A backlog's every job waits for a slot when it is new: its status is created with the
    reason (one write), not created and then given the reason (two)."""
    member(cluster, hands)  # 4 slots
    for n in range(4):
        cluster.jobs.submit(JobDefinition.for_function(f"busy{n}", jobs.noop))
    leader_turn(leader, [f"busy{n}" for n in range(4)])
    assert len(leader.fleet.assignments["m1"]) == 4, "every slot taken"
    cluster.jobs.submit(JobDefinition.for_function("queued", jobs.noop))
    with requests_sent(cluster.zk) as queuing:
        leader_turn(leader, ["queued"])
    assert [r for r in queuing if r in WRITES] == ["Transaction"], queuing
    status = cluster.state.status("queued")
    assert status is not None and status.state == PENDING
    assert status.reason == "all 4 driver slot(s) of the daemons that can run it are in use"


def test_an_assignment_gone_behind_the_leaders_back_leaves_the_result_recorded(
    config: StoreConfig,
    cluster: Cluster,
    leader: LeaderProcess,
    hands: ZooKeeper,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The result goes with the assignment's delete; if the assignment is deleted by another
    session between the leader's read of the job and that transaction, the transaction fails as
    a whole and the result is recorded alone; the member's slot is freed either way."""
    member(cluster, hands)
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    leader_turn(leader, ["j"])
    layout = cluster.layout
    path = layout.assignment("m1", "j")
    assert "j" in leader.fleet.assignments.get("m1", ()), "placed, as the fleet knows"
    succeeds(cluster, hands, "j")
    record = cluster.results.create_dirty

    def deleted_first(*args: Any, **kwargs: Any) -> Any:
        if hands.exists(path) is not None:
            hands.delete(path)  # the leader has read the job: it still believes in the assignment
        return record(*args, **kwargs)

    monkeypatch.setattr(cluster.results, "create_dirty", deleted_first)
    with requests_sent(cluster.zk) as finishing:
        leader_turn(leader, ["j"])
    result = cluster.results.get("j")
    assert result is not None and result.outcome == SUCCEEDED and result.state == CLEAN
    assert cluster.zk.exists(layout.job_dir("j")) is None
    assert "j" not in leader.fleet.assignments.get("m1", ()), "the slot is free"
    # the result with the assignment's delete (refused as a whole), the result alone, then the
    # rest of the cleanup as in a job's ordinary end
    assert [r for r in finishing if r in WRITES] == ["Transaction"] * 6, finishing


def test_a_look_asks_again_only_for_the_watches_that_fired(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """A placed job is watched on its cancel, stop, running and assignment nodes. A second look
    with none of them changed asks for none again (a watch that has not fired is still armed);
    once one fired, the look after asks for that one only, and it fires again."""
    layout = cluster.layout
    member(cluster, hands)
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    with requests_sent(cluster.zk) as placing:
        leader_turn(leader, ["j"])
    assert placing.count("Exists") == 4, placing
    with requests_sent(cluster.zk) as again:
        leader_turn(leader, ["j"])
    assert "Exists" not in again, "every watch still armed"

    StopStore(cluster).request("j")
    stopped = events_of(leader, "j", timeout=config.timeout)
    assert [e.data.created for e in stopped if isinstance(e.data, Fired)] == [layout.stop("j")]
    assert leader.triage(stopped) == {"j"}, "a stop asked: a look at once"
    with requests_sent(cluster.zk) as looking:
        leader_turn(leader, ["j"])
    assert looking.count("Exists") == 1, "the stop node's watch, armed again"
    hands.commit(gone_ops(layout.stop("j"), pinned=True))  # as a resume deletes it
    resumed = events_of(leader, "j", timeout=config.timeout)
    assert leader.triage(resumed) == {"j"}


def test_a_session_event_disarms_every_watch_of_the_job(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """Kazoo fires every pending watch with a session event (no path) when the connection is
    suspended, and does not set them again: the look after asks for all of them again."""
    member(cluster, hands)
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    leader_turn(leader, ["j"])
    watcher = leader.watches.watcher("j")
    assert len(watcher.armed) == 4
    watcher(WatchedEvent(EventType.NONE, KazooState.SUSPENDED, None))
    assert watcher.armed == set()
    with requests_sent(cluster.zk) as looking:
        leader_turn(leader, ["j"])
    assert looking.count("Exists") == 4, looking


def test_a_freed_slot_is_refilled_in_the_turn_that_frees_it_before_the_cleanup(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """A backlog of short jobs: the look at a job whose driver ended records its result (its
    slot freed with it) and places the job waiting longest in the same turn; the finished job's
    cleanup (a dozen writes and storage deletes) comes after, and the events of the job in
    between are not looks. Before, the slot waited for every cleanup of the turn, then for a
    turn more: the look its freeing asked for."""
    member(cluster, hands)  # 4 slots
    for n in range(4):
        cluster.jobs.submit(JobDefinition.for_function(f"busy{n}", jobs.noop))
    leader_turn(leader, [f"busy{n}" for n in range(4)])
    cluster.jobs.submit(JobDefinition.for_function("queued", jobs.noop))
    leader_turn(leader, ["queued"])
    assert cluster.state.status("queued").state == PENDING  # type: ignore[union-attr]
    layout = cluster.layout
    succeeds(cluster, hands, "busy0")

    with requests_sent(cluster.zk, paths=True) as turn:
        leader.reconcile(["busy0"])
    writes = [r for r in turn if r.split()[0] in WRITES]
    assert len(writes) == 2, writes
    assert layout.result("busy0") in writes[0], "first the result, with the assignment's delete"
    assert layout.assignment("m1", "queued") in writes[1], "then the placement, in the same turn"
    assert cluster.zk.exists(layout.job_dir("busy0")) is not None, "not cleaned up yet"
    assert leader.cleanups_pending and "busy0" in leader.actions.finished
    # the assignment's delete fired the leader's watch: nothing is left to decide for busy0
    assert leader.triage(events_of(leader, "busy0", timeout=config.timeout)) == set()

    leader.clean_up_finished()
    result = cluster.results.get("busy0")
    assert result is not None and result.state == CLEAN
    assert cluster.zk.exists(layout.job_dir("busy0")) is None
    assert not leader.cleanups_pending


def test_the_cleanups_give_way_to_the_next_event_one_at_least_each_time(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """The daemon's member launches what the turn placed on it from an event of the loop: the
    cleanups stop when one waits (after at least one), and go on at the end of the next turn."""
    member(cluster, hands)
    for name in ("a", "b"):
        cluster.jobs.submit(JobDefinition.for_function(name, jobs.noop))
    leader_turn(leader, ["a", "b"])
    for name in ("a", "b"):
        succeeds(cluster, hands, name)
    leader.reconcile(["a", "b"])
    leader.loop.post(Event("assignments"))  # the member's watch: its turn comes first
    leader.clean_up_finished()
    assert [name in leader.actions.finished for name in ("a", "b")] == [False, True]
    assert cluster.zk.exists(cluster.layout.job_dir("a")) is None
    leader.clean_up_finished()  # the next turn
    assert not leader.cleanups_pending
    assert cluster.zk.exists(cluster.layout.job_dir("b")) is None


def test_a_cleanup_an_outage_stopped_is_kept_and_tried_again_after_a_while(
    config: StoreConfig,
    cluster: Cluster,
    leader: LeaderProcess,
    hands: ZooKeeper,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Storage or ZooKeeper unavailable in a cleanup: the daemon's turn reports the outage;
    the cleanup is kept (its result is DIRTY, for a successor too) and tried again after
    ``finished.RETRY``, not at every turn (the loop does not wait for events while one is
    pending: it would spin)."""
    member(cluster, hands)
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    leader_turn(leader, ["j"])
    succeeds(cluster, hands, "j")
    leader.reconcile(["j"])

    def unavailable(*args: object, **kwargs: object) -> bool:
        raise StoreUnavailable("storage unreachable (injected)")

    monkeypatch.setattr(actions, "clean_up", unavailable)
    with pytest.raises(StoreUnavailable):
        leader.clean_up_finished()
    assert "j" in leader.actions.finished and not leader.cleanups_pending, "kept, not now"
    leader.clean_up_finished()  # a turn meanwhile: nothing tried
    monkeypatch.undo()
    retried = wait_for(lambda: leader.cleanups_pending, timeout=2 * finished.RETRY)
    assert retried, f"tried again within {2 * finished.RETRY} s"
    leader.clean_up_finished()
    assert cluster.zk.exists(cluster.layout.job_dir("j")) is None
    result = cluster.results.get("j")
    assert result is not None and result.state == CLEAN


def test_a_short_drivers_outcome_made_after_a_looks_listing_is_read_once_its_exit_is_seen(
    config: StoreConfig,
    cluster: Cluster,
    leader: LeaderProcess,
    hands: ZooKeeper,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seen in the upgrade test: a look lists a job's records (its driver still runs), the
    driver records its outcome and exits, its member records the exit, and the look then reads
    the assignment: an exit with no outcome in the list was taken for a lost attempt, and the
    job ran again. The outcome is read again once an exit is seen: SUCCEEDED, one attempt."""
    placed_and_started(config, cluster, leader, hands, "brief")
    real = leader.cluster.zk.children_many
    job_dir = cluster.layout.job_dir("brief")

    def listed_before_the_end(paths: Any, **kwargs: Any) -> Any:
        found = real(paths, **kwargs)
        if job_dir in paths:
            succeeds_after_listing()
        return found

    def succeeds_after_listing() -> None:
        monkeypatch.setattr(leader.cluster.zk, "children_many", real)
        ends_with_outcome(cluster, hands, "brief")
        exit_seen(cluster, hands, "brief")

    monkeypatch.setattr(leader.cluster.zk, "children_many", listed_before_the_end)
    leader_turn(leader, ["brief"])
    result = cluster.results.get("brief")
    assert result is not None and result.outcome == SUCCEEDED and result.attempts == 1


def test_a_member_whose_directory_came_after_the_fleet_was_read_gets_its_first_job_at_once(
    config: StoreConfig, cluster: Cluster, leader: LeaderProcess, hands: ZooKeeper
) -> None:
    """A daemon registers in two writes: its record, then its directory of assignments. A
    leader that read the fleet between them creates the directory with the first placement
    there, found it made, and gave the job up for that turn; the next went to a daemon without
    the warm JVM this one had ready (seen in CI: tests/spark/test_warm_placement.py's first
    job). The directory made meanwhile is taken as it is, as the job's own node is."""
    layout = cluster.layout
    member(cluster, hands, "a")  # no warm drivers: every tie goes to it, by id
    member(cluster, hands, "w", warm=1, directory=False)  # its record, not yet its directory
    leader.fleet_changed()  # the fleet read between the member's two writes
    assert "w" in leader.fleet.members and "w" not in leader.fleet.assignments
    hands.ensure_path(layout.member_assignments("w"))  # its second write
    cluster.jobs.submit(JobDefinition.for_function("first", jobs.noop))
    leader_turn(leader, ["first"])
    assert cluster.zk.exists(layout.assignment("w", "first")) is not None, "placed at once"
    status = cluster.state.status("first")
    assert status is not None and status.daemon_id == "w"
