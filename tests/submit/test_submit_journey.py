"""The submit journey as a user types it: the installed ``zkstore`` script as a subprocess, run
from a directory of its own (not the daemon's), with what reached the job read back."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

import recovery
from recovery.dev.localcluster import LocalCluster
from recovery.shared import attemptdir
from tests import jobs
from tests.cli import local_log, read_until, script, show, start, zkstore
from tests.helpers import HANDS_SESSION, wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.records.job_states import FAILED, SUCCEEDED

#: What the job functions below record: a JSON file per call, in an absolute directory, written
#: whole (a temporary name, then a rename): the test reads it at any moment.
RECORD = """\
import json, os, sys


def record(out, name, **data):
    os.makedirs(out, exist_ok=True)
    temporary = os.path.join(out, "." + name + ".partial")
    with open(temporary, "w") as f:
        json.dump(data, f)
    os.replace(temporary, os.path.join(out, name + ".json"))
"""
#: A job that records what reached it, then waits for ``go`` in its control values.
GATED = (
    RECORD
    + """
import time


def run(ctx, out):
    record(out, "started", attempt=ctx.attempt, cwd=os.getcwd())
    deadline = time.time() + 120
    while not ctx.config.get("go"):
        if ctx.cancelled or time.time() > deadline:
            raise SystemExit(3)
        time.sleep(0.05)
    record(out, "config", values=dict(ctx.config))
    print("gated job went on", flush=True)
"""
)


def records(out: Path) -> dict[str, Any]:
    return {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}


#: The tests here share a daemon (tests/fleets.py), whose restart backoff is long enough to see.
pytestmark = [pytest.mark.e2e, pytest.mark.shared_fleet(restart_backoff=1.0, session_timeout=4.0)]


@pytest.fixture
def daemon(local: LocalCluster) -> LocalCluster:
    """``d1`` running (the shared fleet's, or the test's own for a test that disturbs it); its
    log and its drivers' are printed if the test fails (the ``local`` fixture)."""
    local.start_daemon("d1")
    return local


# -- bad input ---------------------------------------------------------------------------------


# -- following a job ---------------------------------------------------------------------------

#: The order of the states a job goes through in one attempt.
LIFECYCLE = ["SUBMITTED", "PENDING", "STARTING", "RUNNING", "ENDED"]


def progress_states(lines: list[str], job_id: str) -> list[tuple[str, int | None]]:
    """(state, attempt) of each progress line ``JOB: STATE attempt N ...`` (issue 27's words:
    ``RUNNING attempt 1 on HOST pid PID``, ``RESTARTING: attempt 2 at ...``: the next one)."""
    found = []
    for line in lines:
        match = re.match(rf"{job_id}: ([A-Z]+):?(?: attempt (\d+))?", line)
        if match and " after " not in line:
            found.append((match.group(1), int(match.group(2)) if match.group(2) else None))
    return found


def test_submit_wait_shows_what_happened_in_order(
    config: StoreConfig, laptop: Path, daemon: LocalCluster
) -> None:
    (laptop / "gated.py").write_text(GATED)
    out = laptop / "records"
    process = start(
        config, "submit", "gated.py:run", "--job-id", "ok", "--wait", "--", str(out), cwd=laptop
    )
    seen: list[str] = []
    read_until(process.stderr, "ok: RUNNING attempt 1", seen)
    assert zkstore(config, "control set", "ok", "go=true", "dotted.key=1").returncode == 0
    stdout, rest = process.communicate(timeout=120)
    seen += rest.splitlines()
    assert process.returncode == 0, seen
    assert stdout.strip() == "ok"
    assert seen[-1] == "ok: SUCCEEDED after 1 attempt(s)"
    states = progress_states(seen, "ok")
    order = [LIFECYCLE.index(state) for state, _ in states]
    assert order == sorted(order), f"states went backwards: {seen}"
    assert len(set(states)) == len(states), f"a state was shown twice: {seen}"
    assert ("RUNNING", 1) in states
    assert records(out)["config"]["values"] == {"go": True, "dotted.key": 1}


