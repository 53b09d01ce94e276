"""Hung drivers, as a user meets them (the installed script, a daemon as a process): a job
submitted with ``--progress-timeout`` that deadlocks after some ``ctx.heartbeat()`` calls is
ended as STUCK and restarted from its checkpoint; a SIGSTOPped driver (its session lost, its
process alive) is killed, with its process group, and known dead before the next attempt runs.

The progress timeout is seconds, below the product's minimum of 30 s: the daemon and the
script run with the suite's lowered minimums (:data:`tests.helpers.LOWERED_MINIMUMS`).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests.cli import script, show
from tests.helpers import (
    LOWERED_MINIMUMS,
    SESSION_TIMEOUT,
    alive,
    lowered_minimums,
    wait_for,
    written_json,
)
from zkstore.config import TEST_MINIMUMS_ENV, StoreConfig
from zkstore.jobs.stops import Heartbeat
from zkstore.layout import Layout
from zkstore.records.job_states import SUCCEEDED

pytestmark = pytest.mark.e2e

JOBS = '''
import json, os, threading, time
from pathlib import Path


def mark(out, name, **data):
    """Write ``<out>/<name>`` whole (a temporary name, then a rename): the test reads it at once."""
    temporary = Path(out, "." + name + ".partial")
    temporary.write_text(json.dumps({"pid": os.getpid(), **data}))
    temporary.replace(Path(out, name))


def deadlocks(ctx, out, beating):
    """Attempt 1: a checkpoint, heartbeats for ``beating`` seconds, then a deadlock."""
    done = ctx.latest_checkpoint()
    mark(out, f"deadlocks-{ctx.attempt}", resumed_from=done)
    if done is not None:
        return
    ctx.checkpoint({"step": 1})
    until = time.monotonic() + float(beating)
    while time.monotonic() < until:
        ctx.heartbeat()
        time.sleep(0.2)
    mark(out, "deadlocks-beaten")
    threading.Event().wait()


def frozen(ctx, out, beating):
    """Attempt 1 waits to be SIGSTOPped; the next resumes from its checkpoint."""
    done = ctx.latest_checkpoint()
    if done is None:
        ctx.checkpoint({"step": 1})
    mark(out, f"frozen-{ctx.attempt}", resumed_from=done)
    if done is None:
        time.sleep(600)
'''


def test_a_deadlocked_and_a_sigstopped_driver_are_ended_and_resumed(
    local: LocalCluster,
    client: Client,
    runtime_config: StoreConfig,
    laptop: Path,
    tmp_path: Path,
) -> None:
    (laptop / "jobs.py").write_text(JOBS)
    out = tmp_path / "out"
    out.mkdir()
    launch = 5.0
    # A driver that stalls past its session is lost anyway: a progress timeout a second
    # longer than the session, with a heartbeat written every quarter of it, is ended only
    # by the job's own silence. The job beats for twice that, then deadlocks.
    progress = SESSION_TIMEOUT + 1
    beating = 2 * progress
    assert progress >= LOWERED_MINIMUMS.progress_timeout
    local.extra_args = ("--launch-timeout", f"{launch:g}s", "--end-grace", "2s")
    local.extra_env = lowered_minimums({})
    local.start_daemon("d1")
    local.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
    for job in ("deadlocks", "frozen"):
        done = script(
            runtime_config,
            "submit",
            f"jobs.py:{job}",
            "--job-id",
            job,
            "--progress-timeout",
            f"{progress:g}s",
            "--",
            str(out),
            str(beating),
            cwd=laptop,
            env=lowered_minimums(),
        )
        assert done.returncode == 0, done.stderr

    # The SIGSTOPped driver: its session expires, its process lives on; it is killed before
    # the next attempt runs.
    stopped = written_json(out / "frozen-1", timeout=60, what="frozen attempt 1 running")["pid"]
    os.kill(stopped, signal.SIGSTOP)
    wait_for((out / "frozen-2").exists, timeout=60, what="frozen attempt 2 running")
    assert not alive(stopped), "the next attempt ran while the stopped driver lived"
    assert json.loads((out / "frozen-2").read_text())["resumed_from"] == {"step": 1}

    # The deadlocked driver wrote heartbeats (at most one per quarter of its progress
    # timeout) for twice that timeout, and was not ended meanwhile; then none for the timeout.
    beat_path = Layout(runtime_config.base_path).heartbeat("deadlocks")
    wait_for(lambda: local.zk.exists(beat_path) is not None, timeout=60, what="a heartbeat")
    data, stat = local.zk.get(beat_path)
    beat = Heartbeat.from_znode(data, stat, beat_path)
    assert beat.attempt == 1 and beat.beats >= 1
    deadlocked = json.loads((out / "deadlocks-1").read_text())["pid"]
    resumed = written_json(
        out / "deadlocks-2", timeout=beating + progress + 60, what="deadlocks attempt 2 running"
    )
    assert not alive(deadlocked)
    assert resumed["resumed_from"] == {"step": 1}
    assert (out / "deadlocks-beaten").exists(), "ended while it still beat"

    for job in ("deadlocks", "frozen"):
        result = client.wait(job, timeout=60)
        assert (result.outcome, result.attempts) == (SUCCEEDED, 2), result.error
    log = local.daemons["d1"].log()
    assert "STUCK" in log and "made no progress" in log and "left no outcome" in log
    lowered = ", ".join(f"{k} {v:g} s" for k, v in LOWERED_MINIMUMS.lowered().items())
    assert f"WARNING recovery.daemon: {TEST_MINIMUMS_ENV} lowers product minimums" in log
    assert f"(tests only): {lowered}" in log
    wait_for(lambda: show(runtime_config, "frozen")["state"] == SUCCEEDED, timeout=30)
