"""``zkstore jobs resume`` and ``zkstore submit`` with lifecycle options, through the installed
script against the real ZooKeeper: what the handle carries for the leader, options
changed and limits turned off at resume, and the errors a user meets."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.cli import script
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.runspec import RunSpec
from zkstore.lifecycle.stopstore import StopStore
from zkstore.records.job_records import JobStatus
from zkstore.records.job_states import STOPPED
from zkstore.records.strict import parse_time, time_text, utc_now

pytestmark = pytest.mark.integration

JOB_FILE = "def run(ctx, day):\n    return None\n"


def test_submit_options_travel_in_the_handle_and_resume_changes_them(
    config: StoreConfig, cluster: Cluster, tmp_path: Path
) -> None:
    (tmp_path / "job.py").write_text(JOB_FILE)
    done = script(
        config,
        "submit",
        "job.py:run",
        "--job-id",
        "j",
        "--timeout",
        "2h",
        "--progress-timeout",
        "10m",
        "--retry-delay",
        "30s",
        "--notify",
        "https://hooks.example.com/T/SECRET",
        "--",
        "2026-11-21",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    # the run options as the leader reads them (the handle's typed run field)
    run = RunSpec.from_summary(cluster.jobs.handles.get("j", lock=False).handle.summary)
    lifecycle = run.lifecycle
    assert (lifecycle.timeout, lifecycle.progress_timeout, lifecycle.retry_delay) == (
        7200,
        600,
        30,
    )
    assert lifecycle.notify == "https://hooks.example.com/T/SECRET"

    # Not stopped: resume says so (exit 5) and changes nothing.
    refused = script(config, "jobs resume", "j", "--timeout", "off")
    assert refused.returncode == 5 and "not STOPPED" in refused.stderr

    status = JobStatus(version=None, state=STOPPED, attempt=1, updated=parse_time(utc_now()))
    cluster.zk.ensure_path(cluster.layout.job_dir("j"))
    cluster.zk.create(cluster.layout.status("j"), status.to_bytes())
    StopStore(cluster).request("j")
    resumed = script(config, "jobs resume", "j", "--timeout", "off", "--retry-delay", "1m")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == (
        "job j resumes with its new options, from the start (it has no checkpoint)"
    ), "issue 49: no new definition was given, only options"
    summary = cluster.jobs.handles.get("j", lock=False).handle.summary
    lifecycle = RunSpec.from_summary(summary).lifecycle
    assert lifecycle.timeout is None and lifecycle.retry_delay == 60
    assert lifecycle.progress_timeout == 600, "what was not given is kept"
    definition = cluster.jobs.recover("j", lock=False).state
    assert definition.load_function()[1] == ("2026-11-21",), "its arguments kept"
    assert cluster.zk.exists(cluster.layout.stop("j")) is None


def test_submit_refuses_a_bad_lifecycle_option(config: StoreConfig, tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB_FILE)
    for words, says in (
        (("--progress-timeout", "5s"), "at least 30"),
        (("--notify", "ftp://x"), "http"),
        (("--retry-delay", "10m", "--retry-max-delay", "1m"), "max"),
    ):
        done = script(config, "submit", "job.py:run", *words, "--", "x", cwd=tmp_path)
        assert done.returncode == 2 and says in done.stderr, (words, done.stderr)


def test_resumes_edges_say_what_is_so(
    config: StoreConfig, cluster: Cluster, tmp_path: Path
) -> None:
    """Issue 49: resume --definition of a finished job exits 5 saying it finished (it exited
    4 with a raw ZooKeeper path); a second resume of a job that was resumed and runs again
    says so and exits 0 (running it again finishes, as the docs say), where it said "stop it
    first"; a second jobs stop does not repeat "a checkpoint is asked for"."""
    from zkstore.jobs import history
    from zkstore.jobs.history import JobHistory

    (tmp_path / "job.py").write_text(JOB_FILE)
    assert (
        script(config, "submit", "job.py:run", "--job-id", "f", "--", "d", cwd=tmp_path).returncode
        == 0
    )
    cluster.results.create_dirty("f", "SUCCEEDED", attempts=1)
    finished = script(config, "jobs resume", "f", "--definition", "job.py:run", cwd=tmp_path)
    assert finished.returncode == 5, finished.stderr
    assert "already finished" in finished.stderr and "/currentJobs" not in finished.stderr

    assert (
        script(config, "submit", "job.py:run", "--job-id", "r", "--", "d", cwd=tmp_path).returncode
        == 0
    )
    cluster.zk.ensure_path(cluster.layout.job_dir("r"))
    running = JobStatus(version=None, state="STARTING", attempt=2, updated=parse_time(utc_now()))
    cluster.zk.create(cluster.layout.status("r"), running.to_bytes())
    told = JobHistory(
        version=None,
        attempts={
            "1": {"daemon": "d1", "placed": utc_now(), "outcome": STOPPED, "ended": utc_now()}
        },
    )
    cluster.zk.create(cluster.layout.history("r"), told.to_bytes())
    again = script(config, "jobs resume", "r")
    assert (again.returncode, again.stdout.strip()) == (
        0,
        "job r was resumed already: its next attempt is placed",
    ), again.stderr
    changed = script(config, "jobs resume", "r", "--timeout", "5m")
    assert changed.returncode == 5 and "was resumed already" in changed.stderr
    assert history.read(cluster.zk, cluster.layout.history("r"), JobHistory) is not None

    first = script(config, "jobs stop", "r", "--checkpoint", "--no-wait")
    assert "a checkpoint is asked for" in first.stderr, first.stderr
    second = script(config, "jobs stop", "r", "--checkpoint", "--no-wait")
    made = cluster.zk.get(cluster.layout.stop("r"))[1].ctime / 1000
    dated = time_text(datetime.fromtimestamp(made, UTC))  # ZooKeeper's date, as text
    assert f"a stop was requested already, at {dated} by " in second.stderr, second.stderr
    assert "a checkpoint is asked for" not in second.stderr