def test_failed_job_shows_its_error_and_what_it_was_after_it_finished(
    config: StoreConfig, laptop: Path, daemon: LocalCluster
) -> None:
    (laptop / "flaky.py").write_text(
        "def run(ctx, succeed):\n"
        "    print('checking the input', flush=True)\n"
        "    if succeed != 'yes':\n"
        "        raise ValueError('bad input data')\n"
    )
    failed = zkstore(
        config,
        "submit",
        "flaky.py:run",
        "--job-id",
        "ko",
        "--max-attempts",
        "2",
        "--wait",
        "--",
        "no",
        cwd=laptop,
    )
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[-1] == (
        "ko: FAILED after 2 attempt(s): ValueError: bad input data"
    )
    assert ("RESTARTING", 2) in progress_states(failed.stderr.splitlines(), "ko")
    assert any(line.startswith("ko: attempt 1 failed: ") for line in failed.stderr.splitlines())
    # --wait returns once the outcome is recorded; the job shows CLEANING until its cleanup ends.
    shown = wait_for(
        lambda: (s := show(config, "ko"))["state"] != "CLEANING" and s, timeout=60, what="cleanup"
    )
    assert (shown["state"], shown["kind"], shown["entry"]) == ("FAILED", "function", "flaky.py:run")
    assert shown["max_attempts"] == 2 and shown["submitted"]
    assert shown["error"].startswith("Traceback (most recent call last):")
    assert shown["error"].endswith("ValueError: bad input data")
    assert "checking the input" in local_log(shown["log"])
    table = zkstore(config, "jobs show", "ko").stdout.splitlines()
    assert "kind: function" in table and "max_attempts: 2" in table
    assert table[table.index("error:") + 1] == "  Traceback (most recent call last):"
    assert table[-1] == "  ValueError: bad input data"
    listed = zkstore(config, "jobs list", "--all").stdout.splitlines()
    row = next(line for line in listed if line.startswith("ko "))
    assert row.endswith("ValueError: bad input data")


def test_submit_wait_tells_a_timed_out_attempt_as_ended_not_lost(
    config: StoreConfig, laptop: Path, daemon: LocalCluster
) -> None:
    """Issue 49.4: on a timeout ``submit --wait`` first said the driver was "gone without an
    outcome; the leader will count it as lost", then "attempt 1 failed: TIMED_OUT". It says
    what is known: the leader ended it, and why."""
    (laptop / "slow.py").write_text(
        "import time\n\n\ndef run(ctx):\n    while True:\n        time.sleep(0.1)\n"
    )
    done = script(
        config,
        "submit",
        *("slow.py:run", "--job-id", "slow", "--timeout", "2s"),
        *("--max-attempts", "1", "--wait", "--wait-timeout", "2m"),
        cwd=laptop,
    )
    lines = done.stderr.splitlines()
    assert done.returncode == 1, lines
    assert lines[-1].startswith("slow: FAILED after 1 attempt(s)") and "TIMED_OUT" in lines[-1]
    assert not [line for line in lines if "lost" in line], lines
    gone = [line for line in lines if "attempt 1: its driver" in line]
    assert all("was ended by the leader (TIMED_OUT" in line for line in gone), lines


