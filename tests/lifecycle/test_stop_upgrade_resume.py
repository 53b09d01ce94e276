"""``zkstore jobs stop --checkpoint`` then ``zkstore jobs resume --definition``: a last-state
upgrade of examples/pipeline.py, as a user does it with the installed script. The stop waits
for the checkpoint it asked for, ends the driver and leaves the job STOPPED (no result, no
driver, no slot); the resume runs the new code from that checkpoint, and says which. No day
that was checkpointed is done again, and the output is exactly the pipeline's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from examples import pipeline
from recovery.dev.localcluster import LocalCluster
from tests.cli import script, show
from tests.helpers import REPO, wait_for
from zkstore.config import StoreConfig
from zkstore.records.job_states import STOPPED, SUCCEEDED

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

#: The held v1 does two days (the one before the stop, the one whose checkpoint answers it),
#: so v2 resumes at day 3 and does two more before the summary: every step of the upgrade, at
#: two days of Spark less than six days cost (each costs seconds of a loaded machine).
DAYS = 4


def version(tag: str, *, held: bool = False) -> str:
    """examples/pipeline.py, noting each day it published in ``OUT/<tag>-days``.

    ``held``: after each day's checkpoint the job waits until a checkpoint is asked for (the
    stop's), and after the checkpoint that answered it, until it is ended: what it did when
    stopped does not depend on how fast a loaded machine ends it (under two busy loops an
    unheld v1 finished every day before its driver was ended)."""
    source = (REPO / "examples" / "pipeline.py").read_text()
    marker = '        daily.coalesce(1).write.mode("overwrite").json(part)\n'
    assert marker in source
    note = (
        f"        with open(Path(output_dir) / '{tag}-days', 'a') as noted:\n"
        "            noted.write(f'{number}\\n')\n"
    )
    source = source.replace(marker, marker + note)
    if held:
        step = (
            '        ctx.checkpoint({"day": number, "file": path.name}, commit={"days": [part]})\n'
        )
        assert step in source
        hold = (
            "        answers = ctx.checkpoint_requested\n"
            + step
            + "        while answers or not ctx.checkpoint_requested:\n"
            "            time.sleep(0.05)\n"
        )
        source = source.replace(step, hold)
    return source


def days(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def test_stop_upgrade_and_resume_the_pipeline(
    spark_config: StoreConfig, tmp_path: Path, laptop: Path
) -> None:
    (laptop / "v1").mkdir()
    (laptop / "v2").mkdir()
    (laptop / "v1" / "pipeline.py").write_text(version("v1", held=True))
    (laptop / "v2" / "pipeline.py").write_text(version("v2"))
    data, out = tmp_path / "in", tmp_path / "out"
    pipeline.generate(str(data), days=DAYS, rows_per_day=200)
    config = spark_config.with_changes(artifact_roots=(f"file://{out}",))
    local = LocalCluster(
        config, tmp_path / "runtime", restart_backoff=0.5, extra_args=("--end-grace", "5s")
    )
    local.start_daemon("d1")
    try:
        local.wait_for_leader(timeout=60)
        submitted = script(
            config,
            "submit",
            "v1/pipeline.py:run",
            "--job-id",
            "sales",
            "--",
            str(data),
            str(out),
            "1",
            cwd=laptop,
        )
        assert submitted.returncode == 0, submitted.stderr
        wait_for(lambda: len(days(out / "v1-days")) >= 1, timeout=180, what="day 1 done")

        stopped = script(
            config, "jobs stop", "sales", "--checkpoint", "--checkpoint-timeout", "60s"
        )
        assert stopped.returncode == 0, stopped.stderr
        line = stopped.stdout.strip()
        match = re.fullmatch(
            r"sales: STOPPED at attempt 1; it resumes from checkpoint (\d+) \(taken .+\)", line
        )
        assert match, line
        done = days(out / "v1-days")
        shown = show(config, "sales")
        assert shown["state"] == STOPPED and shown["driver"] is None
        assert 1 <= len(done) < DAYS and done == list(range(1, len(done) + 1))

        resumed = script(
            config, "jobs resume", "sales", "--definition", "v2/pipeline.py:run", cwd=laptop
        )
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.strip() == (
            f"job sales resumes with its new definition from checkpoint {match.group(1)} "
            f"(taken {line.split('(taken ')[1]}"
        )
        waited = script(config, "jobs wait", "sales", timeout=300)
        assert waited.returncode == 0, waited.stderr
    finally:
        local.stop()
    # No checkpointed day redone, the rest done by the new code, the output the pipeline's.
    assert days(out / "v1-days") == done
    assert days(out / "v2-days") == list(range(len(done) + 1, DAYS + 1))
    summary = json.loads((out / "summary.json").read_text())
    assert summary == pipeline.expected(str(data))
    assert show(config, "sales")["state"] == SUCCEEDED
