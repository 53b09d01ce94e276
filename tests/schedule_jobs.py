"""The job of the schedules' tests, as a user's file: the chaos harness's marker job
(``zkstore_dev.chaos.schedule_checker.scheduled_run``), which each run writes a marker of, so
that a test counts what really ran, per window."""

from __future__ import annotations

from pathlib import Path


def job_file(folder: Path) -> Path:
    """The user's job file: the chaos harness's marker job, under a user's name."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tick.py"
    path.write_text("from zkstore_dev.chaos.schedule_checker import scheduled_run as run\n")
    return path