def test_a_resumed_job_keeps_what_it_runs_after(
    config: StoreConfig, cluster: Cluster, tmp_path: Path
) -> None:
    """New options or new code given to a stopped job replace its definition, not what is the
    job's own: the jobs it ran after stay in its run options (they were dropped: the handle was
    rewritten from the definition alone)."""
    (tmp_path / "job.py").write_text(JOB_FILE)
    for words in (("--job-id", "up"), ("--job-id", "j", "--after", "up", "--timeout", "1h")):
        done = script(config, "submit", "job.py:run", *words, "--", "d", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    before = RunSpec.from_summary(cluster.jobs.handles.get("j", lock=False).handle.summary)
    assert [str(d) for d in before.after] == ["up:SUCCEEDED"]

    status = JobStatus(version=None, state=STOPPED, attempt=1, updated=parse_time(utc_now()))
    cluster.zk.ensure_path(cluster.layout.job_dir("j"))
    cluster.zk.create(cluster.layout.status("j"), status.to_bytes())
    StopStore(cluster).request("j")
    resumed = script(config, "jobs resume", "j", "--timeout", "off")
    assert resumed.returncode == 0, resumed.stderr
    after = RunSpec.from_summary(cluster.jobs.handles.get("j", lock=False).handle.summary)
    assert after.lifecycle.timeout is None, "the new option"
    assert after.after == before.after, "what it runs after is the job's"

    data, stat = cluster.zk.get(cluster.layout.status("j"))
    again = JobStatus.from_znode(data, stat, cluster.layout.status("j"))
    cluster.zk.set(cluster.layout.status("j"), replace(again, state=STOPPED).to_bytes())
    StopStore(cluster).request("j")
    (tmp_path / "job.py").write_text(JOB_FILE.replace("return None", "return 1"))
    new_code = script(config, "jobs resume", "j", "--definition", "job.py:run", cwd=tmp_path)
    assert new_code.returncode == 0, new_code.stderr
    summary = cluster.jobs.handles.get("j", lock=False).handle.summary
    assert RunSpec.from_summary(summary).after == before.after, "and with new code"
