"""Quarantine and finished jobs with a leader at work: a released job runs, a dead purge is finished
by the next leader, a forgotten id runs again."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.cli import run
from tests.helpers import crash, nothing_of, quarantined, step_runs, wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import JobFinished
from zkstore.jobs.logs import JobLogs
from zkstore.records.job_states import (
    CLEAN,
    DIRTY,
    FAILED,
    QUARANTINED,
    SUCCEEDED,
)

pytestmark = [pytest.mark.e2e, pytest.mark.shared_fleet]


def _state(cluster: Cluster, job_id: str) -> str | None:
    result = cluster.results.get(job_id)
    return None if result is None else result.state


def test_a_repaired_job_released_runs_to_success(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """A payload damaged in storage: the driver cannot load it, the job is quarantined; release
    is refused until the operator restores the payload, then the job runs to success. It runs
    after another job, which goes on until the payload is damaged (a running leader would
    place it at once)."""
    out, opened = tmp_path / "out", tmp_path / "damaged"
    client.submit_function(
        jobs.steps, str(tmp_path / "first"), 1, 0.05, str(opened), job_id="first"
    )
    client.submit_function(
        jobs.steps, str(out), 2, 0.01, job_id="fixme", max_attempts=2, after=["first"]
    )
    path = client.cluster.storage.path_of(client.cluster.jobs.handles.get_handle("fixme").uri)
    good = client.cluster.storage.fs.cat_file(path)
    client.cluster.storage.fs.pipe_file(path, good[:-1] + bytes([good[-1] ^ 1]))
    opened.touch()
    local.start_daemon("d1")
    wait_for(lambda: client.status("fixme").state == QUARANTINED, timeout=60, what="quarantine")
    refused = run(runtime_config, "quarantine", "release", "fixme")
    assert refused.returncode == 5 and "still does not verify" in refused.stderr, refused

    client.cluster.storage.fs.pipe_file(path, good)
    released = run(runtime_config, "quarantine", "release", "fixme")
    assert released.returncode == 0, released.stderr
    assert client.wait("fixme", timeout=120).outcome == SUCCEEDED
    assert step_runs(out) == {1: [2], 2: [2]}, "it ran once, as attempt 2 (1 could not load)"


@pytest.mark.disturbs  # a leader's takeover is the point: the daemon starts after the crash
def test_a_purge_that_died_after_its_result_is_finished_by_the_next_leader(
    local: LocalCluster, runtime_config: StoreConfig
) -> None:
    """The cleanup index at work: the job has nothing left but a DIRTY result and its index
    entry, which is all a new leader lists at its takeover."""
    with Cluster.open(runtime_config) as cluster:
        quarantined(cluster, "q1")
        crash(runtime_config, "purge", "q1", "purge:result-recorded")
        assert cluster.zk.exists(cluster.layout.cleanup_entry("q1")) is not None
        result = cluster.results.get("q1")
        assert result is not None and result.state == DIRTY
        local.start_daemon("d1")
        wait_for(lambda: _state(cluster, "q1") == CLEAN, timeout=60, what="cleanup")
        nothing_of(cluster, "q1")


def test_forget_then_resubmit_reruns_a_failed_job(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    first, rerun = tmp_path / "first", tmp_path / "rerun"
    client.submit_function(jobs.flaky, str(first), 2, job_id="daily", max_attempts=1)
    local.start_daemon("d1")
    assert client.wait("daily", timeout=60).outcome == FAILED
    with pytest.raises(JobFinished):
        client.submit_function(jobs.flaky, str(rerun), 1, job_id="daily")
    wait_for(lambda: client.status("daily").state == FAILED, timeout=60, what="clean result")
    logs = JobLogs(client.cluster.storage, client.cluster.storage_layout, "daily")
    wait_for(lambda: logs.attempt(1).ended, timeout=60, what="the first run's log stored")
    done = run(runtime_config, "jobs", "forget", "daily", "--yes")
    assert done.returncode == 0, done.stderr
    assert logs.attempts() == {}, "the rerun's attempt 1 must not meet the first run's log"
    client.submit_function(jobs.flaky, str(rerun), 1, job_id="daily")
    assert client.wait("daily", timeout=60).outcome == SUCCEEDED
    assert list(jobs.read_marks(str(rerun))) == ["attempt-1"], "the rerun ran, as attempt 1"
