"""Driver logs in storage: shipped as the driver runs, kept through a SIGKILL and a storage
outage, read back from any directory, followed across attempts, removed after their retention."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recovery.client import Client
from recovery.dev.localcluster import LocalCluster
from recovery.observe.shipper import start_shipper
from tests import jobs
from tests.helpers import S3Server, wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import UntrustedPayload
from zkstore.jobs.logs import MAX_CHUNK_BYTES, JobLogs, LogFollower
from zkstore.jobs.states import SUCCEEDED
from zkstore.layout import StorageLayout
from zkstore.storage import StateStorage

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


def stored_text(config: StoreConfig, job_id: str, attempt: int) -> str:
    with Cluster.open(config) as cluster:
        logs = JobLogs(cluster.storage, cluster.storage_layout, job_id)
        return b"".join(logs.read(logs.attempt(attempt))).decode()


def child_writing(path: Path, script: str) -> subprocess.Popen[bytes]:
    """A stand-in driver: its stdout and stderr go to ``path``, as the launcher's do."""
    with open(path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-c", script], stdout=log, stderr=subprocess.STDOUT
        )


# -- the shipper, with stand-in drivers ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_shipper_stores_everything_in_order_and_marks_it_complete(
    kind: str, config: StoreConfig, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "s3":
        s3: S3Server = request.getfixturevalue("s3_server")
        config = config.with_changes(
            storage_url=f"s3://{s3.new_bucket()}/zk", storage_options=s3.options()
        )
    log, go = tmp_path / "attempt-1.log", tmp_path / "go"
    log.write_bytes(b"an earlier launch wrote this\n")
    offset = log.stat().st_size
    script = (
        "import os, sys, time\n"
        "for i in range(3000):\n"
        "    print(f'line {i:05d} ' + 'x' * 60, flush=i % 100 == 0)\n"
        f"    while i == 999 and not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
        "sys.stderr.write('to stderr, no line end')\n"
    )
    driver = child_writing(log, script)
    shipper = start_shipper(
        config, "job-1", 1, driver.pid, log, offset, env=dict(os.environ), interval=0.1
    )
    assert shipper is not None
    with Cluster.open(config) as cluster:
        logs = JobLogs(cluster.storage, cluster.storage_layout, "job-1")
        wait_for(lambda: logs.attempt(1).chunks, timeout=60, what="a chunk while it runs")
        go.touch()
        assert driver.wait(timeout=60) == 0
        assert shipper.wait(timeout=60) == 0
        stored = logs.attempt(1)
        assert stored.ended and logs.end(1) == {
            "chunks": len(stored.chunks),
            "bytes": stored.size,
            "finished": logs.end(1)["finished"],  # type: ignore[index]
        }
        assert b"".join(logs.read(stored)) == log.read_bytes()[offset:]
        assert [c.seq for c in stored.chunks] == list(range(len(stored.chunks)))
        assert stored.chunks[0].size <= 1000 * 72 and len(stored.chunks) > 1
        assert all(c.size > 0 for c in stored.chunks)
        assert logs.tail(stored, 2) == b"line 02999 " + b"x" * 60 + b"\nto stderr, no line end"


def test_sigkilled_driver_still_has_its_last_lines_in_storage(
    config: StoreConfig, tmp_path: Path
) -> None:
    """With an hour between looks, only the exit (seen through the pidfd) can have stored them."""
    log = tmp_path / "attempt-1.log"
    marker = tmp_path / "printed"
    script = (
        f"print('the last words before SIGKILL', flush=True)\n"
        f"open({str(marker)!r}, 'w').close()\n"
        "import time; time.sleep(600)\n"
    )
    driver = child_writing(log, script)
    shipper = start_shipper(
        config, "killed", 1, driver.pid, log, 0, env=dict(os.environ), interval=3600
    )
    assert shipper is not None
    wait_for(marker.exists, timeout=60, what="the driver printing")
    assert stored_text(config, "killed", 1) == "", "nothing shipped before the exit"
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=30)
    assert shipper.wait(timeout=60) == 0
    assert stored_text(config, "killed", 1) == "the last words before SIGKILL\n"


