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

from recovery.member.shipper import start_shipper
from tests.helpers import wait_for
from tests.servers import S3Server
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import UntrustedPayload
from zkstore.jobs.logs import MAX_CHUNK_BYTES, JobLogs, LogFollower
from zkstore.layout import StorageLayout
from zkstore.storage import StateStorage


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
