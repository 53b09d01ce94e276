"""The schedule checker sees what it claims to see: every window run exactly once or recorded,
no window with two runs, no run before its time, the lost and the missed windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from zkstore.schedules.runs import run_id
from zkstore.schedules.schedule_records import HistoryEntry
from zkstore.schedules.timing import Timing
from zkstore_dev.chaos.faults import Fault
from zkstore_dev.chaos.schedule_checker import (
    Attempt,
    Run,
    check,
    expected_windows,
    read_runs,
    recorded,
    scheduled_run,
)

pytestmark = pytest.mark.unit

START = datetime(2026, 11, 24, tzinfo=UTC)
TIMING = Timing(start=START, every=5)
WINDOWS = expected_windows(TIMING, START, START + timedelta(seconds=45))


def run(window: datetime, delay: float = 0.3, *, attempts: int = 1, job: str | None = None) -> Run:
    return Run(
        job or run_id("s", window),
        window,
        tuple(Attempt(n, window.timestamp() + delay + n) for n in range(1, attempts + 1)),
    )


def test_the_span_has_its_windows() -> None:
    assert (
        len(WINDOWS) == 10 and WINDOWS[0] == START and WINDOWS[-1] == START + timedelta(seconds=45)
    )


def test_every_window_run_once_is_clean_and_counts_delays() -> None:
    verdict = check(WINDOWS, [run(w, attempts=2) for w in WINDOWS], {})
    assert verdict.violations == []
    assert verdict.ran == 10 and len(verdict.delays) == 10 and max(verdict.delays) < 2


def test_a_window_with_two_runs_is_a_violation() -> None:
    runs = [run(w) for w in WINDOWS] + [run(WINDOWS[3], job="s-other")]
    runs[-1] = Run("s-other", WINDOWS[3], runs[-1].attempts)
    verdict = check(WINDOWS, runs, {})
    assert any("2 runs" in v for v in verdict.violations)


def test_a_job_id_run_twice_is_a_violation() -> None:
    twice = run(WINDOWS[2])
    twice = Run(
        twice.job_id, twice.window, (*twice.attempts, Attempt(1, twice.attempts[0].start + 9))
    )
    verdict = check(WINDOWS, [*(run(w) for w in WINDOWS if w != WINDOWS[2]), twice], {})
    assert any("ran twice" in v for v in verdict.violations)


def test_a_run_before_its_window_is_a_violation() -> None:
    verdict = check(WINDOWS, [run(w, delay=-2.0 if w == WINDOWS[5] else 0.2) for w in WINDOWS], {})
    assert [v for v in verdict.violations if "before its window" in v] != []


def test_a_window_without_run_or_record_is_lost_and_a_recorded_one_is_not() -> None:
    runs = [run(w) for w in WINDOWS if w not in (WINDOWS[1], WINDOWS[2])]
    history = [HistoryEntry(WINDOWS[2], "skipped", reason="forbid")]
    verdict = check(WINDOWS, runs, recorded(history, WINDOWS))
    assert verdict.violations == [f"window {WINDOWS[1]}: no run and no record (lost)"]
    assert verdict.skipped == 1


def test_missed_rows_are_expanded_and_fail_only_when_the_scenario_says_so() -> None:
    history = [HistoryEntry(WINDOWS[0], "missed", through=WINDOWS[3], count=4)]
    runs = [run(w) for w in WINDOWS[4:]]
    decided = recorded(history, WINDOWS)
    assert check(WINDOWS, runs, decided).violations == []
    assert check(WINDOWS, runs, decided).missed == 4
    assert len(check(WINDOWS, runs, decided, missed_ok=False).violations) == 4


def test_a_window_both_run_and_recorded_is_a_violation() -> None:
    history = [HistoryEntry(WINDOWS[0], "missed")]
    verdict = check(WINDOWS, [run(w) for w in WINDOWS], recorded(history, WINDOWS))
    assert any("recorded as missed" in v for v in verdict.violations)


def test_late_runs_are_counted_and_fail_past_epsilon() -> None:
    runs = [run(w, delay=8.0 if w == WINDOWS[4] else 0.2) for w in WINDOWS]
    assert check(WINDOWS, runs, {}).violations == []
    verdict = check(WINDOWS, runs, {}, epsilon=5.0)
    assert verdict.late == 1 and len(verdict.violations) == 1


def test_a_window_later_than_the_quickest_by_more_than_the_bound_is_a_violation() -> None:
    """A restart's bound (issue 50.8): what the fault added over what a run's start costs."""
    slow = [run(w, delay=1.5 + (6.2 if w == WINDOWS[3] else 0.0)) for w in WINDOWS]
    assert check(WINDOWS, slow, {}, bound=7.0).violations == []  # all slow alike, one 6.2 s more
    slow[5] = run(WINDOWS[5], delay=1.5 + 7.5)
    verdict = check(WINDOWS, slow, {}, bound=7.0)
    assert verdict.late == 1
    assert verdict.violations == [
        f"window {WINDOWS[5]}: its run started 10.0 s late, 7.5 s later than the quickest "
        "window's (over 7 s)"
    ]


def test_a_rolling_restarts_bound_adds_the_return_of_the_daemon_a_run_was_placed_on() -> None:
    """A CI run (2026-11-30): the leader was SIGKILLed, and the next window's run was placed on the
    daemon restarted next, killed just before and still a member. Two windows started 7.8 s and
    7.2 s later than the quickest: over the session timeout and a second, within both waits."""
    session = 6.0
    rolling = Fault("rolling restart", 0.0, 20.0, restarts_nothing=True, away=4.9)
    assert rolling.window_bound(session) == pytest.approx(11.9)
    assert Fault("cut", 0.0, 20.0, away=4.9).window_bound(session) is None  # only counted
    assert Fault("restart", 0.0, 3.0, restarts_nothing=True).window_bound(session) == 7.0

    seen = [run(w, delay=0.2) for w in WINDOWS]
    seen[3], seen[4] = run(WINDOWS[3], delay=0.2 + 7.8), run(WINDOWS[4], delay=0.2 + 7.2)
    assert len(check(WINDOWS, seen, {}, bound=7.0).violations) == 2  # the bound before
    assert check(WINDOWS, seen, {}, bound=rolling.window_bound(session)).violations == []
    seen[5] = run(WINDOWS[5], delay=0.2 + 12.0)  # more than both waits: still found
    verdict = check(WINDOWS, seen, {}, bound=rolling.window_bound(session))
    assert verdict.late == 1 and WINDOWS[5].isoformat(" ") in verdict.violations[0]


def test_runs_of_other_schedules_and_off_window_times_are_caught() -> None:
    stray = Run(
        "s-20261124T000002Z", START + timedelta(seconds=2), (Attempt(1, START.timestamp() + 3),)
    )
    alien = Run("other-1", None, (Attempt(1, 0.0),))
    verdict = check(WINDOWS, [*(run(w) for w in WINDOWS), stray, alien], {})
    assert len(verdict.violations) == 2


def test_markers_are_read_back_as_runs(tmp_path: Path) -> None:
    class Ctx:
        job_id = run_id("s", WINDOWS[0])
        attempt = 1

    scheduled_run(Ctx(), str(tmp_path))
    Ctx.attempt = 2
    scheduled_run(Ctx(), str(tmp_path))
    (found,) = read_runs(tmp_path, "s")
    assert found.window == WINDOWS[0] and [a.attempt for a in found.attempts] == [1, 2]
