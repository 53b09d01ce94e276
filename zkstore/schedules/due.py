"""What a leader does about a schedule now: a pure decision, then one transaction per step.

:func:`plan` takes the schedule's spec, its state (the newest window decided) and the time, and
decides every window since: fire, skip (paused) or miss (``--catchup`` lets it go). The windows
are those of :meth:`ScheduleSpec.timing` after ``state.last`` and up to now:

- a window inside the schedule's pause is **skipped** (reason: paused), never caught up;
- a window at most ``grace`` seconds old is **on time**: it fires, whatever ``--catchup`` says
  (a leader busy for a moment, or a takeover, must not lose it);
- the others are **late** (nobody led at their time): ``--catchup none`` misses them all,
  ``latest`` fires the newest due window only, ``N`` the newest N, ``all`` every one; the late
  windows it does not fire are **missed**, recorded with why. ``latest`` and ``N`` count the on
  time windows among the newest: a leader that comes back just after a window fires that one,
  not also the one before it (as Kubernetes' CronJob does).

A plan is bounded: it scans at most ``scan`` windows after ``state.last`` (a schedule every
second that nobody led for a day has 86,400: they are decided a chunk at a time, the newest
``N`` of a chunk held back until the scan reaches now) and fires at most ``limit`` of them; its
``more`` says to plan again once its steps are committed.

:func:`steps` cuts a plan into the transactions that record it: each fire with the decisions
before it, then the decisions after the last fire. Every step moves ``state.last`` forward, in
the same fenced transaction that creates the run (:mod:`zkstore.schedules.fire`), so a window
is decided exactly once whoever leads.

:func:`admit` is the concurrency policy, decided for each fire from the previous run:
``allow`` fires; ``forbid`` skips the window (recorded, with the run it waited for) while the
previous run has not ended; ``replace`` cancels the previous run in the fire's transaction and
makes the new run wait (``after``, :mod:`zkstore.jobs.dependencies`) until it has ended, so its
driver is gone before the new one starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from zkstore.schedules.records import (
    ALLOW,
    FIRED,
    FORBID,
    MISSED,
    SKIPPED,
    HistoryEntry,
    ScheduleSpec,
    ScheduleState,
    catchup_count,
)
from zkstore.schedules.timing import format_time

#: Windows fired by one plan at most: a backlog is fired a batch at a time, so that the leader's
#: loop goes on between batches.
FIRE_BATCH = 20
#: Windows scanned by one plan at most.
MAX_SCAN = 10_000
PAUSED = "paused"


@dataclass(frozen=True)
class Decision:
    """What becomes of one window: FIRED (to be fired), SKIPPED or MISSED, with why."""

    window: datetime
    outcome: str
    reason: str | None = None


@dataclass(frozen=True)
class Plan:
    """The decisions about the windows after ``state.last`` (oldest first), the schedule's next
    window after now (None: it has ended) and whether to plan again once these are done."""

    decisions: tuple[Decision, ...]
    next: datetime | None
    more: bool = False

    @property
    def fires(self) -> tuple[datetime, ...]:
        return tuple(d.window for d in self.decisions if d.outcome == FIRED)


@dataclass(frozen=True)
class Step:
    """One transaction's worth: the decisions it records (``before``, never fires) and the
    window it fires (None: a step that only records)."""

    before: tuple[Decision, ...]
    fire: datetime | None

    @property
    def through(self) -> datetime:
        """The newest window this step decides: ``state.last`` after it."""
        return self.fire if self.fire is not None else self.before[-1].window


def plan(
    spec: ScheduleSpec,
    state: ScheduleState,
    now: datetime,
    *,
    limit: int = FIRE_BATCH,
    scan: int = MAX_SCAN,
) -> Plan:
    """Decide the windows of ``spec`` after ``state.last`` up to ``now`` (see the module)."""
    timing = spec.timing()
    windows = timing.between(state.last_window, now, scan + 1)
    capped = len(windows) > scan
    windows = windows[:scan]
    due = [w for w in windows if not spec.paused_during(w)]
    keep = catchup_count(spec.catchup)
    on_time = [w for w in due if (now - w).total_seconds() <= spec.grace]
    if keep is None:
        fired = set(due)
    else:
        newest = max(keep, len(on_time))
        fired = set(due[-newest:]) if newest else set()
    # A scan that stopped short of now cannot tell which due windows are the newest N: it holds
    # the newest N of its chunk back for the next plan (unless that would decide nothing: a
    # chunk of mostly paused windows, where they are decided as if the scan had reached now).
    held = set(due[-keep:]) if capped and keep else set()
    if windows and windows[0] in held:
        held = set()
    decisions: list[Decision] = []
    fires = 0
    more = capped
    for window in windows:
        if window in held:
            break
        if window not in due:
            decisions.append(Decision(window, SKIPPED, PAUSED))
        elif window in fired:
            if fires == limit:
                more = True
                break
            fires += 1
            decisions.append(Decision(window, FIRED))
        else:
            decisions.append(Decision(window, MISSED, _missed_reason(spec, now - window)))
    return Plan(tuple(decisions), timing.next_after(now), more)


def _missed_reason(spec: ScheduleSpec, late: timedelta) -> str:
    return (
        f"not fired within {spec.grace} s of its time (decided {late.total_seconds():.0f} s "
        f"after it: no leader then?); --catchup {spec.catchup} does not run it"
    )


def steps(decided: Plan) -> list[Step]:
    """The plan as transactions, in order: each fire with the decisions since the previous
    one, then (if any) the decisions after the last fire."""
    found: list[Step] = []
    pending: list[Decision] = []
    for decision in decided.decisions:
        if decision.outcome == FIRED:
            found.append(Step(tuple(pending), decision.window))
            pending = []
        else:
            pending.append(decision)
    if pending:
        found.append(Step(tuple(pending), None))
    return found


def entries(decisions: tuple[Decision, ...]) -> tuple[HistoryEntry, ...]:
    """History entries for decisions that fire nothing (oldest first): a row of windows with the
    same outcome and reason is one entry with a count."""
    found: list[HistoryEntry] = []
    for decision in decisions:
        if decision.outcome == FIRED:
            raise ValueError("a fired window is recorded with its run, by the fire itself")
        previous = found[-1] if found else None
        if (
            previous is not None
            and previous.outcome == decision.outcome
            and _same_reason(previous.reason, decision.reason)
        ):
            found[-1] = HistoryEntry(
                window=previous.window,
                outcome=previous.outcome,
                reason=previous.reason,
                through=format_time(decision.window),
                count=previous.count + 1,
            )
        else:
            found.append(
                HistoryEntry(
                    window=format_time(decision.window),
                    outcome=decision.outcome,
                    reason=decision.reason,
                )
            )
    return tuple(found)


def _same_reason(first: str | None, second: str | None) -> bool:
    """Missed windows differ in how late they were decided: one reason per row is enough."""
    if first is None or second is None:
        return first == second
    return first.split(" (", 1)[0] == second.split(" (", 1)[0]


@dataclass(frozen=True)
class PreviousRun:
    """The schedule's newest run as the store shows it: ``live`` while it has not ended (in
    ``currentJobs`` without a result); ``state`` says what it is for a reason."""

    job_id: str
    live: bool
    state: str


@dataclass(frozen=True)
class Admission:
    """Whether a window fires: ``fire`` (and, with ``replace``, the run to cancel and wait for
    first), or not, with ``reason``."""

    fire: bool
    reason: str | None = None
    replace: str | None = None


def admit(concurrency: str, previous: PreviousRun | None) -> Admission:
    """The concurrency policy's answer for a window whose previous run is ``previous``."""
    if concurrency == ALLOW or previous is None or not previous.live:
        return Admission(True)
    if concurrency == FORBID:
        return Admission(
            False, f"--concurrency forbid: the previous run {previous.job_id} is {previous.state}"
        )
    return Admission(True, replace=previous.job_id)


def skipped(window: datetime, reason: str) -> HistoryEntry:
    """The history entry of a window that was due to fire and did not (concurrency, a job id
    taken by another job)."""
    return HistoryEntry(window=format_time(window), outcome=SKIPPED, reason=reason)


def fired(window: datetime, job_id: str) -> HistoryEntry:
    return HistoryEntry(window=format_time(window), outcome=FIRED, job=job_id)
