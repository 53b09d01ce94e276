"""Quarantine handling and forgetting: ``zkstore quarantine list|show|release|purge``,
``jobs cancel`` of a quarantined job, ``jobs forget``; in process (CliRunner) and through the
installed ``zkstore`` script, against real servers, with crashes between the steps."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from recovery.cli.main import cli
from tests import jobs
from tests.cli import connection, run
from tests.helpers import crash, nothing_of, quarantined
from zkstore.admin.lingering import find_lingering
from zkstore.cluster import Cluster, triage
from zkstore.cluster.cleanup import clean_up
from zkstore.config import StoreConfig
from zkstore.errors import JobFinished, JobQuarantined, WrongState
from zkstore.jobs.definition import JobDefinition
from zkstore.records.job_records import JobStatus, RunningInfo
from zkstore.records.job_states import (
    CANCELLED,
    FAILED,
    PENDING,
    QUARANTINED,
    STARTING,
)
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def invoke(config: StoreConfig, *words: str) -> Result:
    """A ``zkstore`` command in process (click's runner), on the test's cluster."""
    return CliRunner().invoke(cli, [*words, *connection(config)], catch_exceptions=False)


# -- list, show --------------------------------------------------------------------------------


def test_list_and_show_in_json_and_tables(cluster: Cluster, config: StoreConfig) -> None:
    quarantined(cluster, "q1")
    cluster.zk.create(cluster.layout.quarantine_entry("garbage"), b"{not json")
    listed = json.loads(invoke(config, "quarantine", "list", "--format", "json").stdout)
    assert [(i["job_id"], i["error"] is None) for i in listed] == [("q1", True), ("garbage", False)]
    assert listed[0]["reason"].startswith("CorruptPayload") and listed[0]["payload"]["size"] > 0
    table = run(config, "quarantine", "list")
    assert table.returncode == 0 and "q1" in table.stdout and "garbage" in table.stdout

    shown = json.loads(invoke(config, "quarantine", "show", "q1", "--format", "json").stdout)
    assert shown["check"] == {"verifies": True, "problem": None}
    assert (shown["state"], shown["attempt"], shown["driver_running"]) == (QUARANTINED, 2, False)
    payload = cluster.storage.path_of(shown["payload"]["uri"])
    cluster.storage.fs.pipe_file(payload, b"x" * shown["payload"]["size"])
    shown = run(config, "quarantine", "show", "q1")
    assert shown.returncode == 0 and "verifies: no: CorruptPayload" in shown.stdout
    assert run(config, "quarantine", "show", "nope").returncode == 4


# -- release ------------------------------------------------------------------------------------


def test_release_is_refused_while_corrupt_and_puts_the_job_back_once_repaired(
    cluster: Cluster, config: StoreConfig
) -> None:
    quarantined(cluster, "q1")
    uri = cluster.quarantine.get("q1").handle.uri  # type: ignore[union-attr]
    path = cluster.storage.path_of(uri)
    good = cluster.storage.fs.cat_file(path)
    cluster.storage.fs.pipe_file(path, good[:-1] + bytes([good[-1] ^ 1]))
    refused = run(config, "quarantine", "release", "q1")
    assert refused.returncode == 5, refused
    assert refused.stderr.startswith("zkstore: error: job q1 stays in quarantine")
    assert "CorruptPayload" in refused.stderr and cluster.quarantine.get("q1") is not None

    cluster.storage.fs.pipe_file(path, good)  # the operator restores it
    assert invoke(config, "quarantine", "release", "q1", "--dry-run").exit_code == 0
    assert cluster.quarantine.get("q1") is not None, "a dry run changes nothing"
    released = run(config, "quarantine", "release", "q1", "--format", "json")
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
    cluster: Cluster, config: StoreConfig, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    quarantined(cluster, "own")
    quarantined(cluster, "thief")
    entry = cluster.quarantine.get("thief")
    assert entry is not None and entry.handle is not None
    foreign = {**entry.handle.record(), "uri": cluster.quarantine.get("own").handle.uri}  # type: ignore[union-attr]
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

    running = RunningInfo(version=None, attempt=2, host="h", pid=1, started=parse_time(utc_now()))
    stand_in_session().create(cluster.layout.running("own"), running.to_bytes(), ephemeral=True)
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
            changed = JobStatus(
                version=None, state=STARTING, attempt=5, updated=parse_time(utc_now())
            )
            cluster.state.put_status("q1", changed, expected_version=current.version)

    with Cluster.open(cluster.config, on_step=meddle) as other:
        assert triage.release(other, "q1").changed
    status = cluster.state.status("q1")
    assert calls and status is not None and (status.state, status.attempt) == (PENDING, 5)


# -- purge, cancel -----------------------------------------------------------------------------


def test_purge_needs_yes_and_leaves_nothing_lingering(
    cluster: Cluster, config: StoreConfig
) -> None:
    quarantined(cluster, "q1")
    assert invoke(config, "quarantine", "purge", "q1").exit_code == 2
    dry = run(config, "quarantine", "purge", "q1", "--dry-run")
    assert dry.returncode == 0 and "would end job q1" in dry.stdout
    assert cluster.quarantine.get("q1") is not None and cluster.results.get("q1") is None

    done = run(config, "quarantine", "purge", "q1", "--yes", "--format", "json")
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

    cluster.jobs.submit(JobDefinition.for_function("live", jobs.noop))
    refused = invoke(config, "quarantine", "purge", "live", "--yes")
    assert refused.exit_code == 5 and "cancel it instead" in refused.output


def test_cancel_of_a_quarantined_job_ends_it_cancelled(
    cluster: Cluster, config: StoreConfig
) -> None:
    quarantined(cluster, "q1")
    done = run(config, "jobs", "cancel", "q1", "--reason", "not needed")
    assert done.returncode == 0, done.stderr
    assert "ended as CANCELLED" in done.stdout
    nothing_of(cluster, "q1")
    result = cluster.results.get("q1")
    assert result is not None and result.outcome == CANCELLED
    assert result.cancel is not None and result.cancel["reason"] == "not needed"
    assert run(config, "jobs", "cancel", "q1").returncode == 5, "finished now"


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
    again = run(config, "quarantine", op, "q1", *(["--yes"] if op == "purge" else []))
    assert again.returncode == 0, again.stderr
    if op == "purge":
        nothing_of(cluster, "q1")
    else:
        assert cluster.quarantine.get("q1") is None
        assert cluster.jobs.handles.exists("q1") is not None
        assert [f.kind for f in find_lingering(cluster, min_age=0)] == []


# -- forget -------------------------------------------------------------------------------------


def test_a_resubmission_racing_the_cleanup_is_refused_and_its_write_left_to_it(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader's cleanup of a finished job discards what is left under the job's storage
    prefix, where a submission of the same id may be writing its payload meanwhile (to be
    refused: the id has a result). The cleanup runs here between the writer's temporary file
    and its publication: it must leave that file to its writer, whose submission is refused with
    JobFinished. (It discarded the file, and the writer failed with PayloadMissing: seen in a
    soak run of tests/command_line/test_triage_with_leader.py.)"""
    cluster.jobs.submit(JobDefinition.for_function("daily", jobs.noop))
    cluster.results.create_dirty("daily", FAILED, attempts=1, error="boom")
    definitions = cluster.storage.path_of(
        cluster.storage.url(cluster.storage_layout.definitions("daily"))
    )
    link, cleaned = os.link, []

    def cleanup_in_between(temp: str, path: str) -> None:
        if definitions in path and not cleaned:
            cleaned.append(clean_up(cluster, "daily"))
        link(temp, path)

    monkeypatch.setattr(os, "link", cleanup_in_between)
    with pytest.raises(JobFinished):
        cluster.jobs.submit(JobDefinition.for_function("daily", jobs.noop))
    monkeypatch.setattr(os, "link", link)
    assert cleaned == [True]
    nothing_of(cluster, "daily")  # the refused writer's payload discarded by the writer


def test_forget_frees_a_finished_id_and_only_that(cluster: Cluster, config: StoreConfig) -> None:
    cluster.jobs.submit(JobDefinition.for_function("daily", jobs.noop))
    refused = run(config, "jobs", "forget", "daily", "--yes")
    assert refused.returncode == 5 and "only a finished job" in refused.stderr
    cluster.results.create_dirty("daily", FAILED, attempts=1, error="boom")
    assert invoke(config, "jobs", "forget", "daily", "--yes").exit_code == 5, "still cleaning"
    assert clean_up(cluster, "daily")
    cluster.state.request_cancel("daily", reason="late")  # a late request leaves records
    with pytest.raises(JobFinished):
        cluster.jobs.submit(JobDefinition.for_function("daily", jobs.noop))
    assert invoke(config, "jobs", "forget", "daily").exit_code == 2, "needs --yes or --dry-run"
    dry = invoke(config, "jobs", "forget", "daily", "--dry-run")
    assert dry.exit_code == 0 and cluster.results.get("daily") is not None

    done = run(config, "jobs", "forget", "daily", "--yes")
    assert done.returncode == 0, done.stderr
    assert "may be submitted again" in done.stdout
    assert cluster.results.get("daily") is None
    assert cluster.zk.exists(cluster.layout.job_dir("daily")) is None, "no stale cancel inherited"
    cluster.jobs.submit(JobDefinition.for_function("daily", jobs.noop))
    assert run(config, "jobs", "forget", "nope", "--yes").returncode == 4

    quarantined(cluster, "q1", checkpoint=False)
    assert invoke(config, "jobs", "forget", "q1", "--yes").exit_code == 5
