"""``submit --after JOB[:STATE]`` with a real daemon: a job waits PENDING, saying why, while the
job it names runs; it starts once that job ended as required, and fails with the reason when it
ended otherwise or was never submitted. Submitted with the installed script, as a user does."""

from __future__ import annotations

from pathlib import Path

from recovery.dev.localcluster import LocalCluster
from tests.cli import script, show, zkstore
from tests.helpers import wait_for
from zkstore.config import StoreConfig

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
