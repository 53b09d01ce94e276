"""Logs are job-owned data with a retention: kept by the job's cleanup, removed by the leader's
retention passes once it has passed, reported by ``lingering`` only after; every step survives
a crash."""

from __future__ import annotations

import time
import uuid

import pytest

from recovery.leader.retention import expire
from tests import jobs
from tests.helpers import crash, wait_for
from zkstore.admin.lingering import ORPHAN_PAYLOAD, Cleaner, find_lingering
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up
from zkstore.config import StoreConfig
from zkstore.errors import NotLeader
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.logs import JobLogs
from zkstore.records.job_states import CLEAN, DIRTY, SUCCEEDED
from zkstore.records.strict import time_text
from zkstore.zookeeper.ops import Fence

pytestmark = pytest.mark.integration


def finished_job_with_logs(cluster: Cluster, job_id: str, attempts: int = 2) -> JobLogs:
    """A job that ran ``attempts`` attempts (their logs stored) and whose result is recorded.
    Submitted and checkpointed by a session of its own, gone since (its locks with it)."""
    with Cluster.open(cluster.config) as writer:
        writer.jobs.submit(JobDefinition.for_function(job_id, jobs.noop))
        writer.checkpoints(job_id).add({"step": 1})
    logs = JobLogs(cluster.storage, cluster.storage_layout, job_id)
    for attempt in range(1, attempts + 1):
        logs.write_chunk(attempt, 0, f"attempt {attempt} says hello\n".encode())
        logs.write_chunk(attempt, 1, f"attempt {attempt} says goodbye\n".encode())
        logs.finish(attempt, chunks=2, size=60)
    cluster.results.create_dirty(job_id, SUCCEEDED, attempts=attempts)
    return logs


def sweep(cluster: Cluster, fence: Fence | None) -> int:
    """One look at every result, as the leader's retention passes take them a page at a time;
    results are kept forever here: only logs go."""
    results, _ = cluster.results.all()
    return expire(cluster, results, keep_results=None, fence=fence).logs_removed


def leader_fence(cluster: Cluster) -> tuple[Fence, str]:
    """A fence like a leader's: its own ephemeral node must exist."""
    node = cluster.zk.create(
        f"{cluster.layout.election}/lead-{uuid.uuid4().hex}-n_",
        b"{}",
        ephemeral=True,
        sequence=True,
    )
    return Fence.check(node, error=NotLeader), node


def orphans(cluster: Cluster) -> list[tuple[str, str]]:
    return [
        (f.job_id, f.detail) for f in find_lingering(cluster, min_age=0) if f.kind == ORPHAN_PAYLOAD
    ]


def test_cleanup_keeps_the_logs_and_records_until_when(cluster: Cluster) -> None:
    logs = finished_job_with_logs(cluster, "kept")
    before = time.time()
    assert clean_up(cluster, "kept", keep_logs=3600)
    left = cluster.storage.list(cluster.storage_layout.job("kept"))
    assert left and all(cluster.storage.is_under(o.uri, logs.prefix) for o in left)
    assert len(left) == 6, "two chunks and end.json for each of two attempts"
    result = cluster.results.get("kept")
    assert result is not None and result.state == CLEAN and result.logs_until is not None
    assert before + 3600 <= result.logs_until.timestamp() <= time.time() + 3600
    assert orphans(cluster) == [], "logs within their retention are no orphans"
    assert b"".join(logs.read(logs.attempt(2))) == b"attempt 2 says hello\nattempt 2 says goodbye\n"


def test_a_crash_before_the_result_is_clean_is_finished_by_the_next_cleanup(
    config: StoreConfig,
) -> None:
    with Cluster.open(config) as cluster:
        logs = finished_job_with_logs(cluster, "crashy")
        crash(config, "cleanup", "crashy", "cleanup:leftovers-discarded")
        result = cluster.results.get("crashy")
        assert result is not None and result.state == DIRTY, "the next leader will clean again"
        assert len(logs.attempts()) == 2
        assert orphans(cluster) == [], "a job being cleaned up keeps its logs"
        assert clean_up(cluster, "crashy", keep_logs=3600)
        assert cluster.results.get("crashy").logs_until is not None  # type: ignore[union-attr]
        assert len(logs.attempts()) == 2


def test_sweep_removes_logs_past_their_retention_and_nothing_else(cluster: Cluster) -> None:
    finished_job_with_logs(cluster, "old")
    finished_job_with_logs(cluster, "young")
    assert clean_up(cluster, "old", keep_logs=0)
    assert clean_up(cluster, "young", keep_logs=3600)
    fence, _ = leader_fence(cluster)
    assert sweep(cluster, fence) == 1
    assert cluster.storage.list(cluster.storage_layout.job("old")) == []
    old = cluster.results.get("old")
    assert old is not None and old.state == CLEAN and old.logs_until is None
    assert len(cluster.storage.list(cluster.storage_layout.logs("young"))) == 6
    assert sweep(cluster, fence) == 0, "nothing more to do"


