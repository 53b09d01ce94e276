"""Driver logs in storage: shipped as the driver runs, kept through a SIGKILL and a storage
outage, read back from any directory, followed across attempts, removed after their retention."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from recovery.member.log_shipper import ShipperService
from recovery.member.log_shipping import (
    FollowRequest,
    Shipping,
    private_dir,
    shipper_argv,
    shipper_config,
    start_process,
    write_atomically,
)
from recovery.shared.processes import identify
from tests.helpers import alive, holds_for, run_child, wait_for
from tests.servers import S3Server
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import UntrustedPayload
from zkstore.jobs.log_follower import LogShipper
from zkstore.jobs.logs import MAX_CHUNK_BYTES, JobLogs, LogFollower
from zkstore.layout import StorageLayout
from zkstore.payloads.storage import StateStorage

pytestmark = pytest.mark.integration


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


def shipping(config: StoreConfig, work: Path, interval: float, daemon: str = "d1") -> Shipping:
    """A daemon's hand-over to its log shipper, which runs as the real process it is."""
    return Shipping(
        work, daemon, config, start_process(sys.executable, dict(os.environ)), interval=interval
    )


def follow(
    hand_over: Shipping, job_id: str, driver: subprocess.Popen[bytes], log: Path, offset: int = 0
) -> None:
    hand_over.follow(job_id, 1, log, identify(driver.pid), offset=offset)


def shipper_gone(hand_over: Shipping, timeout: float) -> None:
    """The shipper has exited (it is the child of a test thread's Popen, reaped there)."""
    pid = hand_over.pid
    assert pid is not None, "a shipper was started"
    wait_for(lambda: not alive(pid), timeout=timeout, what="the log shipper to exit")


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
    hand_over = shipping(config, tmp_path / "work", interval=0.1)
    follow(hand_over, "job-1", driver, log, offset)
    with Cluster.open(config) as cluster:
        logs = JobLogs(cluster.storage, cluster.storage_layout, "job-1")
        wait_for(lambda: logs.attempt(1).chunks, timeout=60, what="a chunk while it runs")
        go.touch()
        assert driver.wait(timeout=60) == 0
        wait_for(lambda: logs.attempt(1).ended, timeout=60, what="end.json")
        stored = logs.attempt(1)
        assert logs.end(1) == {
            "chunks": len(stored.chunks),
            "bytes": stored.size,
            "finished": logs.end(1)["finished"],  # type: ignore[index]
        }
        assert b"".join(logs.read(stored)) == log.read_bytes()[offset:]
        assert [c.seq for c in stored.chunks] == list(range(len(stored.chunks)))
        assert stored.chunks[0].size <= 1000 * 72 and len(stored.chunks) > 1
        assert all(c.size > 0 for c in stored.chunks)
        assert logs.tail(stored, 2) == b"line 02999 " + b"x" * 60 + b"\nto stderr, no line end"
    # the request goes after end.json is stored (a shipper dead between the two ships again,
    # finding the end there): a moment after the end is seen, on a loaded host
    wait_for(
        lambda: not list(hand_over.directory.glob("*.json")),
        timeout=30,
        what="the request gone with the work",
    )
    hand_over.close()
    shipper_gone(hand_over, timeout=30)


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
    hand_over = shipping(config, tmp_path / "work", interval=3600)
    follow(hand_over, "killed", driver, log)
    wait_for(marker.exists, timeout=60, what="the driver printing")
    assert stored_text(config, "killed", 1) == "", "nothing shipped before the exit"
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=30)
    wait_for(
        lambda: stored_text(config, "killed", 1) == "the last words before SIGKILL\n",
        timeout=60,
        what="the last words stored",
    )
    hand_over.close()
    shipper_gone(hand_over, timeout=30)


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
    hand_over = shipping(config, tmp_path / "work", interval=0.1)
    follow(hand_over, "outage", driver, log)
    wait_for(lambda: log.read_bytes().count(b"\n") >= 200, timeout=60, what="first lines")
    shipper_log = hand_over.directory / "shipper.log"
    wait_for(
        lambda: shipper_log.exists() and b"cannot store the log" in shipper_log.read_bytes(),
        timeout=60,
        what="a look refused",
    )
    root.unlink()
    aside.rename(root)
    go.touch()
    assert driver.wait(timeout=60) == 0
    expected = "".join(f"before {i}\n" for i in range(200)) + "".join(
        f"after {i}\n" for i in range(200)
    )
    wait_for(lambda: stored_text(config, "outage", 1) == expected, timeout=120, what="all lines")
    hand_over.close()
    shipper_gone(hand_over, timeout=30)


