"""Which driver JVM each attempt had, remembered after the job ended (issue 56.4), as a user reads
it with the installed ``zkstore`` script: ``jobs show`` (text and ``--format json``, per attempt).
A job that asks for no Spark says it had none; the Spark cases (warm, cold and why) are in
tests/spark/test_warm_drivers.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import json_of, script
from tests.helpers import SESSION_TIMEOUT, wait_for
from zkstore.config import StoreConfig

pytestmark = pytest.mark.e2e

JOB = """\
def run(ctx):
    if ctx.attempt == 1:
        raise ValueError("the first attempt fails")
"""
NONE = "none: the job started no Spark"


def ended(config: StoreConfig, job_id: str) -> list[dict[str, object]] | None:
    """The job's attempts once the history tells both ends, else None (``jobs show``, in this
    process: a wait asks it again and again)."""
    attempts = json_of(config, "jobs show", job_id)["attempts"]
    assert isinstance(attempts, list)
    done = len(attempts) == 2 and all(a["outcome"] != "PLACED" for a in attempts)
    return attempts if done else None


def test_each_attempt_keeps_the_driver_jvm_it_had(
    runtime_config: StoreConfig, tmp_path: Path, laptop: Path
) -> None:
    config = runtime_config
    (laptop / "job.py").write_text(JOB)
    local = LocalCluster(config, tmp_path / "rt", restart_backoff=0.2)
    try:
        local.start_daemon("d1")
        local.wait_for_leader(timeout=SESSION_TIMEOUT * 4 + 30)
        made = script(
            config, "submit", "job.py:run", "--job-id", "plain", "--max-attempts", "2", cwd=laptop
        )
        assert made.returncode == 0, made.stderr
        attempts = wait_for(lambda: ended(config, "plain"), 180, what="both attempts told")
        assert [a["outcome"] for a in attempts] == ["FAILED", "SUCCEEDED"], attempts
        for attempt in attempts:
            assert str(attempt["jvm"]).startswith(NONE), attempts
        text = script(config, "jobs show", "plain")
        assert text.returncode == 0, text.stderr
        lines = [line for line in text.stdout.splitlines() if line.startswith("  1 FAILED")]
        assert len(lines) == 1 and f"driver JVM {NONE}" in lines[0], text.stdout
    finally:
        local.stop()
