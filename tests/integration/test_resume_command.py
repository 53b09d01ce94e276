"""``zkstore jobs resume`` and ``zkstore submit`` with lifecycle options, in this process
(click's runner) against the real ZooKeeper: what the handle carries for the leader, options
changed and limits turned off at resume, and the errors a user meets."""

from __future__ import annotations

from pathlib import Path

from tests.cli import zkstore
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.records import JobStatus
from zkstore.jobs.states import STOPPED
from zkstore.lifecycle.stopstore import StopStore
from zkstore.strict import utc_now

JOB_FILE = "def run(ctx, day):\n    return None\n"


def test_submit_options_travel_in_the_handle_and_resume_changes_them(
    config: StoreConfig, cluster: Cluster, tmp_path: Path
) -> None:
    (tmp_path / "job.py").write_text(JOB_FILE)
    done = zkstore(
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
    summary = cluster.jobs.handles.get("j", lock=False).handle.summary
    assert (summary["timeout"], summary["progress_timeout"], summary["retry_delay"]) == (
        7200,
        600,
        30,
    )
    assert summary["notify"] == "https://hooks.example.com/T/SECRET"

    # Not stopped: resume says so (exit 5) and changes nothing.
    refused = zkstore(config, "jobs resume", "j", "--timeout", "off")
    assert refused.returncode == 5 and "not STOPPED" in refused.stderr

    status = JobStatus(version=None, state=STOPPED, attempt=1, updated=utc_now())
    cluster.zk.ensure_path(cluster.layout.job_dir("j"))
    cluster.zk.create(cluster.layout.status("j"), status.to_bytes())
    StopStore(cluster).request("j")
    resumed = zkstore(config, "jobs resume", "j", "--timeout", "off", "--retry-delay", "1m")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == (
        "job j resumes with its new definition, from the start (it has no checkpoint)"
    )
    summary = cluster.jobs.handles.get("j", lock=False).handle.summary
    assert "timeout" not in summary and summary["retry_delay"] == 60
    assert summary["progress_timeout"] == 600, "what was not given is kept"
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
        done = zkstore(config, "submit", "job.py:run", *words, "--", "x", cwd=tmp_path)
        assert done.returncode == 2 and says in done.stderr, (words, done.stderr)
