"""``--after-schedule``: each run waits for the other schedule's run of the same window, starts
once that run succeeded, and fails with the reason when it failed. Real daemon, installed
script; both schedules on the same windows (a seconds-field cron)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import script, show, zkstore
from tests.helpers import wait_for
from zkstore.config import StoreConfig
from zkstore.records.strict import parse_time

pytestmark = [pytest.mark.e2e, pytest.mark.shared_fleet]

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


def test_submit_after_a_run_not_made_yet_waits_for_its_window(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    """Issue 49: ``submit --after NAME-<stamp>`` of a run its schedule makes later (the README's
    tour) waited for nothing: it failed at once, "no job". Now it waits for the window, then
    runs once the run succeeded; a plain unknown id still fails at once."""
    from datetime import UTC, datetime, timedelta

    config, out = runtime_config, laptop / "out"
    (laptop / "jobs.py").write_text(JOBS)
    local.start_daemon("d1")
    local.wait_for_leader()
    done = script(
        config,
        "schedules create",
        "daily",
        "jobs.py:mark",
        "--cron",
        EVERY,
        "--",
        str(out),
        cwd=laptop,
    )
    assert done.returncode == 0, done.stderr
    now = datetime.now(UTC)
    window = (now + timedelta(seconds=15 - now.second % 5)).replace(microsecond=0)
    run = f"daily-{window.strftime('%Y%m%dT%H%M%SZ')}"
    after = script(
        config,
        "submit",
        "jobs.py:mark",
        "--job-id",
        "after-run",
        "--after",
        run,
        "--",
        str(out),
        cwd=laptop,
    )
    assert after.returncode == 0, after.stderr
    # A time that is none of a schedule's windows: its run is never made, said at once (it
    # waited for the schedule's next window after that time to be decided: a day here).
    nightly = script(
        config,
        *("schedules create", "nightly", "jobs.py:mark", "--cron", "0 2 * * *", "--", str(out)),
        cwd=laptop,
    )
    assert nightly.returncode == 0, nightly.stderr
    off = f"nightly-{(now + timedelta(days=1)).strftime('%Y%m%d')}T013000Z"
    never = script(
        config,
        *("submit", "jobs.py:mark", "--job-id", "never", "--after", off, "--", str(out)),
        cwd=laptop,
    )
    assert never.returncode == 0, never.stderr
    failed = wait_for(lambda: show(config, "never")["result"], timeout=30, what="its failure")
    assert failed["outcome"] == "FAILED"
    assert failed["error"] == (
        f"schedule nightly has no window at {off[8:12]}-{off[12:14]}-{off[14:16]}T01:30:00Z: "
        f"its run job {off} is never made (zkstore schedules show nightly says when it fires)"
    ), failed
    waiting = wait_for(lambda: show(config, "after-run")["waiting"], timeout=30, what="waiting")
    assert waiting.startswith("waiting for schedule daily to fire its window"), waiting
    ran = wait_for(lambda: show(config, "after-run")["result"], timeout=90, what="its result")
    assert ran["outcome"] == "SUCCEEDED"
    assert (out / run).exists() and (out / "after-run").exists()
    ghost = script(
        config,
        "submit",
        "jobs.py:mark",
        "--job-id",
        "ghost-after",
        "--after",
        "nothing-1",
        "--",
        str(out),
        cwd=laptop,
    )
    assert ghost.returncode == 0
    failed = wait_for(lambda: show(config, "ghost-after")["result"], timeout=30, what="failed")
    assert failed["outcome"] == "FAILED" and "no job nothing-1" in failed["error"]
    for name in ("daily", "nightly"):
        assert script(config, "schedules delete", name, "--yes").returncode == 0
