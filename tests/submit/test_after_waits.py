"""``submit --after JOB[:STATE]`` with a real daemon: a job waits PENDING, saying why, while the
job it names runs; it starts once that job ended as required, and fails with the reason when it
ended otherwise or was never submitted. Submitted with the installed script, as a user does."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import script, show, zkstore
from tests.helpers import wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig

pytestmark = [pytest.mark.e2e, pytest.mark.shared_fleet]

GATED = """
import time


def run(ctx, out):
    open(out + "-started", "w").close()
    while not ctx.config.get("go"):
        time.sleep(0.05)
"""

MARK = """
def run(ctx, out):
    open(out, "w").write(ctx.job_id)
"""


def test_after_waits_for_its_job_then_runs_or_fails_with_the_reason(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    config = runtime_config
    (laptop / "gated.py").write_text(GATED)
    (laptop / "mark.py").write_text(MARK)
    local.start_daemon("d1")
    out = laptop / "out"

    def submit(job_id: str, *words: str) -> None:
        target = "gated.py:run" if job_id == "a" else "mark.py:run"
        done = script(
            config,
            "submit",
            target,
            "--job-id",
            job_id,
            *words,
            "--",
            f"{out}-{job_id}",
            cwd=laptop,
        )
        assert (done.returncode, done.stdout) == (0, f"{job_id}\n"), done.stderr

    submit("a")
    submit("b", "--after", "a")
    submit("c", "--after", "a:FAILED")
    submit("d", "--after", "never-submitted")
    wait_for(Path(f"{out}-a-started").exists, timeout=60, what="a running")

    waiting = wait_for(lambda: show(config, "b")["waiting"], timeout=30, what="b's reason")
    assert waiting == "waiting for job a to end SUCCEEDED"
    assert show(config, "b")["state"] == "PENDING" and not Path(f"{out}-b").exists()
    failed = wait_for(lambda: show(config, "d")["result"], timeout=30, what="d's result")
    assert failed["outcome"] == "FAILED" and "no job never-submitted" in failed["error"]

    assert zkstore(config, "control set", "a", "go=true").returncode == 0
    # Its result, not its file: the file exists a moment before the job has written to it.
    ran = wait_for(lambda: show(config, "b")["result"], timeout=60, what="b ran after a")
    assert ran["outcome"] == "SUCCEEDED" and Path(f"{out}-b").read_text() == "b"
    ended = wait_for(lambda: show(config, "c")["result"], timeout=60, what="c's result")
    assert ended["outcome"] == "FAILED"
    assert ended["error"] == ("job a ended SUCCEEDED; this job runs only after it ended FAILED")
    assert not Path(f"{out}-c").exists(), "c never ran"


@pytest.mark.disturbs  # its daemon's --reconcile-interval
def test_a_job_waiting_for_a_quarantined_job_says_so_and_fails_when_it_is_purged(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    """Issue 50: b waits --after a, and a is quarantined (its handle garbled, found by the
    leader's periodic look): b's reason says so and names what ends the wait; a purged
    (FAILED), b fails with the reason; one waiting for any end runs."""
    config = runtime_config
    (laptop / "gated.py").write_text(GATED)
    (laptop / "mark.py").write_text(MARK)
    local.start_daemon("d1", "--reconcile-interval", "1")
    out = laptop / "out"
    for job_id, target, words in (
        ("a", "gated.py:run", ()),
        ("b", "mark.py:run", ("--after", "a")),
        ("e", "mark.py:run", ("--after", "a:ENDED")),
    ):
        done = script(
            config,
            "submit",
            target,
            "--job-id",
            job_id,
            *words,
            "--",
            f"{out}-{job_id}",
            cwd=laptop,
        )
        assert done.returncode == 0, done.stderr
    wait_for(Path(f"{out}-a-started").exists, timeout=60, what="a running")
    wait_for(lambda: show(config, "b")["waiting"], timeout=30, what="b waiting")
    with Cluster.open(config) as cluster:
        cluster.zk.set(cluster.layout.job_handle("a"), b"{garbage")
    waiting = wait_for(
        lambda: "quarantine" in (show(config, "b")["waiting"] or "") and show(config, "b"),
        timeout=30,
        what="b's reason naming a's quarantine",
    )["waiting"]
    assert waiting.startswith("waiting for job a to end SUCCEEDED: it is in quarantine")
    assert "zkstore quarantine purge a --yes" in waiting
    purged = script(config, "quarantine purge", "a", "--yes")
    assert purged.returncode == 0, purged.stderr
    failed = wait_for(lambda: show(config, "b")["result"], timeout=60, what="b's result")
    assert failed["outcome"] == "FAILED"
    assert failed["error"].startswith("job a ended FAILED"), failed["error"]
    ran = wait_for(lambda: show(config, "e")["result"], timeout=60, what="e's result")
    assert ran["outcome"] == "SUCCEEDED"
