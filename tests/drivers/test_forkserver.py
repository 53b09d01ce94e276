"""The fork server: drivers forked from a process that has imported what they need."""

from __future__ import annotations

import os
import platform
import signal
import sys
from pathlib import Path

import pytest

from recovery.member.forkserver import ForkServer
from tests.helpers import wait_for

pytestmark = pytest.mark.integration


def fork_driver(server: ForkServer, tmp_path: Path, *argv: str) -> tuple[int, Path]:
    """Fork ``python -m recovery.driver.driver ARGV`` (no configuration a driver could use)."""
    log = tmp_path / "driver.log"
    child = server.fork(list(argv), dict(os.environ), str(tmp_path), str(log), "{}")
    return child.wait(), log


def test_a_forked_driver_runs_in_its_own_session_and_reports_its_exit(tmp_path: Path) -> None:
    messages: list[str] = []
    server = ForkServer(sys.executable, dict(os.environ), messages.append)
    try:
        code, log = fork_driver(server, tmp_path, "--config-fd", "{config_fd}", "--job-id", "x")
        assert code == 2, "argparse refused the missing arguments: the driver's own main ran"
        assert "the following arguments are required: --attempt" in log.read_text()
        assert len(messages) == 1 and "fork server started" in messages[0]
    finally:
        server.close()


def test_a_dead_fork_server_is_started_again_and_its_childrens_ends_are_still_seen(
    tmp_path: Path,
) -> None:
    server = ForkServer(sys.executable, dict(os.environ), lambda _: None)
    try:
        # A driver that waits for a ZooKeeper nobody runs (the default, 127.0.0.1:2181).
        argv = ["--config-fd", "{config_fd}", "--job-id", "j", "--attempt", "1"]
        argv += ["--status-version", "0", "--work-dir", str(tmp_path / "attempt")]
        waiting = server.fork(argv, dict(os.environ), str(tmp_path), str(tmp_path / "a.log"), "{}")
        assert waiting.poll() is None
        first = server._process
        assert first is not None
        os.kill(first.pid, signal.SIGKILL)
        wait_for(lambda: not server.alive, what="the server gone")
        assert waiting.poll() is None, "the driver outlives its fork server"
        waiting.kill()
        wait_for(lambda: waiting.poll() is not None, timeout=30, what="its end seen without it")
        code, _ = fork_driver(server, tmp_path, "--config-fd", "{config_fd}")
        assert code == 2 and server._process is not first, "a new server forked the next one"
    finally:
        server.close()


def test_a_package_in_the_daemons_working_directory_is_not_imported_by_its_drivers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m`` puts the working directory first on the path: a daemon started where a
    ``zkstore/`` or ``recovery/`` package lies would have its fork server, and every driver
    forked from it, import that code instead of the installed one. The server runs with -P."""
    planted = tmp_path / "cwd"
    marker = tmp_path / "imported"
    for package in ("zkstore", "recovery"):
        (planted / package).mkdir(parents=True)
        (planted / package / "__init__.py").write_text(
            f"open({str(marker)!r}, 'a').write({package!r})\n"
        )
    monkeypatch.chdir(planted)
    server = ForkServer(sys.executable, dict(os.environ), lambda _: None)
    try:
        code, log = fork_driver(server, tmp_path, "--help")
        assert code == 0 and "--config-fd" in log.read_text(), "the installed driver ran"
    finally:
        server.close()
    assert not marker.exists(), marker.read_text()


#: system call numbers of select(2) and pselect6(2), whose fifth argument is the timeout
SELECTS = {"x86_64": {23, 270}, "aarch64": {72}}


def asleep_without_timeout(pid: int) -> bool:
    """The process sleeps in select or pselect6 with no timeout (``/proc/PID/syscall``: the
    call's number, then its arguments; ``running`` while it runs, in no call)."""
    fields = Path(f"/proc/{pid}/syscall").read_text().split()
    if len(fields) < 6 or not fields[0].isdigit():
        return False
    return int(fields[0]) in SELECTS[platform.machine()] and int(fields[5], 16) == 0


@pytest.mark.skipif(platform.machine() not in SELECTS, reason="select's numbers on x86_64, arm64")
def test_an_idle_fork_server_sleeps_until_a_request_or_a_childs_end(tmp_path: Path) -> None:
    """It polled every 50 ms (20 wake-ups a second in each daemon's server, for nothing); a
    child's end wakes it through SIGCHLD, and is reported as before."""
    server = ForkServer(sys.executable, dict(os.environ), lambda _: None)
    try:
        argv = ["--config-fd", "{config_fd}", "--job-id", "j", "--attempt", "1"]
        # a driver that waits for a ZooKeeper nobody runs
        argv += ["--status-version", "0", "--work-dir", str(tmp_path / "attempt")]
        waiting = server.fork(argv, dict(os.environ), str(tmp_path), str(tmp_path / "a.log"), "{}")
        assert server._process is not None
        pid = server._process.pid
        wait_for(lambda: asleep_without_timeout(pid), timeout=30, what="the server asleep")
        waiting.kill()
        wait_for(lambda: waiting.poll() is not None, timeout=30, what="the end reported")
        assert waiting.poll() == -signal.SIGKILL
        wait_for(lambda: asleep_without_timeout(pid), timeout=30, what="asleep again")
        code, _ = fork_driver(server, tmp_path, "--config-fd", "{config_fd}")
        assert code == 2, "the next request is served"
    finally:
        server.close()
