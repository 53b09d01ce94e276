"""Issue 27: Spark's console progress is off in driver logs unless the job sets it; the
daemon's default driver slots come from the host (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from recovery.cli.main import cli
from recovery.driver.workdir import CONSOLE_PROGRESS, lay_out
from zkstore.jobs.definition import JobDefinition

pytestmark = pytest.mark.unit


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


def test_exit_code_3_is_not_told_as_refused_to_start() -> None:
    """A driver that ran for a while and exited 3 (the job's own code, say) was told as
    "refused to start and left no outcome" on 01c8155."""
    from recovery.member.launcher import describe_exit

    told = describe_exit(3)
    assert "refused to start" not in told
    assert told.startswith("exited with code 3 (")
