"""The control plane in the store: desired, acknowledged (fenced), declared, history, and what
the operator tools make of it. Real ZooKeeper and storage; the job's side is
test_control_running_jobs."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from recovery.driver.job_control import JobControl
from tests import jobs
from tests.helpers import crash, requests_sent, wait_for
from zkstore.admin.lingering import ORPHAN_PAYLOAD, find_lingering
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up
from zkstore.config import StoreConfig
from zkstore.errors import (
    ConfigError,
    CorruptRecord,
    FenceLost,
    JobNotFound,
    VersionConflict,
    WaitTimeout,
    WrongState,
)
from zkstore.jobs.control import (
    CHECKPOINT,
    LOG_LEVEL,
    PAUSE,
    REJECTED,
    ControlAck,
    ControlKeys,
    ControlStore,
    DeclaredKey,
    Desired,
    KeyDecision,
    gaps,
    read_view,
)
from zkstore.jobs.control.control_history import HISTORY_LIMIT, ControlHistory, HistoryEntry
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.snapshot import read_snapshots
from zkstore.records.job_records import JobStatus, RunningInfo
from zkstore.records.job_states import PAUSED, RUNNING, SUCCEEDED
from zkstore.records.strict import parse_time, utc_moment, utc_now
from zkstore.zookeeper.ops import Create, Fence
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def submitted(cluster: Cluster, job_id: str = "j") -> ControlStore:
    cluster.jobs.submit(JobDefinition.for_function(job_id, jobs.sleeper))
    return cluster.control(job_id)


def attempt(cluster: Cluster, driver: ZooKeeper, job_id: str, number: int) -> Fence:
    """Make ``number`` the live attempt (status, then running in ``driver``'s session, as
    leader and driver do) and return the driver's fence: the status version of its attempt
    and its running node."""
    layout = cluster.layout
    status = JobStatus(
        version=None, state="STARTING", attempt=number, updated=parse_time(utc_now())
    )
    current = cluster.state.status(job_id)
    written = cluster.state.put_status(
        job_id, status, expected_version=None if current is None else current.version
    )
    assert written.version is not None
    running = RunningInfo(
        version=None, attempt=number, host="h", pid=1, started=parse_time(utc_now())
    )
    if cluster.zk.exists(layout.running(job_id)) is not None:
        cluster.zk.delete(layout.running(job_id))
    driver.commit([Create(layout.running(job_id), running.to_bytes(), ephemeral=True)])
    return Fence.check(
        layout.status(job_id), written.version, description=f"attempt {number} superseded"
    ) + Fence.check(layout.running(job_id), 0, description=f"attempt {number} lost its session")


def ack(number: int, version: int, **changes: Any) -> ControlAck:
    fields: dict[str, Any] = {
        "attempt": number,
        "applied_version": version,
        "updated": utc_now(),
        "values": {"rate": 1},
        "decisions": {},
        "paused_since": None,
    }
    fields.update(changes)
    return ControlAck.build(**fields)


def test_a_change_is_checked_stored_with_compare_and_set_and_recorded(cluster: Cluster) -> None:
    store = submitted(cluster)
    first = store.set({"rate": 10, "mode": "slow"}, by="ann@laptop")
    assert (first.version, first.previous) == (0, None)
    second = store.set({"rate": 20, "note": None}, expect_version=0, by="bob@ops")
    assert second.version == 1
    assert second.changes == {"rate": {"old": 10, "new": 20}, "note": {"new": None}}
    assert store.desired().values == {"rate": 20, "mode": "slow", "note": None}
    with pytest.raises(VersionConflict, match="at version 1, not 0"):
        store.set({"rate": 30}, expect_version=0)
    unchanged = store.set({"rate": 20})
    assert (unchanged.version, unchanged.changes) == (1, {})  # nothing written
    removed = store.set({}, remove=("note",))
    assert removed.version == 2 and removed.changes == {"note": {"old": None}}
    for bad, why in [
        ({"deep": {"a": 1}}, "not a scalar"),
        ({"": 1}, "non-empty"),
        ({"x": "a\nb"}, "control characters"),
        ({PAUSE: "yes"}, "expected bool"),
        ({LOG_LEVEL: "LOUD"}, "not a log level"),
        ({"zkstore.other": 1}, "reserved"),
        ({CHECKPOINT: "x" * 65}, "at most 64"),
    ]:
        with pytest.raises(ConfigError, match=why):
            store.set(bad)
    assert store.desired().version == 2
    entries, errors = store.history.entries()
    assert errors == {}
    assert [(e.version, e.previous, e.by) for e in entries] == [
        (0, None, "ann@laptop"),
        (1, 0, "bob@ops"),
        (2, 1, entries[2].by),
    ]
    assert entries[1].changes == second.changes


def test_only_a_current_job_can_be_changed_and_nothing_is_left_behind(cluster: Cluster) -> None:
    with pytest.raises(JobNotFound):
        cluster.control("ghost").set({"rate": 1})
    assert cluster.zk.exists(cluster.layout.job_dir("ghost")) is None
    store = submitted(cluster, "done")
    cluster.results.create_dirty("done", SUCCEEDED, attempts=1)
    # finished, not yet cleaned up: its handle is still there, and the job is not current
    with pytest.raises(WrongState, match="not current"):
        store.set({"rate": 1})
    assert cluster.zk.exists(store.path) is None
    assert clean_up(cluster, "done")
    with pytest.raises(WrongState, match="not current"):
        store.set({"rate": 1})
    assert cluster.zk.exists(cluster.layout.job_dir("done")) is None
    assert cluster.storage.list(cluster.storage_layout.job("done")) == []


def test_declared_keys_refuse_unknown_keys_and_wrong_types_before_storing(
    cluster: Cluster, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    store = submitted(cluster)
    fence = attempt(cluster, stand_in_session(), "j", 1)
    store.set({"rate": 1.5, "colour": "red"})
    declaration = ControlKeys.build(
        attempt=1,
        declared=utc_now(),
        keys={"rate": DeclaredKey("float"), "parts": DeclaredKey("int", restart=True)},
    )
    store.declare(declaration, fence=fence)
    assert store.declared().keys == declaration.declared_keys()
    with pytest.raises(ConfigError, match=r"not a key the job declared \(it declares: parts, rate"):
        store.set({"size": 3})
    with pytest.raises(ConfigError, match="expected int, got a number"):
        store.set({"parts": 2.5})
    assert store.set({"rate": 2, "parts": 4, PAUSE: True}).version == 1  # an int is a float
    assert store.desired().version == 1
    # Garbage instead of a declaration: reported, and the change goes through unchecked (the
    # job still checks what it applies).
    cluster.zk.set(store.keys_path, b'{"attempt": 1, "declared": "x", "keys": {}}')
    change = store.set({"size": 3})
    assert change.version == 2 and "unreadable" in change.warnings[0]


def test_the_acknowledgement_of_a_superseded_attempt_is_refused(
    cluster: Cluster, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    store = submitted(cluster)
    store.set({"rate": 1})
    old = attempt(cluster, stand_in_session(), "j", 1)
    written = store.acknowledge(ack(1, 0), fence=old)
    assert store.acknowledgement() == written
    # the leader placed attempt 2, whose driver took running: attempt 1's fence is gone
    new = attempt(cluster, stand_in_session(), "j", 2)
    with pytest.raises(FenceLost, match="superseded"):
        store.acknowledge(ack(1, 5).with_version(written.version), fence=old)
    with pytest.raises(FenceLost):
        store.declare(ControlKeys.build(attempt=1, declared=utc_now(), keys={}), fence=old)
    assert store.acknowledgement() == written
    assert store.declared().keys is None
    mine = store.acknowledge(ack(2, 0), fence=new)  # whatever was there: the live attempt owns it
    assert store.acknowledgement() == mine and mine.attempt == 2


def test_garbage_in_the_records_is_reported_never_raised_by_listings(
    cluster: Cluster, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    store = submitted(cluster)
    store.set({"rate": 1, PAUSE: True})
    fence = attempt(cluster, stand_in_session(), "j", 1)
    store.acknowledge(
        ack(1, 0, values={"rate": 1, PAUSE: True}, paused_since=utc_now()), fence=fence
    )
    assert read_snapshots(cluster.zk, cluster.layout, ["j"])["j"].state == PAUSED
    base = json.loads(ack(1, 0).to_bytes())
    bad_acks = [
        b"\xff",
        b"[" * 5000,
        json.dumps({**base, "paused": "yes"}),
        json.dumps({**base, "values": {"x": {"y": 1}}}),
        json.dumps({**base, "keys": {"x": {"state": "maybe"}}}),
        json.dumps({**base, "keys": {"x": {"state": "rejected", "reason": 3}}}),
        json.dumps({**base, "paused": True}),  # without a since
        json.dumps({**base, "applied_version": -1}),
    ]
    for bad in bad_acks:
        cluster.zk.set(store.ack_path, bad if isinstance(bad, bytes) else bad.encode())
        with pytest.raises(CorruptRecord, match="control-ack"):
            store.acknowledgement()
        snapshot = read_snapshots(cluster.zk, cluster.layout, ["j"])["j"]
        assert snapshot.state == RUNNING and "control-ack" in snapshot.errors
        view = read_view(store, cluster.checkpoints("j"))
        assert view.ack is None and "control-ack" in view.errors
        assert view.as_dict()["pending"] == ["rate", PAUSE]  # nothing acknowledged
    builtin = {"zkstore.pause": {"type": "bool", "restart": False}}
    record = {"attempt": 1, "declared": utc_now(), "keys": builtin}
    cluster.zk.create(store.keys_path, json.dumps(record).encode())
    assert "built-in" in (store.declared().error or "")
    assert "control-keys" in read_view(store, cluster.checkpoints("j")).errors


def test_the_view_says_per_key_what_the_job_made_of_the_desired_values(
    cluster: Cluster, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    store = submitted(cluster)
    store.set({"rate": 20, "mode": "turbo", "parts": 8, "new": 1, PAUSE: True})
    fence = attempt(cluster, stand_in_session(), "j", 1)
    store.acknowledge(
        ack(
            1,
            0,
            values={"rate": 20, "mode": "slow", "parts": 4, "gone": 1, PAUSE: True},
            decisions={
                "mode": KeyDecision(REJECTED, "turbo", "unknown mode"),
                "parts": KeyDecision("needs-restart", 8, "next attempt"),
            },
            paused_since=utc_now(),
        ),
        fence=fence,
    )
    view = read_view(store, cluster.checkpoints("j")).as_dict()
    assert view["version"] == 0 and view["applied"]["version"] == 0
    assert view["applied"]["live"] is True and view["paused"] is True
    states = {k["key"]: k["state"] for k in view["keys"]}
    assert states == {
        "gone": "pending",
        "mode": "rejected",
        "new": "pending",
        "parts": "needs-restart",
        "rate": "applied",
        PAUSE: "applied",
    }
    assert view["rejected"] == {"mode": "unknown mode"}
    assert view["pending"] == ["gone", "new"] and view["needs_restart"] == ["parts"]
    cluster.zk.delete(cluster.layout.running("j"))  # the attempt is gone: not paused any more
    view = read_view(store, cluster.checkpoints("j")).as_dict()
    assert view["applied"]["live"] is False and view["paused"] is False


def test_waiting_for_an_acknowledgement_ends_with_it_or_times_out(
    cluster: Cluster, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    store = submitted(cluster)
    change = store.set({"rate": 1})
    fence = attempt(cluster, stand_in_session(), "j", 1)
    with pytest.raises(WaitTimeout, match="no attempt acknowledged control version 0"):
        store.wait_applied(0, timeout=0.3)
    cluster.zk.create(store.ack_path, b"garbage")  # waited past, not raised
    threading.Timer(0.5, lambda: store.acknowledge(ack(1, 0), fence=fence)).start()
    assert store.wait_applied(change.version or 0, timeout=30).attempt == 1


def test_history_is_bounded_reports_gaps_and_garbage(cluster: Cluster) -> None:
    history = ControlHistory(cluster.storage, cluster.storage_layout.control_history("j"), limit=5)
    for version in [*range(8), 9]:  # version 8 was never recorded (its writer died)
        history.record(HistoryEntry(version, version - 1 or None, "me", utc_moment(), {}))
    entries, errors = history.entries()
    assert [e.version for e in entries] == [4, 5, 6, 7, 9] and errors == {}
    assert [e.version for e in history.entries(last=2)[0]] == [7, 9]
    assert gaps(entries) == [8]
    planted = cluster.storage.write(history.prefix, b'{"version": "x"}', stem=f"{10:019d}-")
    cluster.storage.write(history.prefix, b"{" * 100, stem=f"{11:019d}-")
    entries, errors = history.entries()
    assert planted.uri in errors and len(errors) == 2
    assert HISTORY_LIMIT == 100


def test_history_lives_with_the_job_and_goes_with_it(cluster: Cluster) -> None:
    store = submitted(cluster)
    for rate in range(3):
        store.set({"rate": rate})
    old = time.time() - 3600
    for item in cluster.storage.list(store.history.prefix):
        os.utime(cluster.storage.path_of(item.uri), (old, old))
    # Referenced by no handle, and the job's own while it lives: not an orphan.
    assert [f for f in find_lingering(cluster, min_age=60) if f.kind == ORPHAN_PAYLOAD] == []
    cluster.results.create_dirty("j", SUCCEEDED, attempts=1)
    assert [f for f in find_lingering(cluster, min_age=60) if f.kind == ORPHAN_PAYLOAD] == []
    # A job whose cleanup already ran: a history entry written after it (a control set racing
    # the cleanup) is an orphan, which lingering finds.
    assert clean_up(cluster, "j")
    assert cluster.storage.list(cluster.storage_layout.job("j")) == []
    late = cluster.storage.write(store.history.prefix, b"{}", stem=f"{9:019d}-")
    os.utime(cluster.storage.path_of(late.uri), (old, old))
    found = [f for f in find_lingering(cluster, min_age=60) if f.kind == ORPHAN_PAYLOAD]
    assert [(f.target, f.detail) for f in found] == [
        (late.uri, "control-history of a job that is gone")
    ]


@pytest.mark.parametrize("step", ["control:stored", "control:recorded"])
def test_a_writer_that_dies_between_storing_and_recording_leaves_a_gap_and_no_garbage(
    config: StoreConfig, cluster: Cluster, step: str
) -> None:
    store = submitted(cluster)
    store.set({"rate": 1})
    crash(config, "control", "j", step)
    assert store.desired() == Desired({"rate": 2}, 1), "the change is stored"
    entries, errors = store.history.entries()
    recorded = step == "control:recorded"
    assert [e.version for e in entries] == ([0, 1] if recorded else [0]) and errors == {}
    assert store.set({"rate": 3}).version == 2
    entries, _ = store.history.entries()
    assert gaps(entries) == ([] if recorded else [1])
    assert find_lingering(cluster, min_age=0) == []


def test_a_jobs_control_reads_nothing_more_once_the_job_is_over(cluster: Cluster) -> None:
    """The driver stops its control as the job ends: what it has to acknowledge is written,
    and nothing is read again (a change now would reach no code: one read per job saved)."""
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    control = JobControl(
        cluster.control("j"),
        cluster.checkpoints("j"),
        attempt=1,
        fence=Fence(),
        cancelled=threading.Event(),
    ).start(give_up=lambda: False)
    with requests_sent(cluster.zk) as sent:
        control.stop()
    assert sent == [], "no control set: nothing to acknowledge, nothing to read"


def start_control(cluster: Cluster, job_id: str) -> JobControl:
    return JobControl(
        cluster.control(job_id),
        cluster.checkpoints(job_id),
        attempt=1,
        fence=Fence(),
        cancelled=threading.Event(),
    ).start(give_up=lambda: False)


def test_a_jobs_control_with_no_object_reads_none_at_its_start(cluster: Cluster) -> None:
    """Most jobs are never controlled: the watch's own look (one ``exists``) says there is no
    object, and the driver does not read it as well (a request a run). One set before the
    start is read and in effect from the start; one set right after reaches the job."""
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
    with requests_sent(cluster.zk, paths=True) as sent:
        control = start_control(cluster, "j")
    path = cluster.layout.control("j")
    assert f"Exists {path}" in sent and f"GetData {path}" not in sent, sent
    cluster.control("j").set({"rows": 5})
    wait_for(lambda: control.config.get("rows") == 5, timeout=10, what="the change applied")
    control.stop()

    cluster.jobs.submit(JobDefinition.for_function("k", jobs.noop))
    cluster.control("k").set({"rows": 7})
    with requests_sent(cluster.zk, paths=True) as sent:
        control = start_control(cluster, "k")
    assert f"GetData {cluster.layout.control('k')}" in sent, sent
    assert control.config.get("rows") == 7, "in effect from the start"
    control.stop()


def test_control_set_replaces_an_unreadable_object_and_says_what_it_held(
    cluster: Cluster, config: StoreConfig
) -> None:
    """Issue 50: a control object garbled (by hand, or planted) is not a dead end that only a
    raw ZooKeeper delete fixes: ``zkstore control set`` replaces it, at its version, and says
    what it replaced; a newer zkstore's object is not garbage and stays."""
    from tests.cli import run
    from tests.helpers import plant

    submitted(cluster, "g")
    path = cluster.layout.control("g")
    plant(cluster.zk, path, b"{not json at all")
    ran = run(config, "control", "set", "g", "rate=10")
    assert ran.returncode == 0, ran.stderr
    assert "replaced an unreadable control object (version 0), which held: {not json" in (
        ran.stderr
    )
    assert cluster.control("g").desired() == Desired({"rate": 10}, 1)
    plant(cluster.zk, path, b'{"protocol": 99, "values": {}}')
    newer = run(config, "control", "set", "g", "rate=11")
    assert newer.returncode == 9 and "needs a newer daemon" in newer.stderr, newer.stderr