def test_jobs_wait_reattaches_with_the_exit_codes_of_submit_wait(
    config: StoreConfig, laptop: Path, daemon: LocalCluster
) -> None:
    (laptop / "gated.py").write_text(GATED)
    (laptop / "fail.py").write_text("def run(ctx):\n    raise RuntimeError('no')\n")
    out = str(laptop / "records")
    assert zkstore(config, "jobs wait", "never-submitted").returncode == 4
    submitted = zkstore(
        config, "submit", "gated.py:run", "--job-id", "g", "--", out, cwd=laptop
    ).returncode
    assert submitted == 0
    timed_out = zkstore(config, "jobs wait", "g", "--wait-timeout", "1s")
    assert timed_out.returncode == 7, timed_out.stderr
    assert "did not finish within 1 s" in timed_out.stderr
    follower = start(config, "jobs wait", "g", cwd=laptop)
    wait_for((Path(out) / "started.json").exists, timeout=60, what="gated job running")
    cancel = zkstore(config, "jobs cancel", "g", "--reason", "wrong input")
    assert cancel.returncode == 0, cancel.stderr
    _, stderr = follower.communicate(timeout=120)
    assert follower.returncode == 3, stderr
    assert stderr.splitlines()[-1] == "g: CANCELLED after 1 attempt(s)"
    cancelled = show(config, "g")
    assert cancelled["cancel"]["reason"] == "wrong input" and "@" in cancelled["cancel"]["by"]
    assert zkstore(config, "jobs wait", "g").returncode == 3, "a finished job: at once"
    assert zkstore(config, "submit", "fail.py:run", "--job-id", "f", cwd=laptop).returncode == 0
    assert zkstore(config, "jobs wait", "f").returncode == 1
    queued = zkstore(config, "submit", "gated.py:run", "--job-id", "q", "--", out, cwd=laptop)
    assert queued.returncode == 0
    with Cluster.open(config) as cluster:
        cluster.quarantine.move_in("q", "operator says so")
    quarantined = zkstore(config, "jobs wait", "q")
    assert quarantined.returncode == 5 and "quarantined" in quarantined.stderr


def test_submit_wait_says_when_no_leader_is_up_and_keeps_waiting(
    config: StoreConfig, laptop: Path, tmp_path: Path
) -> None:
    (laptop / "quick.py").write_text("def run(ctx):\n    pass\n")
    process = start(config, "submit", "quick.py:run", "--job-id", "early", "--wait", cwd=laptop)
    seen: list[str] = []
    read_until(process.stderr, "no leader is up", seen)
    local = LocalCluster(config, tmp_path / "runtime")
    try:
        local.start_daemon("late")
        _, rest = process.communicate(timeout=120)
    finally:
        local.stop()
    seen += rest.splitlines()
    assert process.returncode == 0, seen
    assert "early: daemon late on" in "\n".join(seen)
    assert seen[-1] == "early: SUCCEEDED after 1 attempt(s)"


def test_exit_codes_say_what_kind_of_failure(
    config: StoreConfig, tmp_path: Path, daemon: LocalCluster
) -> None:
    for command in ("jobs show", "jobs cancel", "checkpoints list", "control get", "control set"):
        missing = zkstore(config, command, "nosuch", *(["a=1"] if "set" in command else []))
        assert missing.returncode == 4, (command, missing.stderr)
        assert "nosuch" in missing.stderr
    with recovery.Client(config.with_changes(session_timeout=HANDS_SESSION)) as client:
        client.wait(client.submit_function(jobs.sleeper, str(tmp_path), 0, job_id="done"))
    finished = zkstore(config, "jobs cancel", "done")
    assert finished.returncode == 5 and "already finished (SUCCEEDED)" in finished.stderr
    late_control = zkstore(config, "control set", "done", "a=1")
    assert late_control.returncode == 5 and "not current" in late_control.stderr
    assert zkstore(config, "jobs show", "bad/id").returncode == 2


# -- what the job takes along ------------------------------------------------------------------


