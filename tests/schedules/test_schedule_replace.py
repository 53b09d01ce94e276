"""``--concurrency replace`` with a real daemon: the window after a run that still lives asks
that run to stop, and the new run starts only once the old one has ended (its ``after:
<previous>:ENDED`` is the leader's dependency gate): never two runs of the schedule at once.

The run asked to stop never looks at its context and sleeps through the cancel's interrupt, so
its driver lives until the daemon's ``--cancel-grace`` (12 s here) has passed, over several
windows (every 4 s): the run of the next window waits, the window after replaces that one
(cancelled before it started), and the newest run must still wait for the first one's driver,
not only for the run it replaced. Before the fix it started beside that driver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import local_log, script, show, zkstore
from tests.helpers import wait_for
from zkstore.config import StoreConfig
from zkstore.records.strict import parse_time

pytestmark = pytest.mark.e2e

LONG = """
import os
import time


def run(ctx, out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, ctx.job_id), "w") as marker:
        marker.write(str(time.time()))
    # Never looks at its context and sleeps through the cancel's interrupt: a cancel ends it
    # only after the driver's grace.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            time.sleep(deadline - time.monotonic())
        except KeyboardInterrupt:
            pass
"""


def test_replace_cancels_the_live_run_and_starts_the_next_once_it_ended(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    config, out = runtime_config, laptop / "out"
    (laptop / "long.py").write_text(LONG)
    local.extra_args = ("--cancel-grace", "12s")
    local.start_daemon("d1")
    local.wait_for_leader()
    created = script(
        config,
        "schedules create",
        "swap",
        "long.py:run",
        str(out),
        "--every",
        "4s",
        "--concurrency",
        "replace",
        cwd=laptop,
    )
    assert created.returncode == 0, created.stderr

    def started() -> list[Path]:
        return sorted(out.glob("swap-*")) if out.exists() else []

    wait_for(lambda: len(started()) >= 2, timeout=90, what="two runs started")
    first, second = started()[:2]
    ended = show(config, first.name)["result"]
    assert ended is not None, "the first run ended before the second started"
    assert ended["outcome"] == "CANCELLED"
    log = local_log(show(config, first.name)["log"])
    assert f"job {first.name} ignored the cancel for 12 s: stopping it" in log, log[-2000:]
    assert float(second.read_text()) >= parse_time(ended["finished"]).timestamp()
    history = json.loads(script(config, "schedules show", "swap", "--format", "json").stdout)
    fired = [h["job"] for h in reversed(history["history"])]
    assert fired.index(first.name) < fired.index(second.name)

    assert zkstore(config, "schedules delete", "swap", "--yes").returncode == 0
    for run in started():
        zkstore(config, "jobs cancel", run.name)
