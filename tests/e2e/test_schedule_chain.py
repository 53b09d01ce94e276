"""``--after-schedule``: each run waits for the other schedule's run of the same window, starts
once that run succeeded, and fails with the reason when it failed. Real daemon, installed
script; both schedules on the same windows (a seconds-field cron)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recovery.dev.localcluster import LocalCluster
from tests.cli import script, show, zkstore
from tests.helpers import wait_for
from zkstore.config import StoreConfig
from zkstore.strict import parse_time

JOBS = """
import os
import time


def mark(ctx, out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, ctx.job_id), "w") as marker:
        marker.write(str(time.time()))


def slow(ctx, out):
    time.sleep(1.5)  # the chained run must wait for this, not start with it
    mark(ctx, out)


def fail(ctx):
    raise RuntimeError("no data today")
"""
EVERY = "*/5 * * * * *"  # seconds first: every 5 s, the same windows for every schedule


def test_a_chained_run_waits_for_the_same_window_and_fails_with_it(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    config, out = runtime_config, laptop / "out"
    (laptop / "jobs.py").write_text(JOBS)
    local.start_daemon("d1")
    local.wait_for_leader()

    def create(name: str, target: str, *words: str) -> None:
        done = script(config, "schedules create", name, target, "--cron", EVERY, *words, cwd=laptop)
        assert done.returncode == 0, done.stderr

    create("extract", "jobs.py:slow", "--max-attempts", "1", "--", str(out))
    create("load", "jobs.py:mark", "--after-schedule", "extract", "--", str(out))
    create("broken", "jobs.py:fail", "--max-attempts", "1")
    create("report", "jobs.py:mark", "--after-schedule", "broken", "--", str(out))

    def loaded() -> list[Path]:
        return sorted(out.glob("load-*")) if out.exists() else []

    wait_for(loaded, timeout=60, what="a load run")
    load = loaded()[0]
    stamp = load.name.removeprefix("load-")
    extract = show(config, f"extract-{stamp}")["result"]
    assert extract is not None and extract["outcome"] == "SUCCEEDED"
    assert float(load.read_text()) >= parse_time(extract["finished"]).timestamp()

    def first_report() -> dict[str, Any] | None:
        """The first report run that ended (its window need not be the first load's: under
        load, the four schedules can be created across more than one 5-s window)."""
        done = zkstore(config, "jobs list --all --format json")
        assert done.returncode == 0, done.stderr
        ended = [j for j in json.loads(done.stdout) if j["job_id"].startswith("report-")]
        ended = [j for j in ended if j["result"] is not None]
        return min(ended, key=lambda j: str(j["job_id"])) if ended else None

    report = wait_for(first_report, timeout=60, what="a report run's result")
    window = str(report["job_id"]).removeprefix("report-")
    assert report["result"]["outcome"] == "FAILED"
    assert report["result"]["error"] == (
        f"job broken-{window} ended FAILED; this job runs only after it succeeded"
    )
    assert not list(out.glob("report-*")), "a report run never ran"
    for name in ("extract", "load", "broken", "report"):
        assert script(config, "schedules delete", name, "--yes").returncode == 0