def test_function_job_imports_modules_beside_it_from_any_directory(
    config: StoreConfig, laptop: Path, tmp_path: Path, daemon: LocalCluster
) -> None:
    project = tmp_path / "project"
    (project / "shapes").mkdir(parents=True)
    (project / "shapes" / "__init__.py").write_text("from shapes.area import square\n")
    (project / "shapes" / "area.py").write_text("def square(x):\n    return x * x\n")
    (project / "shapes" / "unit.txt").write_text("cm2")
    (project / "helpers.py").write_text("import shapes\nGREETING = 'hello from helpers'\n")
    (project / "job.py").write_text(
        RECORD + "import importlib.resources\nimport helpers\n\n\ndef run(ctx, out):\n"
        "    import shapes\n"
        "    unit = importlib.resources.files(shapes).joinpath('unit.txt').read_text()\n"
        "    record(out, 'ran', greeting=helpers.GREETING, area=shapes.square(4), unit=unit,\n"
        "           cwd=os.getcwd(), files=sorted(os.listdir('.')))\n"
    )
    out = tmp_path / "out"
    done = zkstore(config, "submit", "../project/job.py:run", "--wait", "--", str(out), cwd=laptop)
    assert done.returncode == 0, done.stderr
    ran = records(out)["ran"]
    assert (ran["greeting"], ran["area"], ran["unit"]) == ("hello from helpers", 16, "cm2")
    assert ran["files"] == ["zkstore-modules.zip"]
    assert Path(ran["cwd"]).parent == daemon.work_dir / "attempts"
    assert not Path(ran["cwd"]).exists(), "an attempt's directory goes with it"


