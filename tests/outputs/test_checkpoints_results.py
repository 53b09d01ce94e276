"""Checkpoints (retention, subsumption, fencing), the job result store, status and quarantine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests import jobs
from zkstore.cluster import Cluster
from zkstore.errors import (
    ConfigError,
    CorruptPayload,
    FenceLost,
    HandleExists,
    HandleNotFound,
    VersionConflict,
)
from zkstore.jobs.checkpoints import CheckpointStore
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.snapshot import read_snapshots
from zkstore.records.job_records import JobStatus
from zkstore.records.job_states import (
    CLEAN,
    DIRTY,
    FAILED,
    PENDING,
    QUARANTINED,
    STARTING,
    SUCCEEDED,
)
from zkstore.records.strict import parse_time
from zkstore.zookeeper.ops import Fence
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def checkpoint_payloads(cluster: Cluster, job_id: str) -> list[str]:
    return [o.uri for o in cluster.storage.list(cluster.storage_layout.checkpoints(job_id))]


# -- checkpoints ---------------------------------------------------------------------------------


def test_checkpoint_round_trip(any_cluster: Cluster) -> None:
    store = any_cluster.checkpoints("job-1")
    assert store.latest() is None
    first = store.add({"step": 1, "offsets": [1, 2]})
    second = store.add({"step": 2})
    assert (first.checkpoint_id, second.checkpoint_id) == (1, 2)
    latest = store.latest()
    assert latest is not None
    assert (latest.checkpoint_id, latest.metadata) == (2, {"step": 2})
    assert [i for i, _ in store.all()] == [1, 2]


def test_retention_keeps_newest_and_discards_subsumed_payloads(cluster: Cluster) -> None:
    store = cluster.checkpoints("job-1", retain=3)
    for step in range(1, 8):
        store.add({"step": step})
    assert store.ids() == [5, 6, 7]
    assert len(checkpoint_payloads(cluster, "job-1")) == 3
    latest = store.latest()
    assert latest is not None and latest.metadata == {"step": 7}


def test_ids_keep_growing_across_store_instances(cluster: Cluster) -> None:
    cluster.checkpoints("job-1", retain=1).add({"step": 1})
    cluster.checkpoints("job-1", retain=1).add({"step": 2})
    checkpoint = cluster.checkpoints("job-1", retain=1).add({"step": 3})
    assert checkpoint.checkpoint_id == 3


def test_retention_must_keep_one(cluster: Cluster) -> None:
    with pytest.raises(ConfigError):
        cluster.checkpoints("job-1", retain=0)


def test_failed_add_keeps_previous_latest(cluster: Cluster) -> None:
    store = cluster.checkpoints("job-1")
    store.add({"step": 1})

    class Crash(Exception):
        """Stands for a process dying at that step."""

    def crash(step: str) -> None:
        if step == "add:payload-written":
            raise Crash(step)

    failing = CheckpointStore(
        cluster.zk, cluster.layout, cluster.storage, cluster.storage_layout, "job-1", on_step=crash
    )
    with pytest.raises(Crash):
        failing.add({"step": 2})
    latest = store.latest()
    assert latest is not None and latest.metadata == {"step": 1}
    assert store.ids() == [1]


def test_fenced_checkpoint_rejected_when_fence_is_gone(
    cluster: Cluster, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    running = cluster.layout.running("job-1")
    cluster.zk.ensure_path(cluster.layout.job_dir("job-1"))
    stand_in_session().create(running, b"{}", ephemeral=True)  # a driver's
    fence = Fence.check(running, 0, description="attempt")
    store = cluster.checkpoints("job-1")
    store.add({"step": 1}, fence=fence)
    cluster.zk.delete(running)
    with pytest.raises(FenceLost, match="attempt"):
        store.add({"step": 2}, fence=fence)
    latest = store.latest()
    assert latest is not None and latest.metadata == {"step": 1}
    assert len(checkpoint_payloads(cluster, "job-1")) == 1, "the rejected payload was discarded"


def test_corrupt_latest_checkpoint_is_not_skipped(cluster: Cluster) -> None:
    store = cluster.checkpoints("job-1")
    store.add({"step": 1})
    newest = store.add({"step": 2})
    cluster.storage.fs.pipe_file(cluster.storage.path_of(newest.handle.uri), b'{"step": 9}')
    with pytest.raises(CorruptPayload):
        store.latest()


def test_remove_all(cluster: Cluster) -> None:
    store = cluster.checkpoints("job-1")
    for step in range(3):
        store.add({"step": step})
    assert store.remove_all() is True
    assert store.ids() == []
    assert checkpoint_payloads(cluster, "job-1") == []


# -- results -------------------------------------------------------------------------------------


def test_result_store_contract(any_cluster: Cluster) -> None:
    results = any_cluster.results
    assert results.get("job-1") is None
    dirty = results.create_dirty("job-1", SUCCEEDED, attempts=2, name="etl")
    assert (dirty.state, dirty.outcome, dirty.attempts, dirty.version) == (DIRTY, SUCCEEDED, 2, 0)
    with pytest.raises(HandleExists, match="already has a result"):
        results.create_dirty("job-1", FAILED, attempts=3)
    assert [r.job_id for r in results.dirty()] == ["job-1"]
    clean = results.mark_clean("job-1")
    assert clean.state == CLEAN
    assert results.mark_clean("job-1").state == CLEAN, "clean twice is fine"
    assert results.dirty() == []
    stored = results.get("job-1")
    assert stored is not None and (stored.state, stored.outcome, stored.name) == (
        CLEAN,
        SUCCEEDED,
        "etl",
    )
    with pytest.raises(HandleNotFound):
        results.mark_clean("never-ran")


def test_result_error_is_truncated(cluster: Cluster) -> None:
    result = cluster.results.create_dirty("job-1", FAILED, attempts=1, error="x" * 100_000)
    assert result.error is not None and len(result.error) <= 2000


def test_unknown_outcome_is_refused(cluster: Cluster) -> None:
    with pytest.raises(ValueError):
        cluster.results.create_dirty("job-1", "MAYBE", attempts=1)


# -- status --------------------------------------------------------------------------------------


def test_status_is_versioned(cluster: Cluster) -> None:
    status = JobStatus(
        version=None, state=PENDING, attempt=0, updated=parse_time("2026-11-21T00:00:00Z")
    )
    created = cluster.state.put_status("job-1", status, expected_version=None)
    assert created.version == 0
    with pytest.raises(HandleExists):
        cluster.state.put_status("job-1", status, expected_version=None)
    starting = JobStatus(
        version=None, state=STARTING, attempt=1, updated=parse_time("2026-11-21T00:00:01Z")
    )
    updated = cluster.state.put_status("job-1", starting, expected_version=0)
    assert updated.version == 1
    with pytest.raises(VersionConflict):
        cluster.state.put_status("job-1", starting, expected_version=0)
    read = cluster.state.status("job-1")
    assert read is not None and (read.state, read.attempt, read.version) == (STARTING, 1, 1)


def test_control_is_versioned(cluster: Cluster) -> None:
    # JobStateStore.set_control is gone (issue 24): ControlStore.set is the one writer.
    cluster.jobs.submit(JobDefinition.for_function("job-1", jobs.noop))
    assert cluster.state.control("job-1") == ({}, None)
    version = cluster.control("job-1").set({"rate": 10}).version
    assert cluster.state.control("job-1") == ({"rate": 10}, version)
    cluster.control("job-1").set({"rate": 20}, expect_version=version)
    with pytest.raises(VersionConflict):
        cluster.control("job-1").set({"rate": 30}, expect_version=version)


def test_cancel_request_is_idempotent(cluster: Cluster) -> None:
    first = cluster.state.request_cancel("job-1", by="ops", reason="wrong input")
    again = cluster.state.request_cancel("job-1", by="someone else")
    assert again.requested == first.requested and again.by == "ops"


# -- quarantine ----------------------------------------------------------------------------------


def test_quarantine_moves_one_job_and_leaves_the_others_recoverable(cluster: Cluster) -> None:
    for i in range(3):
        cluster.jobs.submit(JobDefinition.for_function(f"job-{i}", jobs.noop))
    broken = cluster.jobs.handles.get_handle("job-1")
    cluster.storage.fs.pipe_file(cluster.storage.path_of(broken.uri), b"garbage")
    result = cluster.jobs.recover_all()
    for item in result.broken:
        cluster.quarantine.move_in(item.name, item.reason)
    assert cluster.jobs.job_ids() == ["job-0", "job-2"]
    for job_id in ("job-0", "job-2"):
        assert cluster.jobs.recover(job_id).state.job_id == job_id
    entry = cluster.quarantine.get("job-1")
    assert entry is not None
    assert "CorruptPayload" in entry.reason
    assert entry.handle is not None and entry.handle.uri == broken.uri, "payload kept for forensics"
    assert cluster.storage.exists(broken.uri)
    assert read_snapshots(cluster.zk, cluster.layout, ["job-1"])["job-1"].state == QUARANTINED
    assert cluster.quarantine.move_in("job-1", "again").reason == entry.reason, "idempotent"


def test_quarantine_of_garbage_handle_keeps_the_raw_data(cluster: Cluster) -> None:
    cluster.jobs.submit(JobDefinition.for_function("job-1", jobs.noop))
    cluster.zk.set(cluster.layout.job_handle("job-1"), b"not json at all")
    entry = cluster.quarantine.move_in("job-1", "garbage handle")
    assert entry.handle is None and entry.raw == "not json at all"
    assert cluster.jobs.job_ids() == []


def test_quarantine_removes_locks_held_by_others(cluster: Cluster, config: Any) -> None:
    cluster.jobs.submit(JobDefinition.for_function("job-1", jobs.noop))
    with Cluster.open(config) as other:
        other.jobs.recover("job-1")  # holds a lock
        cluster.quarantine.move_in("job-1", "bad")
        assert cluster.zk.exists(cluster.layout.job_handle("job-1")) is None
