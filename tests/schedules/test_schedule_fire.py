"""Firing a schedule's windows against the real ZooKeeper: one fenced transaction per window,
so that no window ever makes a second run (a repeated fire, a lost state, a deposed leader, a
crash between writing the run's definition and committing it), each run records its window, and
the concurrency and catchup policies hold.

Every fire is given its clock ("now"), so no test waits for a window to come.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from recovery.leader.election import LeaderElection
from tests.helpers import crash, expire_session, plant, wait_for
from zkstore.admin.lingering import ORPHAN_PAYLOAD, find_lingering
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import NotLeader, OutcomeUnknown, UntrustedPayload, VersionConflict
from zkstore.jobs.definition import JobDefinition
from zkstore.payloads.storage import StateStorage
from zkstore.records.handle import Handle
from zkstore.records.job_records import CancelRequest
from zkstore.records.job_states import SUCCEEDED
from zkstore.records.record import read_record
from zkstore.records.strict import time_text
from zkstore.schedules.fire import Firer
from zkstore.schedules.runs import run_id, run_summary
from zkstore.schedules.schedule_records import FIRED, MISSED, SKIPPED, ScheduleSpec
from zkstore.schedules.schedule_store import ScheduleStore
from zkstore.schedules.transaction import build_fire
from zkstore.signing import JobKey, Signer, derive_job_key
from zkstore.zookeeper.ops import Create, Fence, Op

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 24, 2, tzinfo=UTC)
NAME = "nightly"


def noop(ctx: object) -> None:
    return None


def at(hours: float, seconds: float = 1) -> datetime:
    return START + timedelta(hours=hours, seconds=seconds)


@dataclass
class Leader:
    """A leadership as the daemon has one: a contender node, its fence, and a firer."""

    cluster: Cluster
    election: LeaderElection
    schedules: ScheduleStore
    firer: Firer

    @property
    def fence(self) -> Fence:
        return self.election.fence()


def lead(cluster: Cluster, daemon: str = "d1") -> Leader:
    election = LeaderElection(cluster.zk, cluster.layout, daemon, lambda: None)
    election.contend()
    schedules = ScheduleStore.for_config(cluster.config, cluster.zk)
    return Leader(cluster, election, schedules, Firer.for_cluster(cluster, schedules))


@pytest.fixture
def signed(config: StoreConfig) -> StoreConfig:
    return config.with_changes(signing_key=b"the cluster's key")


@pytest.fixture
def leader(signed: StoreConfig) -> Iterator[Leader]:
    with Cluster.open(signed) as cluster:
        yield lead(cluster)


def create(leader: Leader, **changes: object) -> ScheduleSpec:
    values: dict[str, object] = {
        "version": None,
        "name": NAME,
        "created": START - timedelta(days=1),
        "cron": "0 * * * *",
        "start_at": START,
        "timezone": "Europe/Berlin",
    }
    values.update(changes)
    spec = ScheduleSpec(**values)  # type: ignore[arg-type]
    definition = JobDefinition.for_function(str(values["name"]), noop, max_attempts=2)
    return leader.schedules.create(spec, definition).spec


def current_jobs(cluster: Cluster) -> list[str]:
    return sorted(cluster.zk.children(cluster.layout.current_jobs))


# -- a window fires once --------------------------------------------------------------------------


def test_a_fired_window_is_a_job_that_records_its_window_and_runs_with_its_own_key(
    leader: Leader,
) -> None:
    create(leader)
    report = leader.firer.fire(NAME, leader.fence, at(1))
    job = run_id(NAME, START + timedelta(hours=1))
    assert report.fired == [(START + timedelta(hours=1), job)]
    assert report.recorded == 1  # the window at START: late, catchup latest keeps only the newest
    assert report.next == START + timedelta(hours=2)
    assert current_jobs(leader.cluster) == [job]

    handle = leader.cluster.jobs.summaries()[job]
    assert handle.summary["schedule"] == NAME
    assert handle.summary["scheduled"] == "2026-11-24T03:00:00Z"
    assert handle.summary["max_attempts"] == 2
    # the run's payload is its own: under its prefix, signed with its job key, its own id inside
    assert leader.cluster.storage.is_under(
        handle.uri, leader.cluster.storage_layout.definitions(job)
    )
    driver = StateStorage(
        leader.cluster.config.storage_url, signer=leader.cluster.config.for_job(job).signer
    )
    driver.read(handle.ref)
    assert leader.cluster.jobs.recover(job, lock=False).state.job_id == job
    # ...and a driver of the run cannot read the schedule's definition
    with pytest.raises(UntrustedPayload):
        driver.read(leader.schedules.spec(NAME).handle.ref)

    state = leader.schedules.get(NAME).state
    assert (state.last, state.last_run) == (START + timedelta(hours=1), job)
    assert [(e.outcome, e.job) for e in state.history] == [(MISSED, None), (FIRED, job)]


def test_the_same_window_fired_again_is_a_no_op(leader: Leader) -> None:
    create(leader)
    leader.firer.fire(NAME, leader.fence, at(1))
    version = leader.schedules.get(NAME).state.version
    again = leader.firer.fire(NAME, leader.fence, at(1, seconds=30))
    assert again.fired == [] and again.recorded == 0
    assert leader.schedules.get(NAME).state.version == version
    assert current_jobs(leader.cluster) == [run_id(NAME, START + timedelta(hours=1))]


def test_a_fire_built_from_a_stale_read_fails_atomically(leader: Leader) -> None:
    """Two leaders (or a retry) that read the same state: the second transaction fails on the
    state's version and creates nothing, though its run's job id would be new."""
    create(leader)
    stale = leader.schedules.get(NAME)
    leader.firer.fire(NAME, leader.fence, at(1))
    other, summary = leader.firer._run_of(
        stale.spec, START + timedelta(hours=1, minutes=30), "x-1", None
    )
    assert stale.spec.version is not None and stale.state.version is not None
    transaction = build_fire(
        leader.schedules.layout,
        NAME,
        spec_version=stale.spec.version,
        state=stale.state,
        state_version=stale.state.version,
        leader=leader.fence,
    )
    with pytest.raises(VersionConflict):
        leader.cluster.jobs.submit(
            other, summary=summary, fence=transaction.fence, with_ops=transaction.ops
        )
    assert current_jobs(leader.cluster) == [run_id(NAME, START + timedelta(hours=1))]
    assert not [f for f in find_lingering(leader.cluster, min_age=0) if f.kind == ORPHAN_PAYLOAD]


def test_a_fire_and_a_submission_publish_the_same_handle_for_the_same_definition(
    leader: Leader,
) -> None:
    """Issue 46: one way to make a job. The run a fire made, and the same definition with the
    same summary submitted to that id again through the job store, have the same payload
    (byte for byte) and the same handle, but for what names that payload and when it was
    made (its key, its signature over that key, its creation time)."""
    create(leader)
    leader.firer.fire(NAME, leader.fence, at(1))
    job = run_id(NAME, START + timedelta(hours=1))
    jobs = leader.cluster.jobs
    fired = jobs.handles.get_handle(job)
    definition = jobs.recover(job, lock=False).state
    payload = leader.cluster.storage.read(jobs.handles.payload_ref(job, fired))
    extra = {k: v for k, v in fired.summary.items() if k not in definition.summary()}
    assert set(extra) >= {"schedule", "scheduled"}
    assert jobs.remove(job)
    submitted = jobs.submit(definition, summary=extra)
    assert leader.cluster.storage.read(jobs.handles.payload_ref(job, submitted)) == payload

    def named_apart(handle: Handle) -> dict[str, object]:
        fields = json.loads(handle.to_bytes())
        return {k: v for k, v in fields.items() if k not in ("uri", "hmac", "created")}

    assert named_apart(submitted) == named_apart(fired)
    assert submitted.to_bytes().replace(submitted.uri.encode(), b"U").replace(
        (submitted.hmac or "").encode(), b"H"
    ).replace(time_text(submitted.created).encode(), b"C") == fired.to_bytes().replace(
        fired.uri.encode(), b"U"
    ).replace((fired.hmac or "").encode(), b"H").replace(time_text(fired.created).encode(), b"C")


def test_a_lost_state_never_makes_a_second_run_of_a_window(leader: Leader) -> None:
    """The state reset to before the fire (restored from an old copy, say): the window is
    fired again, and ZooKeeper refuses the second run; the window is recorded as fired once
    more, pointing at the run that exists. Its payload copy is discarded."""
    create(leader)
    state_path = leader.schedules.layout.schedule_state(NAME)
    before = leader.cluster.zk.get(state_path)[0]
    leader.firer.fire(NAME, leader.fence, at(1))
    plant(leader.cluster.zk, state_path, before)
    report = leader.firer.fire(NAME, leader.fence, at(1, seconds=20))
    job = run_id(NAME, START + timedelta(hours=1))
    assert report.fired == [(START + timedelta(hours=1), job)]
    assert current_jobs(leader.cluster) == [job]
    definitions = leader.cluster.storage.list(leader.cluster.storage_layout.definitions(job))
    assert len(definitions) == 1


def test_a_run_that_already_ended_is_never_made_again(leader: Leader) -> None:
    create(leader)
    state_path = leader.schedules.layout.schedule_state(NAME)
    before = leader.cluster.zk.get(state_path)[0]
    leader.firer.fire(NAME, leader.fence, at(1))
    job = run_id(NAME, START + timedelta(hours=1))
    summary = dict(leader.cluster.jobs.summaries()[job].summary)
    leader.cluster.results.create_dirty(job, SUCCEEDED, attempts=1, summary=summary)
    assert leader.cluster.jobs.remove(job)
    plant(leader.cluster.zk, state_path, before)
    report = leader.firer.fire(NAME, leader.fence, at(1, seconds=20))
    assert report.fired == [(START + timedelta(hours=1), job)]
    assert current_jobs(leader.cluster) == []


def test_a_job_that_took_a_runs_id_is_not_taken_for_the_run(leader: Leader) -> None:
    create(leader)
    job = run_id(NAME, START + timedelta(hours=1))
    leader.cluster.jobs.submit(JobDefinition.for_function(job, noop))
    report = leader.firer.fire(NAME, leader.fence, at(1))
    assert report.fired == []
    ((window, reason),) = report.skipped
    assert window == START + timedelta(hours=1) and "taken" in reason
    last = leader.schedules.get(NAME).state.history[-1]
    assert (last.outcome, last.window) == (SKIPPED, START + timedelta(hours=1))


def test_a_run_id_planted_with_the_runs_own_summary_blocks_the_window_visibly(
    leader: Leader,
) -> None:
    """Issue 43: job code creates a future run's id with the summary the run will have (its
    schedule and window), pointing at a payload it signed with its own key. The fire does not
    take it for the run: the window is recorded skipped as blocked, saying how to clear it."""
    create(leader)
    window = START + timedelta(hours=1)
    job = run_id(NAME, window)
    cluster = leader.cluster
    config = cluster.config
    assert config.signing_key is not None
    own = JobKey(
        config.cluster_id, "planter", derive_job_key(config.signing_key, "default", "planter")
    )
    planter = StateStorage(config.storage_url, signer=Signer(job_key=own))
    forged = JobDefinition.for_function(job, noop)
    body = cluster.jobs.handles.serializer.dumps(forged)
    with pytest.raises(UntrustedPayload):  # its own key signs nothing under the run's prefix
        planter.write(cluster.storage_layout.definitions(job), body, suffix=".pkl")
    ref = StateStorage(config.storage_url).write(  # unsigned, as a writer without the key
        cluster.storage_layout.definitions(job), body, suffix=".pkl"
    )
    summary = {**forged.summary(), **run_summary(NAME, window)}
    handle = Handle.for_payload(ref, "planter", summary)
    cluster.zk.commit(
        [
            Create(cluster.layout.job_handle(job), handle.to_bytes()),
            Create(f"{cluster.layout.job_handle(job)}/locks"),
        ]
    )
    report = leader.firer.fire(NAME, leader.fence, at(1))
    assert report.fired == []
    ((skipped_window, reason),) = report.skipped
    assert skipped_window == window and reason.startswith(f"blocked: the job id {job} is taken")
    assert "does not verify" in reason and f"zkstore jobs cancel {job}" in reason
    last = leader.schedules.get(NAME).state.history[-1]
    assert (last.outcome, last.window) == (SKIPPED, START + timedelta(hours=1))


# -- leadership and crashes -----------------------------------------------------------------------


def test_a_deposed_leaders_fire_fails_atomically(signed: StoreConfig) -> None:
    with Cluster.open(signed) as first_cluster, Cluster.open(signed) as second_cluster:
        first = lead(first_cluster, "d1")
        create(first)
        fence = first.fence
        version = first.schedules.get(NAME).state.version
        expire_session(first_cluster.zk)  # kazoo reconnects with a new session by itself
        with pytest.raises(NotLeader):
            first.firer.fire(NAME, fence, at(1))
        assert current_jobs(first_cluster) == []
        assert first.schedules.get(NAME).state.version == version
        job = run_id(NAME, START + timedelta(hours=1))
        assert first_cluster.storage.list(first_cluster.storage_layout.job(job)) == []

        second = lead(second_cluster, "d2")
        assert second.firer.fire(NAME, second.fence, at(1)).fired == [
            (START + timedelta(hours=1), job)
        ]


@pytest.mark.parametrize("step", ["add:payload-written", "fire:committed"])
def test_a_crash_between_building_and_committing_leaves_one_run_at_most(
    signed: StoreConfig, step: str
) -> None:
    """The leader dies after writing the run's definition (before its transaction) or right
    after the transaction; the next leader fires the window once or finds it fired. Nothing but
    an orphan payload is left, which ``handles lingering`` finds."""
    with Cluster.open(signed) as cluster:
        creator = lead(cluster, "d0")
        create(creator)
        creator.election.resign()
        now = at(1)
        crash(signed, "fire", NAME, step, module="tests.crash_schedules", now=now.isoformat())
        job = run_id(NAME, START + timedelta(hours=1))
        after = lead(cluster, "d2")
        wait_for(
            after.election.check,
            timeout=3 * signed.session_timeout,
            what="the crashed leader's session to expire",
        )
        report = after.firer.fire(NAME, after.fence, now + timedelta(seconds=5))
        assert current_jobs(cluster) == [job]
        history = after.schedules.get(NAME).state.history
        assert [e.job for e in history if e.outcome == FIRED] == [job]
        orphans = [f.target for f in find_lingering(cluster, min_age=0) if f.kind == ORPHAN_PAYLOAD]
        if step == "add:payload-written":
            assert report.fired == [(START + timedelta(hours=1), job)]
            assert len(orphans) == 1 and f"/jobs/{job}/definition/" in orphans[0]
        else:
            assert report.fired == [] and orphans == []


@pytest.mark.parametrize("applied", [True, False])
def test_a_fire_whose_answer_is_lost_is_settled_by_reading_back(
    leader: Leader, monkeypatch: pytest.MonkeyPatch, applied: bool
) -> None:
    """The fire's transaction is applied (or not) and its answer lost, as a connection that
    drops at that moment does: the fire reads back, and sends it again only if it is not
    there. One run either way, the window recorded once, the run's payload the one referenced."""
    create(leader)
    real = leader.cluster.zk.commit
    lost: list[int] = []

    def lossy(ops: list[Op], **kwargs: object) -> list[object]:
        creates_run = any(
            getattr(op, "path", "").startswith(f"{leader.cluster.layout.current_jobs}/")
            for op in ops
        )
        if creates_run and not lost:
            lost.append(1)
            if applied:
                real(ops, **kwargs)  # type: ignore[arg-type]
            raise OutcomeUnknown("transaction: ConnectionLoss (injected after the send)")
        return real(ops, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(leader.cluster.zk, "commit", lossy)
    report = leader.firer.fire(NAME, leader.fence, at(1))
    job = run_id(NAME, START + timedelta(hours=1))
    assert lost and report.fired == [(START + timedelta(hours=1), job)]
    assert current_jobs(leader.cluster) == [job]
    state = leader.schedules.get(NAME).state
    assert [e.job for e in state.history if e.outcome == FIRED] == [job]
    (payload,) = leader.cluster.storage.list(leader.cluster.storage_layout.definitions(job))
    assert leader.cluster.jobs.summaries()[job].uri == payload.uri


# -- policies against the store -------------------------------------------------------------------


def test_forbid_skips_a_window_while_the_previous_run_lives(leader: Leader) -> None:
    create(leader, concurrency="forbid")
    first = leader.firer.fire(NAME, leader.fence, at(1)).fired[0][1]
    report = leader.firer.fire(NAME, leader.fence, at(2))
    assert report.fired == []
    assert first in report.skipped[0][1]
    leader.cluster.results.create_dirty(first, SUCCEEDED, attempts=1)
    assert leader.firer.fire(NAME, leader.fence, at(3)).fired == [
        (START + timedelta(hours=3), run_id(NAME, START + timedelta(hours=3)))
    ]
    state = leader.schedules.get(NAME).state
    assert (state.fired, state.skipped, state.missed) == (2, 1, 1)


def test_replace_cancels_the_previous_run_in_the_same_transaction(leader: Leader) -> None:
    create(leader, concurrency="replace")
    first = leader.firer.fire(NAME, leader.fence, at(1)).fired[0][1]
    second = leader.firer.fire(NAME, leader.fence, at(2)).fired[0][1]
    request = read_record(leader.cluster.zk, CancelRequest, leader.cluster.layout.cancel(first))
    assert (
        request is not None
        and request.by == f"schedule {NAME}"
        and second in (request.reason or "")
    )
    # asked at the firing leader's time (ZooKeeper's), from which its cancel grace is counted:
    # stamped by the leader's host clock, a clock behind ended the run at once, without grace
    assert request.requested == at(2)
    summary = leader.cluster.jobs.summaries()[second].summary
    assert summary["after"] == f"{first}:ENDED"


def test_windows_of_a_pause_are_recorded_skipped_and_resume_fires_again(leader: Leader) -> None:
    create(leader)
    leader.firer.fire(NAME, leader.fence, at(1))
    leader.schedules.set_paused(NAME, True, now=at(1, seconds=60))
    paused = leader.firer.fire(NAME, leader.fence, at(3))
    assert paused.fired == [] and paused.recorded == 2
    leader.schedules.set_paused(NAME, False, now=at(3, seconds=60))
    assert [w for w, _ in leader.firer.fire(NAME, leader.fence, at(4)).fired] == [
        START + timedelta(hours=4)
    ]
    history = leader.schedules.get(NAME).state.history
    assert [(e.outcome, e.count, e.reason) for e in history[-2:]] == [
        (SKIPPED, 2, "paused"),
        (FIRED, 1, None),
    ]


def test_a_long_outage_is_caught_up_per_catchup_in_bounded_transactions(leader: Leader) -> None:
    create(leader, cron=None, every=60, timezone="UTC", catchup="all")
    report = leader.firer.fire(NAME, leader.fence, at(2, seconds=0), limit=20, rounds=3)
    assert len(report.fired) == 20 and report.more  # a call's budget, whatever its plans
    assert len(current_jobs(leader.cluster)) == 20
    calls = 1
    while report.more:  # the leader's passes: a budget each
        report = leader.firer.fire(NAME, leader.fence, at(2, seconds=0), limit=20)
        assert len(report.fired) <= 20
        calls += 1
    assert calls == 7 and len(current_jobs(leader.cluster)) == 121
    state = leader.schedules.get(NAME).state
    assert state.fired == 121 and state.last == START + timedelta(hours=2)
    assert len(leader.cluster.zk.get(leader.schedules.layout.schedule_state(NAME))[0]) < 16 * 1024


# -- several windows a transaction (issue 60.3) -------------------------------------------------


def counted_commits(leader: Leader, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The runs each transaction of the leader's client publishes (one entry per commit)."""
    real = leader.cluster.zk.commit
    runs: list[int] = []
    prefix = f"{leader.cluster.layout.current_jobs}/"

    def counting(ops: list[Op], **kwargs: object) -> list[object]:
        made = [op for op in ops if isinstance(op, Create) and op.path.startswith(prefix)]
        runs.append(sum(1 for op in made if not op.path.endswith("/locks")))
        return real(ops, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(leader.cluster.zk, "commit", counting)
    return runs


def test_a_backlog_fires_several_windows_a_transaction(
    leader: Leader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """40 windows behind: three transactions (16, 16, 8 runs), each window once, the history
    and the counts as if fired one by one, every run's payload its own."""
    create(leader, cron=None, every=60, timezone="UTC", catchup="all")
    runs = counted_commits(leader, monkeypatch)
    report = leader.firer.fire(NAME, leader.fence, START + timedelta(minutes=39), limit=40)
    windows = [START + timedelta(minutes=k) for k in range(40)]
    assert report.fired == [(w, run_id(NAME, w)) for w in windows] and not report.more
    assert runs == [16, 16, 8]
    assert current_jobs(leader.cluster) == sorted(run_id(NAME, w) for w in windows)
    state = leader.schedules.get(NAME).state
    assert (state.fired, state.last_run) == (40, run_id(NAME, windows[-1]))
    assert [e.job for e in state.history if e.outcome == FIRED][-40:] == [
        run_id(NAME, w) for w in windows
    ]
    for window in (windows[0], windows[-1]):
        job = run_id(NAME, window)
        assert leader.cluster.jobs.recover(job, lock=False).state.job_id == job


def test_a_taken_run_id_in_a_batch_decides_each_window_alone(
    leader: Leader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job holding the id of the third window's run fails the batch whole (nothing of it is
    left, not even a payload); its windows are then fired one a transaction: the taken one
    skipped saying why, the others fired."""
    create(leader, cron=None, every=60, timezone="UTC", catchup="all")
    windows = [START + timedelta(minutes=k) for k in range(5)]
    taken = run_id(NAME, windows[2])
    leader.cluster.jobs.submit(JobDefinition.for_function(taken, noop))
    runs = counted_commits(leader, monkeypatch)
    report = leader.firer.fire(NAME, leader.fence, windows[-1])
    # the batch refused, then each alone: the taken one refused too, then recorded skipped
    assert runs == [5, 1, 1, 1, 0, 1, 1]
    assert [w for w, _ in report.fired] == [w for w in windows if w != windows[2]]
    ((window, reason),) = report.skipped
    assert window == windows[2] and "taken" in reason
    state = leader.schedules.get(NAME).state
    assert (state.fired, state.skipped, state.last) == (4, 1, windows[-1])
    for window in windows:
        payloads = leader.cluster.storage.list(
            leader.cluster.storage_layout.definitions(run_id(NAME, window))
        )
        assert len(payloads) == 1  # the refused batch's were discarded (the taken: its own)


def test_a_deposed_leaders_batch_fails_whole(signed: StoreConfig) -> None:
    with Cluster.open(signed) as first_cluster, Cluster.open(signed) as second_cluster:
        first = lead(first_cluster, "d1")
        create(first, cron=None, every=60, timezone="UTC", catchup="all")
        fence = first.fence
        version = first.schedules.get(NAME).state.version
        expire_session(first_cluster.zk)
        with pytest.raises(NotLeader):
            first.firer.fire(NAME, fence, START + timedelta(minutes=9))
        assert current_jobs(first_cluster) == []
        assert first.schedules.get(NAME).state.version == version
        second = lead(second_cluster, "d2")
        report = second.firer.fire(NAME, second.fence, START + timedelta(minutes=9))
        assert len(report.fired) == 10 and len(current_jobs(second_cluster)) == 10


# -- the store ------------------------------------------------------------------------------------


def test_create_publishes_a_signed_definition_once_and_refuses_a_second(leader: Leader) -> None:
    spec = create(leader)
    assert spec.handle.hmac is not None
    assert leader.schedules.definition(spec).job_id == NAME
    with pytest.raises(Exception, match="exists already"):
        create(leader)
    prefix = leader.schedules.storage_layout.schedule_definitions(NAME)
    assert len(leader.schedules.storage.list(prefix)) == 1  # the refused one's payload: discarded


@pytest.mark.parametrize("step", ["create:payload-written", "create:committed"])
def test_a_crash_while_creating_leaves_a_whole_schedule_or_none(
    signed: StoreConfig, step: str
) -> None:
    with Cluster.open(signed) as cluster:
        crash(signed, "create", NAME, step, module="tests.crash_schedules")
        schedules = ScheduleStore.for_config(signed, cluster.zk)
        payloads = schedules.storage.list(schedules.storage_layout.schedule_definitions(NAME))
        assert len(payloads) == 1
        if step == "create:committed":
            spec = schedules.get(NAME).spec
            assert spec.handle.uri == payloads[0].uri
            assert schedules.definition(spec).job_id == NAME
        else:  # an orphan payload, and no schedule: creating it again works
            assert schedules.names() == []
            leader = lead(cluster)
            create(leader)
            assert (
                len(schedules.storage.list(schedules.storage_layout.schedule_definitions(NAME)))
                == 2
            )


def test_a_tampered_definition_is_refused(leader: Leader) -> None:
    spec = create(leader)
    forged = spec.definition.record()  # type: ignore[union-attr]
    forged["hmac"] = "00" * 32
    path = leader.schedules.layout.schedule(NAME)
    record = json.loads(leader.cluster.zk.get(path)[0])
    record["definition"] = forged
    plant(leader.cluster.zk, path, json.dumps(record).encode())
    with pytest.raises(UntrustedPayload):
        leader.schedules.definition(leader.schedules.spec(NAME))


def test_a_damaged_definition_skips_the_window_saying_why(leader: Leader) -> None:
    spec = create(leader)
    assert spec.definition is not None
    forged = replace(spec.definition, hmac="00" * 32)
    path = leader.schedules.layout.schedule(NAME)
    plant(leader.cluster.zk, path, replace(spec, definition=forged).to_bytes())
    report = leader.firer.fire(NAME, leader.fence, at(1))
    assert report.fired == [] and current_jobs(leader.cluster) == []
    ((window, reason),) = report.skipped
    assert window == START + timedelta(hours=1) and "cannot be read" in reason
    assert leader.schedules.get(NAME).state.history[-1].reason == reason
    job = run_id(NAME, window)
    assert leader.cluster.storage.list(leader.cluster.storage_layout.job(job)) == []


def test_delete_removes_the_schedule_and_its_definition_but_not_its_runs(leader: Leader) -> None:
    create(leader)
    job = leader.firer.fire(NAME, leader.fence, at(1)).fired[0][1]
    assert leader.schedules.delete(NAME)
    assert not leader.schedules.delete(NAME)
    assert leader.schedules.names() == []
    assert (
        leader.schedules.storage.list(leader.schedules.storage_layout.schedule_definitions(NAME))
        == []
    )
    assert leader.cluster.jobs.recover(job, lock=False).state.job_id == job
