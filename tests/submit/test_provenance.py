"""Which code ran (issue 49.6), as a user finds out with the installed ``zkstore`` script and the
job page: each attempt names the definition it was placed with (its SHA-256 and what it runs),
and says when that changed (``jobs resume --definition``); a scheduled run names its schedule
and window; a job's traceback names the job's own file and line.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import script, show
from tests.helpers import SESSION_TIMEOUT, wait_for
from tests.schedule_jobs import job_file
from zkstore.config import StoreConfig
from zkstore.records.job_states import STOPPED, SUCCEEDED
from zkstore.schedules.runs import window_of

#: the end of a stopped attempt's driver (``--end-grace``) and a leader's look at it
END_GRACE = 5.0
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.shared_fleet(http=True, args=("--end-grace", f"{END_GRACE:g}s")),
]

V1 = """\
import time


def run(ctx, out):
    open(out, "a").write(f"v1 attempt {ctx.attempt}\\n")
    while True:  # until it is stopped
        time.sleep(0.1)
"""
V2 = """\
def run(ctx, out):
    open(out, "a").write(f"v2 attempt {ctx.attempt}\\n")
"""
BROKEN = """\
def helper(day):
    raise ValueError(f"no data for day {day}")


def run(ctx):
    helper(3)
"""
HEX = re.compile(r"[0-9a-f]{64}")


def page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        text: str = answer.read().decode()
        return text


def test_each_attempt_names_the_definition_it_ran(
    local: LocalCluster, runtime_config: StoreConfig, tmp_path: Path, laptop: Path
) -> None:
    config, out = runtime_config, tmp_path / "ran.txt"
    (laptop / "v1").mkdir()
    (laptop / "v2").mkdir()
    (laptop / "v1" / "job.py").write_text(V1)
    (laptop / "v2" / "job.py").write_text(V2)
    (laptop / "broken.py").write_text(BROKEN)
    daemon = local.start_daemon("d1")
    local.wait_for_leader(timeout=SESSION_TIMEOUT * 4 + 30)
    made = script(config, "submit", "v1/job.py:run", "--job-id", "etl", "--", str(out), cwd=laptop)
    assert made.returncode == 0, made.stderr
    wait_for(out.exists, timeout=120, what="attempt 1 running")
    stopped = script(config, "jobs stop", "etl", "--checkpoint-timeout", f"{END_GRACE * 4 + 30:g}s")
    assert stopped.returncode == 0, stopped.stderr
    assert show(config, "etl")["state"] == STOPPED
    resumed = script(config, "jobs resume", "etl", "--definition", "v2/job.py:run", cwd=laptop)
    assert resumed.returncode == 0, resumed.stderr
    waited = script(config, "jobs wait", "etl", timeout=300)
    assert waited.returncode == 0, waited.stderr
    assert out.read_text().splitlines() == ["v1 attempt 1", "v2 attempt 2"]

    # cleaned up: the history is read from its copy beside the logs
    shown = wait_for(
        lambda: (found := show(config, "etl"))["state"] == SUCCEEDED and found,
        timeout=60,
        what="etl cleaned up",
    )
    first, second = shown["attempts"]
    assert (first["attempt"], first["outcome"]) == (1, "STOPPED")
    assert (second["attempt"], second["outcome"]) == (2, "SUCCEEDED")
    assert HEX.fullmatch(first["definition"]) and HEX.fullmatch(second["definition"])
    assert first["definition"] != second["definition"]
    assert first["target"] == f"{(laptop / 'v1' / 'job.py').resolve()}:run"
    assert second["target"] == f"{(laptop / 'v2' / 'job.py').resolve()}:run"
    assert (first["new_definition"], second["new_definition"]) == (False, True)
    text = script(config, "jobs show", "etl")
    assert text.returncode == 0, text.stderr
    assert (
        f"  2 SUCCEEDED on d1, placed {second['placed']}, ended {second['ended']}, "
        f"definition {second['definition'][:12]} from {second['target']}, new since the "
        "attempt before"
    ) in text.stdout
    assert daemon.url is not None
    html = page(f"{daemon.url}/jobs/etl")
    assert second["definition"][:12] in html and "new definition" in html

    # A failing job's error: the job's own file and line, not the driver's or a stand-in.
    failed = script(
        config, "submit", "broken.py:run", "--job-id", "broken", "--max-attempts", "1",
        "--wait", cwd=laptop, timeout=300,
    )  # fmt: skip
    assert failed.returncode != 0
    error = show(config, "broken")["error"]
    source = str((laptop / "broken.py").resolve())
    assert f'File "{source}", line 6, in run' in error, error
    assert f'File "{source}", line 2, in helper' in error, error
    assert "ValueError: no data for day 3" in error
    assert "recovery/driver" not in error and "<dynamic" not in error


def test_a_scheduled_run_names_its_schedule_and_window(
    local: LocalCluster, runtime_config: StoreConfig, tmp_path: Path, laptop: Path
) -> None:
    config = runtime_config
    daemon = local.start_daemon("d1")
    local.wait_for_leader(timeout=SESSION_TIMEOUT * 4 + 30)
    job = job_file(laptop)
    made = script(
        config, "schedules create", "tick", f"{job}:run", str(tmp_path / "runs"),
        "--every", "2s",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr

    def a_run() -> str | None:
        listed = script(config, "jobs list", "--all", "--format", "json")
        runs = [j["job_id"] for j in json.loads(listed.stdout) if j["job_id"] != "tick"]
        return next((r for r in runs if window_of("tick", r) is not None), None)

    run = wait_for(a_run, timeout=2 * 2 + SESSION_TIMEOUT * 4 + 30, what="a run")
    assert run is not None
    window = window_of("tick", run)
    assert window is not None
    stamp = window.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert show(config, run)["schedule"] == {"name": "tick", "window": stamp}
    text = script(config, "jobs show", run)
    assert f"schedule: run of tick for its window {stamp}" in text.stdout, text.stdout
    assert daemon.url is not None
    html = page(f"{daemon.url}/jobs/{run}")
    assert 'run of <a href="/api/v1/schedules/tick">tick</a> for its window' in html
    assert script(config, "schedules delete", "tick", "--yes").returncode == 0