def test_script_imports_a_module_beside_it_and_reads_a_shipped_file(
    config: StoreConfig, laptop: Path, tmp_path: Path, daemon: LocalCluster
) -> None:
    (laptop / "lookup.py").write_text("def upper(text):\n    return text.upper()\n")
    (laptop / "words.txt").write_text("shipped words\n")
    (laptop / "report.py").write_text(
        "import json, os, sys\nimport lookup\n\n"
        "if __name__ == '__main__':\n"
        "    source, target = sys.argv[1], sys.argv[2]\n"
        "    with open(source) as f:\n"
        "        text = lookup.upper(f.read().strip())\n"
        "    with open(target, 'w') as f:\n"
        "        json.dump({'text': text, 'file': __file__, 'cwd': os.getcwd()}, f)\n"
    )
    target = tmp_path / "report.json"
    done = zkstore(
        config,
        "submit",
        "report.py",
        "--files",
        "words.txt",
        "--wait",
        "--",
        "words.txt",
        str(target),
        cwd=laptop,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(target.read_text())
    assert report["text"] == "SHIPPED WORDS"
    assert report["file"] == str(Path(report["cwd"]) / "report.py")
    assert Path(report["cwd"]) != laptop


def test_py_files_are_importable_at_submit_and_in_the_driver(
    config: StoreConfig, laptop: Path, tmp_path: Path, daemon: LocalCluster
) -> None:
    libs = tmp_path / "libs"
    libs.mkdir()
    with zipfile.ZipFile(libs / "deps.zip", "w") as archive:
        archive.writestr("zipped/__init__.py", "NAME = 'from the zip'\n")
    (libs / "single.py").write_text("NAME = 'from a .py'\n")
    (laptop / "job.py").write_text(
        RECORD + "import zipped\nimport single\n\n\ndef run(ctx, out):\n"
        "    record(out, 'ran', names=[zipped.NAME, single.NAME])\n"
    )
    out = tmp_path / "out"
    without = zkstore(config, "submit", "job.py:run", "--", str(out), cwd=laptop)
    assert without.returncode == 2 and "No module named 'zipped'" in without.stderr
    done = zkstore(
        config,
        "submit",
        "job.py:run",
        "--py-files",
        f"{libs / 'deps.zip'},{libs / 'single.py'}",
        "--wait",
        "--",
        str(out),
        cwd=laptop,
    )
    assert done.returncode == 0, done.stderr
    assert records(out)["ran"]["names"] == ["from the zip", "from a .py"]
    assert "zipped" not in sys.modules and str(libs) not in sys.path


def test_a_module_that_cannot_be_found_quarantines_the_job_with_the_reason(
    config: StoreConfig, laptop: Path, tmp_path: Path, daemon: LocalCluster
) -> None:
    (laptop / "hidden.py").write_text("VALUE = 1\n")
    (laptop / "job.py").write_text(
        "import importlib\nhidden = importlib.import_module('hid' + 'den')\n\n\n"
        "def run(ctx):\n    return hidden.VALUE\n"
    )
    done = zkstore(config, "submit", "job.py:run", "--job-id", "dyn", "--wait", cwd=laptop)
    assert done.returncode == 5
    assert "No module named 'hidden'" in done.stderr
    assert "No module named 'hidden'" in show(config, "dyn")["error"]


def test_python_api_submit_and_wait(
    config: StoreConfig, tmp_path: Path, daemon: LocalCluster
) -> None:
    result = recovery.submit(
        jobs.steps, str(tmp_path / "out"), 2, 0.01, wait=True, config=config, job_id="api"
    )
    assert not isinstance(result, str) and result.outcome == SUCCEEDED
    with recovery.Client(config.with_changes(session_timeout=HANDS_SESSION)) as client:
        job_id = client.submit_function(jobs.flaky, str(tmp_path / "f"), 5, max_attempts=1)
        assert client.wait(job_id, timeout=120).outcome == FAILED
        with pytest.raises(recovery.JobNotFound):
            client.status("never-submitted")


# -- what an attempt leaves behind -------------------------------------------------------------


@pytest.mark.disturbs
def test_a_killed_drivers_directory_is_removed_by_its_daemon(
    config: StoreConfig, laptop: Path, tmp_path: Path, daemon: LocalCluster
) -> None:
    (laptop / "gated.py").write_text(GATED)
    (laptop / "data.csv").write_text("1,2\n")
    out = tmp_path / "records"
    submitted = zkstore(
        config,
        "submit",
        "gated.py:run",
        "--job-id",
        "killed",
        "--max-attempts",
        "1",
        "--files",
        "data.csv",
        "--",
        str(out),
        cwd=laptop,
    )
    assert submitted.returncode == 0, submitted.stderr
    started = wait_for(lambda: records(out).get("started"), timeout=60, what="job started")
    attempt_dir = Path(started["cwd"])
    assert sorted(p.name for p in attempt_dir.iterdir()) == ["data.csv"]
    pid = daemon.driver_pid("killed")
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not attempt_dir.exists(), timeout=60, what="attempt directory removed")
    assert not attemptdir.scratch(attempt_dir).exists(), "Spark's scratch beside it too"
    # The lost attempt is placed again (a kill is not the job's failure): stop it there.
    assert zkstore(config, "jobs cancel", "killed").returncode == 0
    assert zkstore(config, "jobs wait", "killed").returncode == 3


def test_a_job_that_seeds_random_draws_the_same_numbers_whatever_its_session_did(
    config: StoreConfig, tmp_path: Path, laptop: Path, daemon: LocalCluster
) -> None:
    """A script seeds Python's global ``random`` and draws after its driver's session has pinged
    ZooKeeper a few times (kazoo pings at a third of the session timeout): the numbers are the
    seed's, as on a laptop (kazoo and zkstore's retries draw their jitter elsewhere)."""
    (laptop / "seeded.py").write_text(
        RECORD + "import random, threading\n\n\ndef run(ctx, out, seconds):\n"
        "    random.seed(42)\n"
        "    threading.Event().wait(float(seconds))  # the driver's session pings meanwhile\n"
        "    record(out, 'drawn', numbers=[random.random() for _ in range(3)])\n"
    )
    out = tmp_path / "out"
    seconds = str(config.session_timeout)
    done = zkstore(config, "submit", "seeded.py:run", "--wait", "--", str(out), seconds, cwd=laptop)
    assert done.returncode == 0, done.stderr
    seeded = random.Random(42)
    assert records(out)["drawn"]["numbers"] == [seeded.random() for _ in range(3)]
