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

A plan is bounded whatever the backlog (invariant 15): the windows it does not fire are decided
as rows (the first, the last, how many) counted arithmetically (:mod:`zkstore.schedules.counting`:
a per-second schedule nobody led for 50 years costs what one behind by a minute does), never
stepped through; ``--catchup all`` fires the newest ``--catchup-max`` of them at most (the older
ones are missed, with why); and a plan fires at most ``limit`` windows (the leader's budget of a
pass, shared by every schedule), its ``more`` saying to plan again once its steps are committed.
What is left is the schedule's backlog: :func:`behind` counts it.

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

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from zkstore.records.record import MAX_FIELD_INT
from zkstore.schedules.counting import count, newest_until, split
from zkstore.schedules.schedule_records import (
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
from zkstore.schedules.timing import ONE_SECOND, Timing, ceil_second

__all__ = [
    "FIRE_BATCH",
    "PAUSED",
    "Admission",
    "Decision",
    "Plan",
    "PreviousRun",
    "Span",
    "Step",
    "admit",
    "behind",
    "entries",
    "fired",
    "plan",
    "skipped",
    "steps",
]

#: Windows fired by one plan at most, unless the caller gives its own budget: a backlog is fired
#: a batch at a time, so that the leader's loop goes on between batches.
FIRE_BATCH = 20
PAUSED = "paused"
#: a span of instants ``(first, last]``
Span = tuple[datetime, datetime]


@dataclass(frozen=True)
class Decision:
    """What becomes of one window: FIRED (to be fired), SKIPPED or MISSED, with why; or of a
    row of ``count`` windows in a row, ``window`` to ``through``, that fire none."""

    window: datetime
    outcome: str
    reason: str | None = None
    through: datetime | None = None
    count: int = 1

    @property
    def last(self) -> datetime:
        return self.through if self.through is not None else self.window


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
        return self.fire if self.fire is not None else self.before[-1].last


def plan(
    spec: ScheduleSpec,
    state: ScheduleState,
    now: datetime,
    *,
    limit: int = FIRE_BATCH,
) -> Plan:
    """Decide the windows of ``spec`` after ``state.last`` up to ``now`` (see the module)."""
    timing = spec.timing()
    low = _low(timing, state)
    high = now.replace(microsecond=0)
    pause = _pause(spec)
    due = _due(timing, low, high, pause)
    if due == 0 and count(timing, low, high) == 0:
        return Plan((), timing.next_after(now), False)
    keep = catchup_count(spec.catchup)
    limit_all = keep is None
    if keep is None:
        keep = spec.catchup_limit
    on_time_from = max(low, ceil_second(now - timedelta(seconds=spec.grace)) - ONE_SECOND)
    newest = min(due, max(keep, _due(timing, on_time_from, high, pause)))
    edge = split(timing, low, high, newest, pause)
    bounded = limit_all and due > keep

    def missed(window: datetime) -> str:
        return _missed_reason(spec, now - window, bounded)

    decisions = _rows(timing, low, edge, pause, missed)
    more = False
    fires = 0
    cursor = edge
    while True:
        window = next(iter(timing.after(cursor)), None)
        if window is None or window > high:
            break
        if pause is not None and pause[0] < window <= pause[1]:
            row = _row(timing, window - ONE_SECOND, min(high, pause[1]), SKIPPED)
            assert row is not None
            decisions.append(row)
            cursor = row.last
            continue
        if fires >= limit:
            more = True
            break
        decisions.append(Decision(window, FIRED))
        fires += 1
        cursor = window
    return Plan(tuple(decisions), timing.next_after(now), more)


def behind(spec: ScheduleSpec, state: ScheduleState, now: datetime) -> int:
    """The schedule's backlog: its windows up to ``now`` that no leader decided yet (0 for a
    leader that keeps up; more while one works a catch-up off, or while nobody leads)."""
    timing = spec.timing()
    return count(timing, _low(timing, state), now)


def _low(timing: Timing, state: ScheduleState) -> datetime:
    last = state.last
    return timing.start - ONE_SECOND if last is None else max(last, timing.start - ONE_SECOND)


def _pause(spec: ScheduleSpec) -> Span | None:
    """The windows the schedule's pause skips, as a span (see ``paused_during``)."""
    if spec.paused_at is None:
        return None
    first = ceil_second(spec.paused_at) - ONE_SECOND
    if spec.paused:
        return first, datetime.max.replace(tzinfo=first.tzinfo)
    if spec.resumed_at is None:
        return None
    return first, ceil_second(spec.resumed_at) - ONE_SECOND


def _due(timing: Timing, low: datetime, high: datetime, pause: Span | None) -> int:
    """Windows in ``(low, high]`` outside the pause."""
    found = count(timing, low, high)
    if pause is not None and found:
        found -= count(timing, max(low, pause[0]), min(high, pause[1]))
    return found


def _rows(
    timing: Timing,
    low: datetime,
    high: datetime,
    pause: Span | None,
    missed: Callable[[datetime], str],
) -> list[Decision]:
    """The windows of ``(low, high]``, none fired: missed (``missed`` says why, from the first
    window), but the paused ones skipped; a row for each run of them."""
    spans = [(low, high, MISSED)]
    if pause is not None and pause[0] < high and low < pause[1]:
        spans = [
            (low, min(high, pause[0]), MISSED),
            (max(low, pause[0]), min(high, pause[1]), SKIPPED),
            (max(low, pause[1]), high, MISSED),
        ]
    found = [_row(timing, first, last, outcome) for first, last, outcome in spans]
    return [
        replace(row, reason=missed(row.window)) if row.outcome == MISSED else row
        for row in found
        if row is not None
    ]


def _row(timing: Timing, low: datetime, high: datetime, outcome: str) -> Decision | None:
    """The windows of ``(low, high]`` as one decision, skipped ones paused (None: there are
    none). Counted, never stepped through."""
    if high <= low:
        return None
    number = count(timing, low, high)
    first = next(iter(timing.after(low)), None)
    last = newest_until(timing, high, low)
    if number == 0 or first is None or last is None or first > high:
        return None
    reason = PAUSED if outcome == SKIPPED else None
    return Decision(first, outcome, reason, last if last != first else None, number)


def _missed_reason(spec: ScheduleSpec, late: timedelta, bounded: bool) -> str:
    why = f"--catchup {spec.catchup} does not run it"
    if bounded:
        why = f"--catchup all runs the newest {spec.catchup_limit} only (--catchup-max)"
    return (
        f"not fired within {spec.grace} s of its time (decided {late.total_seconds():.0f} s "
        f"after it: no leader then?); {why}"
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
    same outcome and reason is one entry with a count (at most a record's biggest number)."""
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
                through=decision.last,
                count=min(MAX_FIELD_INT, previous.count + decision.count),
            )
        else:
            found.append(
                HistoryEntry(
                    window=decision.window,
                    outcome=decision.outcome,
                    reason=decision.reason,
                    through=decision.through,
                    count=min(MAX_FIELD_INT, decision.count),
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
    return HistoryEntry(window=window, outcome=SKIPPED, reason=reason)


def fired(window: datetime, job_id: str) -> HistoryEntry:
    return HistoryEntry(window=window, outcome=FIRED, job=job_id)