def test_a_crash_between_removal_and_the_result_is_finished_by_the_next_sweep(
    config: StoreConfig,
) -> None:
    """The crash leaves ``logs_until`` in place; a chunk that arrived late meanwhile is removed
    by the next sweep too, which then drops ``logs_until``."""
    with Cluster.open(config) as cluster:
        logs = finished_job_with_logs(cluster, "late")
        assert clean_up(cluster, "late", keep_logs=0)
        crash(config, "sweep", "late", "retention:logs-removed")
        assert logs.attempts() == {}
        assert cluster.results.get("late").logs_until is not None  # type: ignore[union-attr]
        logs.write_chunk(3, 0, b"a chunk that arrived late\n")
        fence, _ = leader_fence(cluster)
        assert sweep(cluster, fence) == 1
        assert cluster.storage.list(cluster.storage_layout.job("late")) == []
        assert cluster.results.get("late").logs_until is None  # type: ignore[union-attr]


def test_a_deposed_leaders_sweep_changes_no_result(cluster: Cluster) -> None:
    finished_job_with_logs(cluster, "fenced")
    assert clean_up(cluster, "fenced", keep_logs=0)
    fence, node = leader_fence(cluster)
    cluster.zk.delete(node)  # its session expired: another daemon leads now
    with pytest.raises(NotLeader):  # a deposed leader's write must fail
        sweep(cluster, fence)
    assert cluster.results.get("fenced").logs_until is not None  # type: ignore[union-attr]
    successor, _ = leader_fence(cluster)
    assert sweep(cluster, successor) == 1
    assert cluster.results.get("fenced").logs_until is None  # type: ignore[union-attr]


def test_lingering_reports_logs_only_once_no_job_keeps_them(cluster: Cluster) -> None:
    live = JobLogs(cluster.storage, cluster.storage_layout, "live")
    cluster.jobs.submit(JobDefinition.for_function("live", jobs.noop))
    live.write_chunk(1, 0, b"a live job's log\n")
    finished_job_with_logs(cluster, "kept")
    assert clean_up(cluster, "kept", keep_logs=3600)
    finished_job_with_logs(cluster, "expired")
    assert clean_up(cluster, "expired", keep_logs=0)
    stray = JobLogs(cluster.storage, cluster.storage_layout, "never-existed")
    stray.write_chunk(1, 0, b"no job ever had this id\n")
    expired = cluster.results.get("expired")
    assert expired is not None and expired.logs_until is not None
    until_at = expired.logs_until
    until = until_at.timestamp()
    wait_for(lambda: time.time() > until, timeout=1.0, what="the logs' retention (0 s) to pass")
    found = orphans(cluster)
    assert sorted(set(found)) == [
        ("expired", f"driver log past its retention (kept until {time_text(until_at)})"),
        ("never-existed", "driver log of no job"),
    ]
    assert len(found) == 7, "six objects of 'expired', one stray"
    outcome = Cleaner(cluster, dry_run=False).clean(find_lingering(cluster, min_age=0))
    assert all(r.done for r in outcome if r.finding.kind == ORPHAN_PAYLOAD)
    assert cluster.storage.list(cluster.storage_layout.job("expired")) == []
    assert live.attempts() and JobLogs(cluster.storage, cluster.storage_layout, "kept").attempts()
    assert orphans(cluster) == []


def test_cleanup_of_lingering_logs_rechecks_the_retention_first(cluster: Cluster) -> None:
    """Found as expired, then kept again (the job came back to life: its result was deleted by
    hand and it was resubmitted): the cleaner's second look keeps them."""
    finished_job_with_logs(cluster, "revived")
    assert clean_up(cluster, "revived", keep_logs=0)
    findings = [f for f in find_lingering(cluster, min_age=0) if f.kind == ORPHAN_PAYLOAD]
    assert findings
    cluster.zk.delete(cluster.layout.result("revived"))
    cluster.jobs.submit(JobDefinition.for_function("revived", jobs.noop))
    outcome = Cleaner(cluster, dry_run=False).clean(findings)
    assert {(r.action, r.note) for r in outcome} == {("kept", "its job keeps it now")}
    assert JobLogs(cluster.storage, cluster.storage_layout, "revived").attempts()


def test_a_result_past_its_own_retention_takes_its_logs_with_it(cluster: Cluster) -> None:
    logs = finished_job_with_logs(cluster, "gone")
    assert clean_up(cluster, "gone", keep_logs=3600)
    fence, _ = leader_fence(cluster)
    results, _ = cluster.results.all()
    found = expire(cluster, results, keep_results=0, fence=fence)
    assert [r.job_id for r in found.expired] == ["gone"] and found.logs_removed == 1
    assert logs.attempts() == {}, "no log outlives its job's result"
    assert orphans(cluster) == []


def test_a_look_removes_a_bounded_number_of_jobs_logs(cluster: Cluster) -> None:
    for job_id in ("a", "b", "c"):
        finished_job_with_logs(cluster, job_id, attempts=1)
        assert clean_up(cluster, job_id, keep_logs=0)
    fence, _ = leader_fence(cluster)
    results, _ = cluster.results.all()
    found = expire(cluster, results, keep_results=None, fence=fence, limit=2)
    assert found.logs_removed == 2 and found.rest == ["c"], "the rest waits for the next pass"
    assert found.expired == []
    results, _ = cluster.results.read_many(found.rest)
    assert expire(cluster, results, keep_results=None, fence=fence, limit=2).logs_removed == 1
    assert all(r.logs_until is None for r in cluster.results.all()[0])
