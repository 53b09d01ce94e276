"""Artifacts end to end: real daemons and drivers, the installed ``zkstore`` script, real signals.

What the jobs saw is read back from what they wrote (``tests/artifact_jobs.py``); what is left
is read from ZooKeeper and the storage.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests import artifact_jobs
from tests.cli import BIN, connection, show, with_credentials, zkstore
from tests.helpers import wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.records.job_states import CANCELLED, FAILED, SUCCEEDED

# Tests whose daemon takes no option and that kill nothing share one (tests/fleets.py).
pytestmark = [pytest.mark.e2e, pytest.mark.shared_fleet]

JOBS = Path(artifact_jobs.__file__)


def marks(out: Path) -> dict[str, Any]:
    return {p.name: json.loads(p.read_text()) for p in sorted(out.glob("[!.]*"))}


def root_option(scratch: Path) -> list[str]:
    return ["--artifact-root", f"file://{scratch}"]


def nothing_of(config: StoreConfig, job_id: str, *places: Path) -> None:
    """No artifact record, nothing under the job's artifact prefix, nothing at ``places``."""
    with Cluster.open(config) as cluster:
        assert cluster.zk.exists(cluster.layout.job_dir(job_id)) is None
        assert cluster.storage.list(cluster.storage_layout.artifacts(job_id)) == []
    for place in places:
        assert not place.exists(), f"{place} was left behind"


