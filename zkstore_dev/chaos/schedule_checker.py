"""The schedule checker, after Jepsen's Chronos checker: every window runs exactly once.

Jepsen (``chronos/src/jepsen/chronos/checker.clj``) gives each scheduled time a window that
must hold a distinct run start, and counts the missed and the duplicated ones. Here a run is
known by its own evidence, not by what the store says: each run of the chaos schedule's job
(:func:`scheduled_run`) writes a marker per attempt (its job id, attempt, pid, start time), and
the job id names the window (:func:`zkstore.schedules.runs.window_of`). What the schedule
recorded (its history: skipped with why, missed) is the other input. Over the windows that the
spec has in the run's span (:func:`expected_windows`), :func:`check` finds:

- a window with two runs (two job ids), or a job id run twice (two first attempts);
- a run that started before its window (less a clock ``skew``), or for a time that is no window;
- a window with neither a run nor a recorded skip or miss (lost: Chronos' incomplete runs);
- a window both run and recorded as skipped or missed;
- and, as the scenario asks: a missed window (``missed_ok=False``), a run that first started
  later than ``epsilon`` after its window (Jepsen's window; None: lateness is only counted), or
  more than ``bound`` later than the span's quickest window did (what a fault added to a
  window's delay, over what starting a run costs on the machine then).

Pure, but for reading markers from a directory.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from zkstore.schedules.runs import window_of
from zkstore.schedules.schedule_records import FIRED, MISSED, SKIPPED, HistoryEntry
from zkstore.schedules.timing import Timing

__all__ = [
    "MARKER_PREFIX",
    "Attempt",
    "Run",
    "Verdict",
    "check",
    "expected_windows",
    "read_runs",
    "recorded",
    "scheduled_run",
]

MARKER_PREFIX = "run-"


@dataclass(frozen=True)
class Attempt:
    """One attempt of a run, as its marker says: when it started (epoch seconds)."""

    attempt: int
    start: float
    pid: int = 0


@dataclass(frozen=True)
class Run:
    """A run seen: its job id, the window it names (None: not a run of the schedule) and its
    attempts."""

    job_id: str
    window: datetime | None
    attempts: tuple[Attempt, ...]

    @property
    def first_start(self) -> float:
        return min(a.start for a in self.attempts)


@dataclass
class Verdict:
    """What :func:`check` found: violations (one line each) and counts."""

    violations: list[str] = field(default_factory=list)
    windows: int = 0
    ran: int = 0
    skipped: int = 0
    missed: int = 0
    late: int = 0
    #: seconds from each window to its run's first start, in window order
    delays: list[float] = field(default_factory=list)

    def counts(self) -> str:
        """One line: the windows, what became of them, and their delays."""
        delays = sorted(self.delays)
        median = f"{statistics.median(delays):.2f}" if delays else "-"
        longest = f"{delays[-1]:.2f}" if delays else "-"
        return (
            f"{self.windows} windows, {self.ran} ran, {self.skipped} skipped, "
            f"{self.missed} missed; delay median {median} s, max {longest} s"
        )


def expected_windows(timing: Timing, start: datetime, end: datetime) -> list[datetime]:
    """The windows of ``timing`` in ``[start, end]``: the ones the run's span must account for
    (``end``: the last moment a window must have been decided by; leave it a grace before the
    span's end)."""
    return timing.between(start - timedelta(seconds=1), end, 1_000_000)


def recorded(history: Iterable[HistoryEntry], windows: Sequence[datetime]) -> dict[datetime, str]:
    """The windows the schedule recorded as skipped or missed (a row of them is one entry,
    ``window`` to ``through``), mapped to their outcome; among ``windows`` only."""
    found: dict[datetime, str] = {}
    for entry in history:
        if entry.outcome == FIRED:
            continue
        for window in windows:
            if entry.window <= window <= entry.last:
                found[window] = entry.outcome
    return found


def check(
    windows: Sequence[datetime],
    runs: Iterable[Run],
    decided: dict[datetime, str],
    *,
    skew: float = 0.5,
    epsilon: float | None = None,
    bound: float | None = None,
    missed_ok: bool = True,
) -> Verdict:
    """Every window in ``windows`` has exactly one run or a recorded skip or miss (``decided``,
    see :func:`recorded`); see the module for each violation."""
    verdict = Verdict(windows=len(windows))
    by_window = _runs_by_window(windows, runs, skew, verdict)
    started: list[tuple[datetime, float]] = []
    for window in windows:
        found = by_window.get(window, [])
        outcome = decided.get(window)
        if len(found) > 1:
            verdict.violations.append(
                f"window {window}: {len(found)} runs ({', '.join(r.job_id for r in found)})"
            )
        if found and outcome is not None:
            verdict.violations.append(f"window {window}: ran, and recorded as {outcome}")
        if found:
            verdict.ran += 1
            delay = found[0].first_start - window.timestamp()
            verdict.delays.append(delay)
            started.append((window, delay))
            if epsilon is not None and delay > epsilon:
                verdict.late += 1
                verdict.violations.append(
                    f"window {window}: its run started {delay:.1f} s late (over {epsilon:g} s)"
                )
        elif outcome == SKIPPED:
            verdict.skipped += 1
        elif outcome == MISSED:
            verdict.missed += 1
            if not missed_ok:
                verdict.violations.append(f"window {window}: missed")
        else:
            verdict.violations.append(f"window {window}: no run and no record (lost)")
    quickest = min(verdict.delays, default=0.0)
    for window, delay in started:
        if bound is not None and delay - quickest > bound:
            verdict.late += 1
            verdict.violations.append(
                f"window {window}: its run started {delay:.1f} s late, {delay - quickest:.1f} s "
                f"later than the quickest window's (over {bound:g} s)"
            )
    return verdict


def _runs_by_window(
    windows: Sequence[datetime], runs: Iterable[Run], skew: float, verdict: Verdict
) -> dict[datetime, list[Run]]:
    """The runs of each window of the span; the violations of single runs go to ``verdict``."""
    expected = set(windows)
    by_window: dict[datetime, list[Run]] = {}
    for run in runs:
        if run.window is None:
            verdict.violations.append(f"{run.job_id}: not a run of the schedule")
            continue
        numbers = [a.attempt for a in run.attempts]
        if len(numbers) != len(set(numbers)):
            verdict.violations.append(
                f"{run.job_id}: ran twice (attempts {sorted(numbers)}: a number repeats)"
            )
        if run.window not in expected:
            if windows and min(windows) <= run.window <= max(windows):
                verdict.violations.append(f"{run.job_id}: {run.window} is not a window")
            continue  # outside the span: not this check's
        by_window.setdefault(run.window, []).append(run)
        early = run.window.timestamp() - run.first_start
        if early > skew:
            verdict.violations.append(
                f"{run.job_id}: started {early:.1f} s before its window {run.window}"
            )
    return by_window


# -- the job and its markers ----------------------------------------------------------------------


def scheduled_run(ctx: Any, out: str, seconds: float = 0.0) -> None:
    """The chaos schedule's job: a marker per attempt, then ``seconds`` of work."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    record = {"job": ctx.job_id, "attempt": ctx.attempt, "pid": os.getpid(), "start": time.time()}
    marker = folder / f"{MARKER_PREFIX}{ctx.job_id}-attempt-{ctx.attempt}-{os.getpid()}.json"
    temporary = marker.with_name(f".{marker.name}")
    temporary.write_text(json.dumps(record))
    temporary.replace(marker)
    time.sleep(seconds)


def read_runs(out: str | Path, schedule: str) -> list[Run]:
    """The runs whose markers are in ``out``, with the window each names."""
    attempts: dict[str, list[Attempt]] = {}
    for path in sorted(Path(out).glob(f"{MARKER_PREFIX}*.json")):
        data = json.loads(path.read_text())
        attempts.setdefault(data["job"], []).append(
            Attempt(int(data["attempt"]), float(data["start"]), int(data.get("pid", 0)))
        )
    return [
        Run(job, window_of(schedule, job), tuple(sorted(found, key=lambda a: a.start)))
        for job, found in sorted(attempts.items())
    ]
