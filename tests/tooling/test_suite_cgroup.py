"""The CPU of every process a run starts (tests/suite_cgroup.py): counted by a cgroup, so that a
process nobody waits for (a daemon orphaned by its test, a JVM left to its lifeline) is counted
too, and named when it outlives the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import alive, wait_for
from tests.suite_cgroup import (
    PREFIX,
    Ended,
    SuiteCgroup,
    cpu_stat,
    own_unified_path,
    unified_mount,
)

pytestmark = pytest.mark.integration

HYBRID = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""

#: a process that, told to on its standard input, starts a child that spends 0.3 s of CPU and
#: then sleeps, and exits without waiting for it: nobody will ever wait for that child
ORPHANS = """\
import os, sys, time
sys.stdin.readline()
if os.fork() == 0:
    os.setsid()
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    print(os.getpid(), flush=True)
    time.sleep(120)
    os._exit(0)
os._exit(0)
"""


def test_the_files_it_reads_are_parsed() -> None:
    assert unified_mount(HYBRID) == Path("/sys/fs/cgroup/unified")
    assert unified_mount("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n") == Path("/sys/fs/cgroup")
    assert unified_mount("cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n") is None
    assert own_unified_path("4:memory:/box\n0::/user.slice/run\n") == "/user.slice/run"
    assert own_unified_path("4:memory:/box\n") is None
    assert cpu_stat("usage_usec 2500000\nuser_usec 2000000\nnr_periods 7\n") == {
        "usage": 2.5,
        "user": 2.0,
    }


def test_the_summary_names_what_was_left_running() -> None:
    clean = Ended({"usage": 10.0, "user": 8.0, "system": 2.0}, []).lines(counted=7.5)
    assert clean[0].startswith("CPU of every process the run started: 10.0 s (user 8.0 s")
    assert clean[0].endswith("the tests' own counts name 7.5 s")
    assert clean[1] == "left running after the run: nothing"
    left = Ended({"usage": 1.0}, [(42, "zkstore daemon --id d1")]).lines(counted=1.0)
    assert left[1:] == [
        "left running after the run (1), moved out of its cgroup:",
        "  pid 42: zkstore daemon --id d1",
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="moving a process between cgroups needs root")
def test_an_orphan_nobody_waits_for_is_counted_and_named_and_the_cgroup_goes() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHANS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    orphan = None
    try:
        entered = SuiteCgroup.enter(pid=parent.pid)
        if isinstance(entered, str):
            pytest.skip(entered)  # no writable cgroup v2 hierarchy on this machine
        assert entered.path.name == f"{PREFIX}{parent.pid}"
        assert entered.path.name in Path(f"/proc/{parent.pid}/cgroup").read_text()
        assert parent.stdin is not None and parent.stdout is not None
        parent.stdin.write("go\n")
        parent.stdin.flush()
        orphan = int(parent.stdout.readline())  # its CPU spent, nobody waiting for it
        assert parent.wait(timeout=30) == 0
        assert entered.usage() >= 0.3, "a test is charged it (tests/durations.py)"
        ended = entered.end(pid=parent.pid, wait=0.5)
        assert ended.cpu["usage"] >= 0.3, ended.cpu
        assert [pid for pid, _ in ended.left] == [orphan]
        assert "import os" in ended.left[0][1], ended.left
        assert not entered.path.exists(), "the cgroup, emptied, is removed"
        assert entered.path.name not in Path(f"/proc/{orphan}/cgroup").read_text()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if orphan is not None:
            os.kill(orphan, signal.SIGKILL)
            wait_for(lambda: not alive(orphan), 10, what="the orphan gone")
