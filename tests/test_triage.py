"""Quarantine handling and forgetting: ``zkstore quarantine list|show|release|purge``,
``jobs cancel`` of a quarantined job, ``jobs forget``; in process (CliRunner) and through the
installed ``zkstore`` script, against real servers, with crashes between the steps."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from recovery.cli import cli
from recovery.client import Client
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.helpers import BIN, cli_args, crash, step_runs, wait_for
from zkstore.admin.lingering import find_lingering
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import JobFinished, JobQuarantined, WrongState
from zkstore.jobs import triage
from zkstore.jobs.cleanup import clean_up
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.logs import JobLogs
from zkstore.jobs.records import JobStatus, RunningInfo
from zkstore.jobs.states import (
    CANCELLED,
    CLEAN,
    DIRTY,
    FAILED,
    PENDING,
    QUARANTINED,
    STARTING,
    SUCCEEDED,
)
from zkstore.strict import utc_now


def noop(ctx: Any) -> None:
    return None


def invoke(config: StoreConfig, *words: str) -> Result:
    """A ``zkstore`` command in process (click's runner), on the test's cluster."""
    return CliRunner().invoke(cli, [*words, *cli_args(config)], catch_exceptions=False)


def script(config: StoreConfig, *words: str) -> subprocess.CompletedProcess[str]:
    """The installed ``zkstore`` script as a subprocess."""
    return subprocess.run(
        [str(BIN / "zkstore"), *words, *cli_args(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def quarantined(cluster: Cluster, job_id: str, *, checkpoint: bool = True) -> None:
    """A submitted job (with a status, a checkpoint) that the leader moved to quarantine."""
    cluster.jobs.submit(JobDefinition.for_function(job_id, noop))
    status = JobStatus(version=None, state=STARTING, attempt=2, failures=1, updated=utc_now())
    cluster.state.put_status(job_id, status, expected_version=None)
    if checkpoint:
        store = cluster.checkpoints(job_id)
        store.add({"step": 1})
        store.handles.release_all()  # as the driver's session would on its way out
    cluster.quarantine.move_in(job_id, "CorruptPayload: sha256 does not match its handle")


def nothing_of(cluster: Cluster, job_id: str) -> None:
    """The job's only trace is its CLEAN result: no entry, records, payload, index, lingering."""
    layout = cluster.layout
    for path in (
        layout.job_handle(job_id),
        layout.job_dir(job_id),
        layout.quarantine_entry(job_id),
        layout.cleanup_entry(job_id),
    ):
        assert cluster.zk.exists(path) is None, path
    assert cluster.storage.list(cluster.storage_layout.job(job_id)) == []
    assert [f for f in find_lingering(cluster, min_age=0) if f.job_id == job_id] == []
    result = cluster.results.get(job_id)
    assert result is not None and result.state == CLEAN


# -- list, show --------------------------------------------------------------------------------


def test_list_and_show_in_json_and_tables(cluster: Cluster, config: StoreConfig) -> None:
    quarantined(cluster, "q1")
    cluster.zk.create(cluster.layout.quarantine_entry("garbage"), b"{not json")
    listed = json.loads(invoke(config, "quarantine", "list", "--format", "json").stdout)
    assert [(i["job_id"], i["error"] is None) for i in listed] == [("q1", True), ("garbage", False)]
    assert listed[0]["reason"].startswith("CorruptPayload") and listed[0]["payload"]["size"] > 0
    table = script(config, "quarantine", "list")
    assert table.returncode == 0 and "q1" in table.stdout and "garbage" in table.stdout

    shown = json.loads(invoke(config, "quarantine", "show", "q1", "--format", "json").stdout)
    assert shown["check"] == {"verifies": True, "problem": None}
    assert (shown["state"], shown["attempt"], shown["driver_running"]) == (QUARANTINED, 2, False)
    payload = cluster.storage.path_of(shown["payload"]["uri"])
    cluster.storage.fs.pipe_file(payload, b"x" * shown["payload"]["size"])
    shown = script(config, "quarantine", "show", "q1")
    assert shown.returncode == 0 and "verifies: no: CorruptPayload" in shown.stdout
    assert script(config, "quarantine", "show", "nope").returncode == 4


# -- release ------------------------------------------------------------------------------------


def test_release_is_refused_while_corrupt_and_puts_the_job_back_once_repaired(
    cluster: Cluster, config: StoreConfig
) -> None:
    quarantined(cluster, "q1")
    uri = cluster.quarantine.get("q1").handle["uri"]  # type: ignore[union-attr]
    path = cluster.storage.path_of(uri)
    good = cluster.storage.fs.cat_file(path)
    cluster.storage.fs.pipe_file(path, good[:-1] + bytes([good[-1] ^ 1]))
    refused = script(config, "quarantine", "release", "q1")
    assert refused.returncode == 5, refused
    assert refused.stderr.startswith("zkstore: error: JobQuarantined: job q1 stays in quarantine")
    assert "CorruptPayload" in refused.stderr and cluster.quarantine.get("q1") is not None

    cluster.storage.fs.pipe_file(path, good)  # the operator restores it
    assert invoke(config, "quarantine", "release", "q1", "--dry-run").exit_code == 0
    assert cluster.quarantine.get("q1") is not None, "a dry run changes nothing"
    released = script(config, "quarantine", "release", "q1", "--format", "json")
    assert released.returncode == 0, released.stderr
    assert json.loads(released.stdout)["changed"] is True
    assert cluster.quarantine.get("q1") is None
    assert cluster.jobs.recover("q1", lock=False).state.job_id == "q1"
    status = cluster.state.status("q1")
    assert status is not None and (status.state, status.attempt, status.failures) == (
        PENDING,
        2,
        1,
    ), "attempts so far are kept: the leader starts attempt 3"
    assert cluster.checkpoints("q1").latest() is not None, "its checkpoints are kept"
    again = invoke(config, "quarantine", "release", "q1")
    assert again.exit_code == 0 and "not quarantined" in again.stdout, "idempotent"


def test_release_refuses_a_foreign_payload_a_raw_handle_and_a_live_driver(
    cluster: Cluster, config: StoreConfig
) -> None:
    quarantined(cluster, "own")
    quarantined(cluster, "thief")
    entry = cluster.quarantine.get("thief")
    assert entry is not None and entry.handle is not None
    foreign = {**entry.handle, "uri": cluster.quarantine.get("own").handle["uri"]}  # type: ignore[union-attr]
    cluster.zk.set(
        cluster.layout.quarantine_entry("thief"),
        json.dumps({**json.loads(entry.to_bytes()), "handle": foreign}).encode(),
    )
    with pytest.raises(JobQuarantined, match="is not where the payloads"):
        triage.release(cluster, "thief")

    cluster.zk.create(cluster.layout.job_handle("raw"), b"garbage")
    cluster.zk.create(f"{cluster.layout.job_handle('raw')}/locks")
    cluster.quarantine.move_in("raw", "unreadable handle")
    refused = invoke(config, "quarantine", "release", "raw")
    assert refused.exit_code == 5 and "kept no valid handle" in refused.output

    running = RunningInfo(version=None, attempt=2, host="h", pid=1, started=utc_now())
    cluster.zk.create(cluster.layout.running("own"), running.to_bytes(), ephemeral=True)
    with pytest.raises(WrongState, match="still runs"):
        triage.release(cluster, "own")


def test_release_loses_a_race_with_the_leader_instead_of_overwriting(cluster: Cluster) -> None:
    """The release transaction is conditional on the status it read: a status changed
    meanwhile (by a leader, say) makes it read again, and it releases from what it sees."""
    quarantined(cluster, "q1")
    calls = []

    def meddle(step: str) -> None:
        if step == "release:verified" and not calls:
            calls.append(step)
            current = cluster.state.status("q1")
            assert current is not None and current.version is not None
            changed = JobStatus(version=None, state=STARTING, attempt=5, updated=utc_now())
            cluster.state.put_status("q1", changed, expected_version=current.version)

    with Cluster.open(cluster.config, on_step=meddle) as other:
        assert triage.release(other, "q1").changed
    status = cluster.state.status("q1")
    assert calls and status is not None and (status.state, status.attempt) == (PENDING, 5)


@pytest.mark.slow
def test_a_repaired_job_released_runs_to_success(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """A payload damaged in storage: the driver cannot load it, the job is quarantined; release
    is refused until the operator restores the payload, then the job runs to success."""
    out = tmp_path / "out"
    client.submit_function(jobs.steps, str(out), 2, 0.01, job_id="fixme", max_attempts=2)
    path = client.cluster.storage.path_of(client.cluster.jobs.handles.get_handle("fixme").uri)
    good = client.cluster.storage.fs.cat_file(path)
    client.cluster.storage.fs.pipe_file(path, good[:-1] + bytes([good[-1] ^ 1]))
    local.start_daemon("d1")
    wait_for(lambda: client.status("fixme").state == QUARANTINED, timeout=60, what="quarantine")
    refused = script(runtime_config, "quarantine", "release", "fixme")
    assert refused.returncode == 5 and "still does not verify" in refused.stderr, refused

    client.cluster.storage.fs.pipe_file(path, good)
    released = script(runtime_config, "quarantine", "release", "fixme")
    assert released.returncode == 0, released.stderr
    assert client.wait("fixme", timeout=120).outcome == SUCCEEDED
    assert step_runs(out) == {1: [2], 2: [2]}, "it ran once, as attempt 2 (1 could not load)"


# -- purge, cancel -----------------------------------------------------------------------------


def test_purge_needs_yes_and_leaves_nothing_lingering(
    cluster: Cluster, config: StoreConfig
) -> None:
    quarantined(cluster, "q1")
    assert invoke(config, "quarantine", "purge", "q1").exit_code == 2
    dry = script(config, "quarantine", "purge", "q1", "--dry-run")
    assert dry.returncode == 0 and "would end job q1" in dry.stdout
    assert cluster.quarantine.get("q1") is not None and cluster.results.get("q1") is None

    done = script(config, "quarantine", "purge", "q1", "--yes", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] is True
    nothing_of(cluster, "q1")
    result = cluster.results.get("q1")
    assert result is not None and result.outcome == FAILED and result.attempts == 2
    assert result.error == (
        "purged while quarantined: CorruptPayload: sha256 does not match its handle"
    )
    assert result.summary is not None and result.summary["kind"] == "function"
    again = invoke(config, "quarantine", "purge", "q1", "--yes")
    assert again.exit_code == 0 and "has a result (FAILED)" in again.output, "idempotent"

    cluster.jobs.submit(JobDefinition.for_function("live", noop))
    refused = invoke(config, "quarantine", "purge", "live", "--yes")
    assert refused.exit_code == 5 and "cancel it instead" in refused.output


def test_cancel_of_a_quarantined_job_ends_it_cancelled(
    cluster: Cluster, config: StoreConfig
) -> None:
    quarantined(cluster, "q1")
    done = script(config, "jobs", "cancel", "q1", "--reason", "not needed")
    assert done.returncode == 0, done.stderr
    assert "ended as CANCELLED" in done.stdout
    nothing_of(cluster, "q1")
    result = cluster.results.get("q1")
    assert result is not None and result.outcome == CANCELLED
    assert result.cancel is not None and result.cancel["reason"] == "not needed"
    assert script(config, "jobs", "cancel", "q1").returncode == 5, "finished now"


def test_purge_replaces_the_unreadable_result_that_quarantined_a_job(cluster: Cluster) -> None:
    quarantined(cluster, "q1", checkpoint=False)
    cluster.zk.create(cluster.layout.result("q1"), b"garbage")
    with pytest.raises(JobFinished):
        triage.release(cluster, "q1")
    assert triage.purge(cluster, "q1").changed
    nothing_of(cluster, "q1")


@pytest.mark.parametrize(
    ("op", "step"),
    [
        ("release", "release:verified"),
        ("release", "release:committed"),
        ("purge", "purge:result-recorded"),
        ("purge", "remove:payload-discarded"),  # within the cleanup of its checkpoints
        ("purge", "purge:cleaned"),
    ],
)
def test_a_crash_between_the_steps_is_finished_by_running_again(
    cluster: Cluster, config: StoreConfig, op: str, step: str
) -> None:
    quarantined(cluster, "q1")
    crash(config, op, "q1", step)
    again = script(config, "quarantine", op, "q1", *(["--yes"] if op == "purge" else []))
    assert again.returncode == 0, again.stderr
    if op == "purge":
        nothing_of(cluster, "q1")
    else:
        assert cluster.quarantine.get("q1") is None
        assert cluster.jobs.handles.exists("q1") is not None
        assert [f.kind for f in find_lingering(cluster, min_age=0)] == []


@pytest.mark.slow
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


def _state(cluster: Cluster, job_id: str) -> str | None:
    result = cluster.results.get(job_id)
    return None if result is None else result.state


# -- forget -------------------------------------------------------------------------------------


def test_forget_frees_a_finished_id_and_only_that(cluster: Cluster, config: StoreConfig) -> None:
    cluster.jobs.submit(JobDefinition.for_function("daily", noop))
    refused = script(config, "jobs", "forget", "daily", "--yes")
    assert refused.returncode == 5 and "only a finished job" in refused.stderr
    cluster.results.create_dirty("daily", FAILED, attempts=1, error="boom")
    assert invoke(config, "jobs", "forget", "daily", "--yes").exit_code == 5, "still cleaning"
    assert clean_up(cluster, "daily")
    cluster.state.request_cancel("daily", reason="late")  # a late request leaves records
    with pytest.raises(JobFinished):
        cluster.jobs.submit(JobDefinition.for_function("daily", noop))
    assert invoke(config, "jobs", "forget", "daily").exit_code == 2, "needs --yes or --dry-run"
    dry = invoke(config, "jobs", "forget", "daily", "--dry-run")
    assert dry.exit_code == 0 and cluster.results.get("daily") is not None

    done = script(config, "jobs", "forget", "daily", "--yes")
    assert done.returncode == 0, done.stderr
    assert "may be submitted again" in done.stdout
    assert cluster.results.get("daily") is None
    assert cluster.zk.exists(cluster.layout.job_dir("daily")) is None, "no stale cancel inherited"
    cluster.jobs.submit(JobDefinition.for_function("daily", noop))
    assert script(config, "jobs", "forget", "nope", "--yes").returncode == 4

    quarantined(cluster, "q1", checkpoint=False)
    assert invoke(config, "jobs", "forget", "q1", "--yes").exit_code == 5


@pytest.mark.slow
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
    done = script(runtime_config, "jobs", "forget", "daily", "--yes")
    assert done.returncode == 0, done.stderr
    assert logs.attempts() == {}, "the rerun's attempt 1 must not meet the first run's log"
    client.submit_function(jobs.flaky, str(rerun), 1, job_id="daily")
    assert client.wait("daily", timeout=60).outcome == SUCCEEDED
    assert list(jobs.read_marks(str(rerun))) == ["attempt-1"], "the rerun ran, as attempt 1"