@pytest.mark.disturbs
def test_a_driver_killed_mid_staging_is_cleaned_before_attempt_2_which_reuses_job_results(
    local: LocalCluster, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """Through the installed script: ``zkstore daemon --artifact-root``, ``submit --wait``,
    ``jobs show``; the driver SIGKILLed while it writes its staging directory."""
    scratch, out = tmp_path / "scratch", tmp_path / "out"
    local.start_daemon("d1", *root_option(scratch))
    submit = subprocess.Popen(
        [
            str(BIN / "zkstore"),
            "submit",
            f"{JOBS}:staged",
            *connection(runtime_config),
            "--job-id",
            "staged",
            "--wait",
            "--",
            str(out),
            str(scratch),
            "6",
            "1.0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=with_credentials(runtime_config, None),
    )
    try:
        wait_for((out / "staged-1-attempt-1").exists, timeout=90, what="staging")
        running = zkstore(
            runtime_config, "jobs show", "staged", "--format", "json", *root_option(scratch)
        )
        pid = local.driver_pid("staged")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert not (out / "staged-5-attempt-1").exists(), "killed while it was staging"
        artifacts = {a["name"]: a for a in json.loads(running.stdout)["artifacts"]}
        assert artifacts["staging"]["state"] == "in-progress" and artifacts["staging"]["size"]
        assert artifacts["squares"]["state"] == "finished" and artifacts["squares"]["size"]
        _, stderr = submit.communicate(timeout=180)
    finally:
        if submit.poll() is None:
            submit.kill()
    assert submit.returncode == 0, stderr
    seen = marks(out)
    start = seen["start-attempt-2"]
    assert start["staging_before_register"] == [], "attempt 1's staging was released first"
    assert ["staging", "attempt", 1, "in-progress"] not in start["artifacts"]
    assert start["artifacts"] == [["squares", "job", 1, "finished"]]
    assert "squares-reused-attempt-2" in seen and "squares-reused-attempt-1" not in seen
    result = json.loads((scratch / "total" / "total.json").read_text())
    staged = [f"part-{i}.json" for i in range(6)]
    assert result == {
        "total": sum(i * i for i in range(100)),
        "staging": [*staged, "written-by-attempt-2"],
    }, "exact output, nothing of attempt 1 in it"
    # ``--wait`` returns on the outcome; the leader's clean-up (CLEANING) records the outputs.
    shown = wait_for(
        lambda: (found := show(runtime_config, "staged"))["state"] != "CLEANING" and found,
        timeout=60,
        interval=0.2,
        what="the leader's clean-up of staged",
    )
    assert (shown["state"], shown["result"]["attempts"]) == (SUCCEEDED, 2)
    assert shown["outputs"] == {"total": f"file://{scratch}/total"}
    assert shown["artifacts"] == []
    table = zkstore(runtime_config, "jobs show", "staged")
    assert f"output total: file://{scratch}/total" in table.stdout
    nothing_of(runtime_config, "staged", scratch / "staging")


@pytest.mark.disturbs
def test_failed_and_cancelled_jobs_leave_no_artifact(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    scratch, failed_out, cancelled_out = tmp_path / "scratch", tmp_path / "f", tmp_path / "c"
    local.start_daemon("d1", *root_option(scratch))
    failed = client.submit_function(
        artifact_jobs.failing, str(failed_out), str(scratch), job_id="failing", max_attempts=1
    )
    cancelled = client.submit_function(
        artifact_jobs.cancellable, str(cancelled_out), job_id="cancelled"
    )
    wait_for((cancelled_out / "ready").exists, timeout=90, what="ready")
    shown = show(runtime_config, cancelled)
    [report] = shown["artifacts"]
    assert (report["name"], report["scope"], report["state"], report["keep"]) == (
        "report",
        "job",
        "in-progress",
        True,
    )
    assert report["size"] == len(json.dumps({"rows": 42}))
    cancel = zkstore(runtime_config, "jobs cancel", cancelled, "--reason", "enough")
    assert cancel.returncode == 0, cancel.stderr
    assert client.wait(cancelled, timeout=90).outcome == CANCELLED
    late = marks(cancelled_out)["finished-late"]
    assert (late["raised"], late["exists"], late["record"]) == ("JobCancelled", False, [])
    assert client.wait(failed, timeout=90).outcome == FAILED
    assert len(marks(failed_out)["registered"]["artifacts"]) == 3
    for job_id in (failed, cancelled):
        wait_for(
            lambda job=job_id: client.status(job).result.state == "CLEAN",  # type: ignore[union-attr]
            timeout=30,
            what="cleanup",
        )
        assert client.status(job_id).result.outputs is None  # type: ignore[union-attr]
    nothing_of(runtime_config, failed, scratch / "staging", scratch / "parts")
    nothing_of(runtime_config, cancelled)


@pytest.mark.spark
def test_spark_checkpoint_directory_is_an_attempt_artifact(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    local.start_daemon("d1")
    job_id = client.submit_function(artifact_jobs.spark_checkpoints, str(out), job_id="rdd")
    assert client.wait(job_id, timeout=240).outcome == SUCCEEDED
    seen = marks(out)["checkpointed"]
    prefix = f"{runtime_config.storage_url}/default/artifacts/rdd/attempt-1/spark-checkpoints"
    assert seen["record"] == [prefix, "attempt", 1]
    assert seen["directory"].startswith(prefix.replace("file://", "file:") + "/")
    assert (seen["total"], seen["checkpointed"]) == (999000, True)
    assert seen["written"] > 0, "Spark wrote its checkpoint there"
    wait_for(lambda: client.status(job_id).state == SUCCEEDED, timeout=30, what="cleanup")
    nothing_of(runtime_config, job_id, Path(prefix.removeprefix("file://")))


def test_a_uri_outside_the_roots_fails_the_job_with_a_clear_error(
    local: LocalCluster, client: Client, tmp_path: Path
) -> None:
    local.start_daemon("d1")
    out = tmp_path / "out"
    job_id = client.submit_function(
        artifact_jobs.failing,
        str(out),
        str(tmp_path / "not-a-root"),
        job_id="outside",
        max_attempts=1,
    )
    result = client.wait(job_id, timeout=90)
    assert result.outcome == FAILED
    assert result.error is not None
    assert "ArtifactUriRefused" in result.error and "outside the artifact roots" in result.error
    assert not (tmp_path / "not-a-root").exists()
    assert not out.exists(), "the job stopped at its first register"


def test_daemon_refuses_a_bad_artifact_root(runtime_config: StoreConfig, tmp_path: Path) -> None:
    done = zkstore(runtime_config, "daemon", "--artifact-root", "file:///", "--id", "bad")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "zkstore: usage error: artifact root 'file:///': name a directory below the top, "
        "without . or .."
    ]