def test_storage_refusing_for_a_while_loses_nothing(config: StoreConfig, tmp_path: Path) -> None:
    """Storage's root replaced by a plain file: every write fails until it is put back; the
    lines wait in the log file meanwhile and are all stored afterwards, in order."""
    root = Path(config.storage_url.removeprefix("file://"))
    root.mkdir(parents=True, exist_ok=True)
    aside = tmp_path / "storage-aside"
    root.rename(aside)
    root.write_text("not a directory")
    log, go = tmp_path / "attempt-1.log", tmp_path / "go"
    script = (
        "import os, time\n"
        "for i in range(200): print(f'before {i}', flush=True)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
        "for i in range(200): print(f'after {i}', flush=True)\n"
    )
    driver = child_writing(log, script)
    shipper = start_shipper(
        config, "outage", 1, driver.pid, log, 0, env=dict(os.environ), interval=0.1
    )
    assert shipper is not None
    wait_for(lambda: log.read_bytes().count(b"\n") >= 200, timeout=60, what="first lines")
    time.sleep(1.0)  # several looks of the shipper, every one refused
    root.unlink()
    aside.rename(root)
    go.touch()
    assert driver.wait(timeout=60) == 0
    assert shipper.wait(timeout=120) == 0
    expected = "".join(f"before {i}\n" for i in range(200)) + "".join(
        f"after {i}\n" for i in range(200)
    )
    assert stored_text(config, "outage", 1) == expected


# -- end to end, with daemons -------------------------------------------------------------------


@pytest.mark.slow
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


@pytest.mark.slow
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


def stored_tail(config: StoreConfig, job_id: str, attempt: int, lines: int) -> str:
    with Cluster.open(config) as cluster:
        logs = JobLogs(cluster.storage, cluster.storage_layout, job_id)
        return logs.tail(logs.attempt(attempt), lines).decode()


@pytest.mark.slow
def test_logs_kept_for_their_retention_then_removed_by_the_leader(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    local = LocalCluster(
        runtime_config, tmp_path / "rt", restart_backoff=0.2, extra_args=("--keep-logs", "10s")
    )
    try:
        local.start_daemon("d1")
        with Client(runtime_config) as client:
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


# -- reading: what storage holds, however it got there ---------------------------------------


def test_follower_moves_past_an_attempt_whose_shipper_died(storage: StateStorage) -> None:
    """Attempt 1 has no end.json (its host died with its shipper): the follower prints what
    there is and moves on once attempt 2 exists and attempt 1 has been quiet for the grace."""
    logs = JobLogs(storage, StorageLayout("c"), "job")
    logs.write_chunk(1, 0, b"one\n")
    logs.write_chunk(2, 0, b"two\n")
    logs.finish(2, chunks=1, size=4)
    follower = LogFollower(logs, lambda: (2, True), poll=0.05, grace=0.3)
    assert follower.start() == 2, "the latest attempt with logs"
    assert list(follower.follow(1)) == [(1, b"one\n"), (2, b"two\n")]


def test_planted_objects_in_the_logs_are_ignored_or_refused(storage: StateStorage) -> None:
    logs = JobLogs(storage, StorageLayout("c"), "job")
    logs.write_chunk(1, 0, b"real\n")
    for key in ("attempt-1/notes.txt", "attempt-x/00000000.log", "attempt-0/00000000.log"):
        storage.create(f"{logs.prefix}/{key}", b"planted\n")
    storage.create(f"{logs.prefix}/attempt-1/00000001.log", b"x" * (MAX_CHUNK_BYTES + 1))
    found = logs.attempts()
    assert list(found) == [1] and [c.seq for c in found[1].chunks] == [0, 1]
    assert logs.read_chunk(found[1].chunks[0]) == b"real\n"
    with pytest.raises(UntrustedPayload):
        logs.read_chunk(found[1].chunks[1])
