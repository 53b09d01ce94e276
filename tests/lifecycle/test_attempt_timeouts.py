"""``submit --timeout``: an attempt over its limit is ended (SIGTERM, the daemon's
``--end-grace``, then SIGKILL of its whole process group) and known dead before the job moves
on; it counts as a failure and says TIMED_OUT with the limit. As a user meets it: the installed
script, a daemon as a process, a driver that ignores SIGTERM and leaves a child behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests.cli import script, show
from tests.helpers import SESSION_TIMEOUT, alive, wait_for, written_json
from zkstore.config import StoreConfig
from zkstore.records.job_states import FAILED

pytestmark = pytest.mark.e2e

STUBBORN = '''
import json, os, signal, subprocess, sys, time
from pathlib import Path


def run(ctx, out):
    """Ignores SIGTERM and leaves a child in its process group (as a Spark JVM would)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
    Path(out, f"pids-{ctx.attempt}").write_text(json.dumps(
        {"driver": os.getpid(), "child": child.pid, "at": time.time()}))
    while True:
        time.sleep(0.1)
'''


def test_a_timed_out_driver_that_ignores_sigterm_is_killed_with_its_group(
    local: LocalCluster,
    client: Client,
    runtime_config: StoreConfig,
    laptop: Path,
    tmp_path: Path,
) -> None:
    (laptop / "stubborn.py").write_text(STUBBORN)
    out = tmp_path / "out"
    out.mkdir()
    grace = 1.0
    local.extra_args = ("--end-grace", f"{grace:g}s")
    local.start_daemon("d1")
    local.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
    done = script(
        runtime_config,
        "submit",
        "stubborn.py:run",
        "--job-id",
        "stubborn",
        "--timeout",
        "3s",
        "--max-attempts",
        "1",
        "--",
        str(out),
        cwd=laptop,
    )
    assert done.returncode == 0, done.stderr
    pids = written_json(out / "pids-1", timeout=90, what="attempt 1 running")
    result = client.wait("stubborn", timeout=60)
    # Known dead before the job moved on: the driver and the child it left in its group.
    assert not alive(pids["driver"]) and not alive(pids["child"])
    assert result.outcome == FAILED
    assert result.error is not None and "TIMED_OUT" in result.error
    assert "over its --timeout of 3s" in result.error
    log = local.daemons["d1"].log()
    assert "SIGKILL to the process group" in log
    wait_for(
        lambda: show(runtime_config, "stubborn")["state"] == FAILED,
        timeout=30,
        what="the result cleaned up",
    )
    assert "--timeout of 3s" in json.dumps(show(runtime_config, "stubborn"))