def test_one_shipper_follows_every_driver_and_outlives_its_daemon(
    config: StoreConfig, tmp_path: Path
) -> None:
    """Five drivers, one shipper process; the daemon gone (its lock released), the shipper
    stores the rest of the drivers still running, then exits, and not before."""
    go = tmp_path / "go"
    script = (
        "import os, time\n"
        "print('first', flush=True)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
        "print('after the daemon left', flush=True)\n"
    )
    hand_over = shipping(config, tmp_path / "work", interval=0.2)
    drivers = {}
    for n in range(5):
        log = tmp_path / f"job-{n}.log"
        drivers[f"job-{n}"] = child_writing(log, script)
        follow(hand_over, f"job-{n}", drivers[f"job-{n}"], log)
    pid = hand_over.pid
    assert pid is not None
    for job in drivers:
        wait_for(lambda job=job: stored_text(config, job, 1) == "first\n", timeout=60, what=job)
    assert hand_over.pid == pid, "one shipper for every driver"
    assert shippers_of(hand_over.directory) == [pid]
    hand_over.close()  # the daemon stops; its drivers go on
    holds_for(lambda: alive(pid), seconds=1.0, what="the shipper while drivers run")
    go.touch()
    for driver in drivers.values():
        assert driver.wait(timeout=60) == 0
    shipper_gone(hand_over, timeout=30)
    for job in drivers:
        assert stored_text(config, job, 1) == "first\nafter the daemon left\n"
        with Cluster.open(config) as cluster:
            assert JobLogs(cluster.storage, cluster.storage_layout, job).attempt(1).ended


def test_a_killed_shipper_is_replaced_and_resumes_without_a_byte_twice(
    config: StoreConfig, tmp_path: Path
) -> None:
    """SIGKILL the shipper between looks: the daemon's next start finds the request and starts
    another, which goes on from what storage holds: every line once, in order."""
    step = tmp_path / "step"
    script = (
        "import os, time\n"
        "for n in range(3):\n"
        f"    while not os.path.exists({str(step)!r} + str(n)): time.sleep(0.05)\n"
        "    for i in range(50): print(f'step {n} line {i}', flush=True)\n"
    )
    log = tmp_path / "attempt-1.log"
    driver = child_writing(log, script)
    hand_over = shipping(config, tmp_path / "work", interval=0.1)
    follow(hand_over, "resumed", driver, log)
    first = hand_over.pid
    assert first is not None
    expected = ""
    for n in range(3):
        Path(f"{step}{n}").touch()
        expected += "".join(f"step {n} line {i}\n" for i in range(50))
        wait_for(
            lambda expected=expected: stored_text(config, "resumed", 1) == expected,
            timeout=60,
            what=f"step {n}",
        )
        if n == 0:
            os.kill(first, signal.SIGKILL)
            wait_for(lambda: not alive(first), timeout=30, what="the shipper killed")
            hand_over.close()  # the daemon restarts too: a new one takes the lock
            hand_over = shipping(config, tmp_path / "work", interval=0.1)
            hand_over.ensure_running()
            assert hand_over.pid not in (None, first), "a new shipper"
    assert driver.wait(timeout=60) == 0
    with Cluster.open(config) as cluster:
        logs = JobLogs(cluster.storage, cluster.storage_layout, "resumed")
        wait_for(lambda: logs.attempt(1).ended, timeout=60, what="end.json")
        assert b"".join(logs.read(logs.attempt(1))).decode() == expected
    hand_over.close()
    shipper_gone(hand_over, timeout=30)


def test_a_shipper_dead_right_after_its_first_chunk_is_replaced_without_a_byte_twice(
    config: StoreConfig, tmp_path: Path
) -> None:
    """The shipper dies the moment its first chunk is stored (the soak's SIGKILL once landed
    there): its request must already say where the follow began, or the replacement takes that
    chunk for an earlier follow's and stores the same lines again."""
    log = tmp_path / "attempt-1.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(50)))
    driver = subprocess.Popen(["sleep", "60"])
    identity = identify(driver.pid)
    driver.kill()
    driver.wait()
    directory = private_dir(tmp_path / "work" / ".shipping" / "d1")
    request = FollowRequest(
        "early", 1, str(log), 0, None, identity.host, identity.pid,
        identity.start_ticks, identity.boot_id,
    )  # fmt: skip
    write_atomically(directory / request.name, request.to_bytes())
    spec = {"dir": str(directory), "storage": config.storage_url, "cluster": config.cluster_id}
    assert run_child("tests.crash_shipper", spec) == 77, "the shipper stored a chunk and died"
    recorded = FollowRequest.parse((directory / request.name).read_bytes())
    assert (recorded.offset, recorded.first_seq) == (0, 0)
    storage = StateStorage(config.storage_url, config.storage_options)
    assert ShipperService(directory, storage, config.cluster_id, interval=0.05).run() == 0
    assert stored_text(config, "early", 1) == log.read_text()
    assert not (directory / request.name).exists(), "the request is done"


