"""Issue 27: Spark's console progress is off in driver logs unless the job sets it; the
daemon's default driver slots come from the host (pure)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from recovery.cli.main import cli
from recovery.driver.workdir import CONSOLE_PROGRESS, lay_out
from zkstore.jobs.definition import JobDefinition


def test_console_progress_is_off_unless_the_job_sets_it(tmp_path: Path) -> None:
    quiet = JobDefinition.for_script("a", "print(1)\n", filename="/x/etl.py")
    assert lay_out(quiet, tmp_path / "a").spark_conf[CONSOLE_PROGRESS] == "false"
    chatty = JobDefinition.for_script(
        "b", "print(1)\n", filename="/x/etl.py", spark_conf={CONSOLE_PROGRESS: "true"}
    )
    assert lay_out(chatty, tmp_path / "b").spark_conf[CONSOLE_PROGRESS] == "true"


def test_max_drivers_has_no_fixed_default_and_says_where_it_comes_from() -> None:
    shown = CliRunner().invoke(cli, ["daemon", "--help"], prog_name="zkstore", terminal_width=200)
    assert shown.exit_code == 0
    text = " ".join(shown.stdout.split())
    assert "[default: 32]" not in text
    assert "[default: from this host: 2 per core, 1 GiB of memory each" in text
