"""Processes named by pid and start time, and an adopted process followed through its pidfd."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from recovery.shared import processes
from recovery.shared.processes import Liveness, ProcessIdentity

pytestmark = pytest.mark.integration


def test_a_process_is_its_pid_and_start_time() -> None:
    me = processes.this_process()
    assert me.start_ticks is not None and me.boot_id == processes.boot_id()
    assert processes.probe(me) is Liveness.ALIVE
    assert (
        processes.probe(ProcessIdentity(me.host, me.pid, me.start_ticks + 1, me.boot_id))
        is Liveness.DEAD
    )
    assert (
        processes.probe(ProcessIdentity("elsewhere", me.pid, me.start_ticks, me.boot_id))
        is Liveness.UNKNOWN
    )
    assert (
        processes.probe(ProcessIdentity(me.host, me.pid, me.start_ticks, "other"))
        is Liveness.UNKNOWN
    )
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    gone = processes.identify(child.pid)
    child.wait()
    assert processes.probe(gone) is Liveness.DEAD


def test_an_adopted_process_is_followed_through_its_pidfd(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, cwd=tmp_path
    )
    try:
        identity = processes.identify(child.pid)
        assert [p.pid for p in processes.in_directory(tmp_path)] == [child.pid]
        adopted = processes.Adopted.open(identity)
        assert adopted is not None and adopted.poll() is None
        assert (
            processes.Adopted.open(
                ProcessIdentity(identity.host, identity.pid, 1, identity.boot_id)
            )
            is None
        )
        adopted.kill()
        assert adopted.wait() == processes.EXIT_NOT_SEEN
        adopted.close()
        assert adopted.poll() == processes.EXIT_NOT_SEEN
    finally:
        child.kill()
        child.wait()