def test_a_second_shipper_of_the_same_daemon_steps_aside(
    config: StoreConfig, tmp_path: Path
) -> None:
    """Two starts race (a daemon's wake found the FIFO closed for a moment): whichever takes the
    service lock serves, the other exits; nothing is stored twice."""
    log = tmp_path / "attempt-1.log"
    driver = child_writing(log, "print('once', flush=True)\n")
    hand_over = shipping(config, tmp_path / "work", interval=0.1)
    follow(hand_over, "raced", driver, log)
    first = hand_over.pid
    assert first is not None
    second = start_process(sys.executable, dict(os.environ))(
        shipper_argv(hand_over.directory, "d1", 0.1),
        shipper_config(config),
        tmp_path / "second.log",
    )
    wait_for(
        lambda: [alive(first), alive(second)].count(True) == 1,
        timeout=30,
        what="one of the two shippers to step aside",
    )
    serving, aside = (first, tmp_path / "second.log") if alive(first) else (second, None)
    assert shippers_of(hand_over.directory) == [serving]
    assert driver.wait(timeout=60) == 0
    wait_for(lambda: stored_text(config, "raced", 1) == "once\n", timeout=60, what="the line")
    hand_over.close()
    wait_for(lambda: not alive(serving), timeout=30, what="the serving shipper to exit")
    stepped = aside or hand_over.directory / "shipper.log"
    assert b"another log shipper serves" in stepped.read_bytes()


def shippers_of(directory: Path) -> list[int]:
    """Pids of the live processes that hold ``directory``'s service lock open (a shipper's
    command line is its title: it does not name the directory)."""
    lock = str(directory / "service.lock")
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        if lock in links:
            found.append(int(entry.name))
    return found


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


# -- resuming: where a follow goes on from ---------------------------------------------------------


def test_a_follow_resumes_from_what_storage_holds(storage: StateStorage, tmp_path: Path) -> None:
    """An earlier launch's chunk, then this follow's: a replacement shipper knows from storage
    how far this follow got, and a follow with no record of its start begins after it all."""
    log = tmp_path / "attempt-1.log"
    log.write_bytes(b"old\n")
    logs = JobLogs(storage, StorageLayout("c"), "job")
    logs.write_chunk(1, 0, b"old\n")
    first = LogShipper(logs, 1, log, offset=4)
    log.write_bytes(b"old\na\n")
    assert first.ship(final=False) and (first.first_offset, first.first_seq) == (4, 1)
    log.write_bytes(b"old\na\nb\nc")
    again = LogShipper(logs, 1, log, offset=4, first_seq=1)  # the shipper was replaced
    assert again.ship(final=True) and again.finish()
    assert b"".join(logs.read(logs.attempt(1))) == b"old\na\nb\nc"
    assert [c.seq for c in logs.attempt(1).chunks] == [0, 1, 2]
    assert logs.end(1) == {"chunks": 3, "bytes": 9, "finished": logs.end(1)["finished"]}  # type: ignore[index]
    unknown = LogShipper(logs, 2, log, offset=None)
    logs.write_chunk(2, 0, b"old\n")
    assert unknown.resume() and (unknown.offset, unknown.seq) == (4, 1)
    assert not LogShipper(logs, 1, log).resume(), "a complete log is left alone"


def test_planted_follow_requests_are_refused(tmp_path: Path) -> None:
    good = FollowRequest("job", 1, "/var/log/x.log", 0, None, "host", 42, 7, "boot")
    assert FollowRequest.parse(good.to_bytes()) == good
    for bad in (
        b"not json",
        b"[]",
        good.to_bytes().replace(b'"job"', b'"../job"'),
        good.to_bytes().replace(b'"/var/log/x.log"', b'"relative.log"'),
        good.to_bytes().replace(b'"pid": 42', b'"pid": "42"'),
        good.to_bytes().replace(b'"attempt": 1', b'"attempt": true'),
        good.to_bytes().replace(b'"host": "host"', b'"host": "host", "extra": 1'),
    ):
        with pytest.raises(ValueError):
            FollowRequest.parse(bad)


def test_a_reader_that_goes_away_is_a_quiet_end(cluster: Cluster, config: StoreConfig) -> None:
    """Issue 49: ``zkstore jobs logs JOB | head`` printed "internal error: BrokenPipeError" and
    exited 1; a closed pipe is a quiet end, as for every Unix tool (the installed script)."""
    import subprocess

    from tests import jobs
    from tests.cli import BIN, connection
    from zkstore.jobs.definition import JobDefinition
    from zkstore.jobs.logs import JobLogs

    cluster.jobs.submit(JobDefinition.for_function("talker", jobs.noop))
    logs = JobLogs(cluster.storage, cluster.storage_layout, "talker")
    line = b"a line of a chatty job's output, long enough to fill a pipe soon\n"
    for seq in range(4):
        logs.write_chunk(1, seq, line * 4096)
    logs.finish(1, chunks=4, size=4 * 4096 * len(line))
    reader = subprocess.Popen(
        [str(BIN / "zkstore"), "jobs", "logs", "talker", "--attempt", "1", *connection(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader.stdout is not None and reader.stderr is not None
    assert reader.stdout.read(100).startswith(b"a line")
    reader.stdout.close()  # as head does once it has its lines
    stderr = reader.stderr.read().decode()
    assert reader.wait(timeout=60) == 0, stderr
    assert stderr == "", stderr
