"""The chaos harness's own checks: they must see what they claim to see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zkstore_dev.chaos import job, ledger
from zkstore_dev.chaos.runner import Options, RunReport, finish_work, plan, table
from zkstore_dev.chaos.schedule_checker import Verdict

pytestmark = pytest.mark.unit


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


def entry(index: int, attempt: int) -> ledger.Entry:
    return ledger.Entry(index=index, attempt=attempt, pid=100 + attempt, seq=index, at=0.0)


def test_a_write_of_an_older_attempt_after_a_newer_attempts_first_is_a_zombie_write() -> None:
    assert ledger.zombie_writes([entry(0, 1), entry(1, 1), entry(2, 2), entry(3, 3)]) == []
    (found,) = ledger.zombie_writes([entry(0, 1), entry(1, 2), entry(2, 1), entry(3, 2)])
    assert "attempt 1" in found and "entry 2" in found and "attempt 2's entry 1" in found


def test_the_ledger_takes_each_index_once_in_the_order_storage_took_them(tmp_path: Path) -> None:
    book = ledger.Ledger(tmp_path.as_uri())
    book.create(0, b'{"attempt": 1, "pid": 7, "seq": 0, "at": 1.0}')
    with pytest.raises(FileExistsError):
        book.create(0, b'{"attempt": 2, "pid": 8, "seq": 0, "at": 2.0}')
    book.create(1, b'{"attempt": 2, "pid": 8, "seq": 0, "at": 2.0}')
    assert [(e.index, e.attempt) for e in book.entries()] == [(0, 1), (1, 2)]
    (tmp_path / "log").write_text("1 0\n2 1\n2 2\n")
    assert ledger.missing(book, tmp_path / "log") == [2]


def test_a_job_is_back_at_the_first_step_of_a_newer_attempt_counted_from_the_fault() -> None:
    steps = [(1, 0.0), (1, 0.2), (1, 4.0), (2, 9.5), (2, 9.7)]
    assert job.back_after(steps, start=3.0) == pytest.approx(6.5), "attempt 1 stepped on"
    assert job.back_after(steps, start=9.6) is None, "no attempt newer than 2"
    assert job.back_after([(1, 5.0)], start=3.0) == pytest.approx(2.0), "its first attempt"


def test_with_partitions_the_plan_alternates_a_partition_and_a_process_fault() -> None:
    options = Options(runs=8, seed=3, scenarios=("a", "b", "c"), partitions=("x", "y"))
    order = plan(options)
    assert {order[0], order[2]} == {"x", "y"}, "a partition first, then one in turn"
    assert {order[1], order[3], order[4]} == {"a", "b", "c"}, "the rest once the cuts are done"
    assert {order[5], order[7]} == {"x", "y"} and len(order) == 8
    assert plan(options) == order


def part(step: int, square: int | None = None, attempt: int = 1) -> tuple[str, bytes]:
    content = {"step": step, "square": step * step if square is None else square}
    return (f"s3://b/o/attempt-{attempt}/step-{step}.json", json.dumps(content).encode())


def test_every_step_committed_exactly_once_is_what_the_outputs_check_wants() -> None:
    assert job.committed_once([part(1), part(2, attempt=2), part(3, attempt=2)], 3) == []
    (twice,) = job.committed_once([part(1), part(2), part(2, attempt=2), part(3)], 3)
    assert "step 2 committed 2 times" in twice and "attempt-2/step-2.json" in twice
    (missing,) = job.committed_once([part(1), part(3)], 3)
    assert "steps [2] never committed" in missing
    (extra,) = job.committed_once([part(1), part(2)], 1)
    assert "steps [2] committed, beyond the 1" in extra
    (stale,) = job.committed_once([part(1, square=4)], 1)
    assert "not step 1's" in stale
    (foreign,) = job.committed_once([("s3://b/o/attempt-1/other.json", b"{}"), part(1)], 1)
    assert "not a step's" in foreign


def test_the_work_directory_a_run_made_goes_when_every_run_held(tmp_path: Path) -> None:
    """``make chaos`` left some megabytes in /tmp at every run (ten directories in a day of
    CI here); it keeps them only where there is something to look at."""
    made = tmp_path / "zkstore-chaos-x"
    (made / "run001" / "zk").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (made / "run001" / "link").symlink_to(outside)
    assert finish_work(made, held=False) == f"chaos: work kept for inspection in {made}"
    assert made.exists()
    assert finish_work(None, held=True) == "chaos: work kept where --work-dir said"
    assert finish_work(made, held=True) == f"chaos: work in {made} removed (no violation)"
    assert not made.exists() and outside.exists(), "a link inside is removed, not followed"
