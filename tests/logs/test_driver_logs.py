"""Driver logs as a user meets them: a killed driver's last lines, jobs logs and --follow, their
retention."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.helpers import hands_client, wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.logs import JobLogs
from zkstore.records.job_states import SUCCEEDED

# Tests that only submit and read logs share a daemon (tests/fleets.py).
pytestmark = [pytest.mark.e2e, pytest.mark.shared_fleet]

BIN = Path(sys.executable).parent


def env_for(config: StoreConfig) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKSTORE_")}
    env.update(
        {
            "ZKSTORE_ZK": config.zk_hosts,
            "ZKSTORE_ROOT": config.root,
            "ZKSTORE_STORAGE": config.storage_url,
        }
    )
    return env


def stored_tail(config: StoreConfig, job_id: str, attempt: int, lines: int) -> str:
    with Cluster.open(config) as cluster:
        logs = JobLogs(cluster.storage, cluster.storage_layout, job_id)
        return logs.tail(logs.attempt(attempt), lines).decode()


@pytest.mark.disturbs
def test_driver_sigkilled_by_hand_keeps_its_last_lines(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    local.start_daemon("d1")
    out = tmp_path / "out"
    job_id = client.submit_function(
        jobs.printer, str(out), 50, 600.0, job_id="killed", max_attempts=1
    )
    wait_for((out / "printed-1").exists, timeout=60, what="the job printing")
    pid = local.driver_pid(job_id)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    with Cluster.open(runtime_config) as cluster:
        logs = JobLogs(cluster.storage, cluster.storage_layout, job_id)
        wait_for(lambda: logs.attempt(1).ended, timeout=60, what="attempt 1's log complete")
        text = b"".join(logs.read(logs.attempt(1))).decode()
    assert "attempt 1 line 00049\nattempt 1 last words\n" in text


def test_jobs_logs_from_anywhere_and_follow_across_an_attempt_change(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """``--follow`` started at submission prints attempt 1 (which fails), then attempt 2, and
    exits when the job ends; a plain read from another directory prints one attempt."""
    local.start_daemon("d1")
    out = tmp_path / "out"
    elsewhere = tmp_path / "somewhere-else"
    elsewhere.mkdir()
    env = env_for(runtime_config)
    job_id = client.submit_function(jobs.printer, str(out), 20, 2.5, job_id="flaky-logs")
    follow = subprocess.Popen(
        [str(BIN / "zkstore"), "jobs", "logs", job_id, "--follow"],
        cwd=elsewhere,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stdout, stderr = follow.communicate(timeout=180)
    assert follow.returncode == 0, stderr.decode()
    assert client.wait(job_id, timeout=60).outcome == SUCCEEDED
    text = stdout.decode()
    first, second = text.index("attempt 1 line 00000"), text.index("attempt 2 line 00000")
    assert first < text.index("attempt 1 last words") < second < text.index("attempt 2 last words")
    assert "RuntimeError: attempt 1 fails on purpose" in text[first:second]
    assert f"--- {job_id}: attempt 2 ---" in stderr.decode()
    shown = subprocess.run(
        [str(BIN / "zkstore"), "jobs", "logs", job_id, "--attempt", "1", "--tail", "3"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == stored_tail(runtime_config, job_id, 1, 3)
    missing = subprocess.run(
        [str(BIN / "zkstore"), "jobs", "logs", "no-such-job"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 4 and "no-such-job" in missing.stderr


def test_logs_kept_for_their_retention_then_removed_by_the_leader(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    local = LocalCluster(
        runtime_config, tmp_path / "rt", restart_backoff=0.2, extra_args=("--keep-logs", "10s")
    )
    try:
        local.start_daemon("d1")
        with hands_client(runtime_config) as client:
            out = tmp_path / "out"
            job_id = client.submit_function(
                jobs.printer, str(out), 5, 0.0, job_id="kept", max_attempts=1
            )
            assert client.wait(job_id, timeout=60).outcome == "FAILED"
            cluster = client.cluster
            logs = JobLogs(cluster.storage, cluster.storage_layout, job_id)
            result = wait_for(
                lambda: (r := cluster.results.get(job_id)) is not None and r.state == "CLEAN" and r,
                timeout=60,
                what="cleanup",
            )
            assert result.logs_until is not None, "the cleanup recorded the retention"
            # The driver exits after its outcome is recorded: its last chunks may come after
            # the cleanup, and are kept all the same.
            wait_for(lambda: logs.attempt(1).ended, timeout=60, what="the whole log stored")
            assert "attempt 1 last words" in b"".join(logs.read(logs.attempt(1))).decode()
            wait_for(
                lambda: cluster.results.get(job_id).logs_until is None,  # type: ignore[union-attr]
                timeout=90,
                what="the retention sweep",
            )
            assert cluster.storage.list(cluster.storage_layout.job(job_id)) == []
    finally:
        local.stop()
