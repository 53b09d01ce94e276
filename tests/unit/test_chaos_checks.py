"""The chaos harness's own checks: they must see what they claim to see."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.dev.chaos import job
from recovery.dev.chaos.runner import Options, RunReport, plan, table
from recovery.dev.chaos.schedules import Verdict


def attempt(n: int, start: float, last: float) -> job.Attempt:
    return job.Attempt(attempt=n, pid=100 + n, start=start, last=last, step=0)


def test_overlapping_live_attempts_are_found() -> None:
    one, two, three = attempt(1, 0.0, 5.0), attempt(2, 6.0, 9.0), attempt(3, 8.5, 12.0)
    assert job.overlaps([one, two]) == []
    assert job.overlaps([one, two, three]) == [(two, three)]


def test_longest_stall_counts_only_gaps_across_the_fault() -> None:
    times = [0.0, 0.2, 0.4, 5.0, 5.2, 20.0]
    assert job.longest_stall(times, start=1.0, end=2.0) == pytest.approx(4.6)
    assert job.longest_stall(times, start=0.25, end=0.3) == pytest.approx(0.2)
    assert job.longest_stall(times, start=5.1, end=5.25) == pytest.approx(14.8)
    assert job.longest_stall(times, start=30.0, end=31.0) == 0.0


def test_markers_and_progress_are_read_back(tmp_path: Path) -> None:
    class Ctx:
        attempt = 2

        def latest_checkpoint(self) -> dict[str, int]:
            return {"step": 2, "total": 5}

        def checkpoint(self, metadata: dict[str, int]) -> None:
            self.last = metadata

    ctx = Ctx()
    job.sum_of_squares(ctx, str(tmp_path), 4, 0.0)
    assert job.output(tmp_path) == {"steps": 4, "total": job.expected_total(4), "attempt": 2}
    assert ctx.last == {"step": 4, "total": 30}
    (found,) = job.attempts(tmp_path)
    assert (found.attempt, found.step) == (2, 4) and found.start <= found.last
    assert len(job.progress_times(tmp_path)) == 2


def test_plan_is_seeded_and_covers_every_scenario() -> None:
    options = Options(runs=14, seed=5)
    assert plan(options) == plan(Options(runs=14, seed=5))
    assert set(plan(options)) == set(options.scenarios)
    assert plan(options) != plan(Options(runs=14, seed=6))


def test_table_counts_violations_per_scenario() -> None:
    reports = [
        RunReport("a", None, [], 1.0, 10.0, Verdict(windows=2, delays=[0.5, 4.0])),
        RunReport("a", None, ["x"], 3.0, 10.0, Verdict(windows=1, delays=[1.0])),
        RunReport("b", None, [], float("nan"), 10.0),
    ]
    lines = table(reports).splitlines()
    assert lines[1].split() == ["a", "2", "1", "2.0", "3.0", "1.0", "4.0"]
    assert lines[2].split() == ["b", "1", "0", "-", "-", "-", "-"]
    assert lines[3].split() == ["all", "3", "1"]
