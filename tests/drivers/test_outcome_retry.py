"""A driver's outcome is retried until it is recorded or fenced out, never dropped silently.

Each test places attempt 1 of a job as the leader would (its status STARTING, on a daemon that
is gone), runs that attempt's real driver in a child process (:mod:`tests.lossy_driver`) whose
outcome writes meet injected faults at their crash points, then starts a daemon: a SUCCEEDED
attempt whose outcome was recorded is finished as it is, never run again; one whose outcome
could not be recorded is a lost attempt, and the driver's log says why at ERROR.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.helpers import REPO
from zkstore.config import StoreConfig
from zkstore.records.job_records import JobStatus, Outcome
from zkstore.records.job_states import FAILED, STARTING, SUCCEEDED
from zkstore.records.strict import parse_time, utc_now

pytestmark = pytest.mark.e2e

JOB = "lossy"


def place_attempt_1(client: Client, out: Path) -> int:
    """Submit the job and place its first attempt as a leader would; the status version."""
    client.submit_function(jobs.flaky, str(out), 1, job_id=JOB)
    status = JobStatus(
        version=None, state=STARTING, attempt=1, updated=parse_time(utc_now()), daemon_id="gone"
    )
    client.cluster.zk.create(client.cluster.layout.status(JOB), status.to_bytes(), makepath=True)
    return 0


def run_driver(
    config: StoreConfig, tmp_path: Path, **spec: Any
) -> subprocess.CompletedProcess[str]:
    full = {
        "config": config.to_json(),
        "job": JOB,
        "attempt": 1,
        "status_version": 0,
        "work_dir": str(tmp_path / "attempt-1"),
        **spec,
    }
    return subprocess.run(
        [sys.executable, "-m", "tests.lossy_driver", json.dumps(full)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def runs(out: Path) -> list[str]:
    return sorted(jobs.read_marks(str(out)))


def test_outcome_whose_writes_are_lost_five_times_is_recorded_and_not_run_again(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """The transaction is lost on the way five times (three used to be the end of it: no
    outcome, no log line, and the succeeded attempt ran again as a lost one)."""
    out = tmp_path / "out"
    place_attempt_1(client, out)
    driver = run_driver(runtime_config, tmp_path, faults={"outcome:writing": 5})
    local.start_daemon("d1")
    result = client.wait(JOB, timeout=60)
    assert runs(out) == ["attempt-1"], "the succeeded attempt never ran again"
    assert (result.outcome, result.attempts) == (SUCCEEDED, 1)
    assert driver.returncode == 0, driver.stderr[-3000:]
    assert driver.stderr.count("injected: the answer at outcome:writing is lost") == 5
    assert f"attempt 1 of {JOB}: SUCCEEDED" in driver.stderr, driver.stderr[-3000:]


def test_an_applied_write_whose_answer_and_read_back_are_lost_counts_as_recorded(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """The transaction landed, its answer was lost, reading back failed three times: the
    next tries find ``running`` gone (the fence) and the outcome there, which is the driver's
    own: recorded, and no ERROR line claims otherwise."""
    out = tmp_path / "out"
    place_attempt_1(client, out)
    driver = run_driver(
        runtime_config,
        tmp_path,
        faults={"outcome:written": 1, "outcome:reading-back": 3},
    )
    assert driver.returncode == 0, driver.stderr[-3000:]
    assert f"attempt 1 of {JOB}: SUCCEEDED" in driver.stderr, driver.stderr[-3000:]
    assert " ERROR " not in driver.stderr, driver.stderr[-3000:]
    local.start_daemon("d1")
    result = client.wait(JOB, timeout=60)
    assert (result.outcome, result.attempts) == (SUCCEEDED, 1)
    assert runs(out) == ["attempt-1"]


def test_a_superseded_attempt_stops_retrying_with_an_error_line(
    client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """The answer is lost, and meanwhile the leader placed the next attempt: the retry meets
    the fence and stops at once, saying so at ERROR; nothing of attempt 1 is written."""
    out = tmp_path / "out"
    place_attempt_1(client, out)
    driver = run_driver(
        runtime_config,
        tmp_path,
        faults={"outcome:writing": 1},
        supersede_at="outcome:writing",
    )
    errors = [line for line in driver.stderr.splitlines() if " ERROR " in line]
    assert any(
        "outcome SUCCEEDED of attempt 1 not recorded: the attempt no longer owns the job" in line
        for line in errors
    ), driver.stderr[-3000:]
    assert client.cluster.state.outcome(JOB) is None


def test_an_outcome_that_cannot_be_written_within_the_lease_is_given_up_at_error(
    client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """Every connection cut for good just before the write: the driver keeps trying while
    its session lease lasts, then stops, saying so at ERROR, well before its session could
    expire (the next attempt may start then)."""
    out = tmp_path / "out"
    place_attempt_1(client, out)
    driver = run_driver(runtime_config, tmp_path, cut_at="outcome:writing")
    lines = driver.stderr.splitlines()
    (cut,) = [line for line in lines if "cutting every connection" in line]
    errors = [line for line in lines if " ERROR " in line]
    assert len(errors) == 1, driver.stderr[-3000:]
    assert (
        "outcome SUCCEEDED of attempt 1 not recorded within the attempt's session lease"
        in errors[0]
    )
    assert f"attempt 1 of {JOB}: SUCCEEDED" not in driver.stderr
    given_up = logged_at(errors[0]) - logged_at(cut)
    assert given_up < runtime_config.session_timeout, "gone before its session could expire"
    assert runs(out) == ["attempt-1"]


def logged_at(line: str) -> float:
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def test_a_first_attempts_outcome_over_one_already_there_is_set_not_dropped(
    client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """A first attempt creates its outcome without looking for one first (a request saved
    on every job); if one is there all the same (a stray write of an earlier life of the id),
    the create is refused, read back, and the next try sets it: recorded, not dropped."""
    out = tmp_path / "out"
    place_attempt_1(client, out)
    stray = Outcome(
        version=None, attempt=1, outcome=FAILED, finished=parse_time(utc_now()), error="stray"
    )
    client.cluster.zk.create(client.cluster.layout.outcome(JOB), stray.to_bytes())
    driver = run_driver(runtime_config, tmp_path)
    assert driver.returncode == 0, driver.stderr[-3000:]
    recorded = client.cluster.state.outcome(JOB)
    assert recorded is not None and (recorded.attempt, recorded.outcome) == (1, SUCCEEDED)
    assert " ERROR " not in driver.stderr, driver.stderr[-3000:]
