"""The fire as a pure decision: which windows fire, are skipped (paused) or missed, per
``--catchup``; how a plan is cut into transactions; the concurrency policy; what the state
records. Pure: "now" is given."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from zkstore.records.handle import Handle
from zkstore.schedules.due import (
    PAUSED,
    Decision,
    Plan,
    PreviousRun,
    admit,
    behind,
    entries,
    fired,
    plan,
    skipped,
    steps,
)
from zkstore.schedules.schedule_records import (
    FIRED,
    HISTORY_LIMIT,
    MISSED,
    SKIPPED,
    HistoryEntry,
    ScheduleSpec,
    ScheduleState,
)

pytestmark = pytest.mark.unit

HANDLE = Handle(
    uri="file:///s/c/schedules/hourly/definition/0123.pkl",
    size=120,
    sha256="ab" * 32,
    created="2026-11-24T00:00:00.000Z",
    writer="w-1",
    summary={"name": "hourly", "kind": "function", "max_attempts": 3},
)
START = datetime(2026, 11, 24, tzinfo=UTC)


def at(hours: float) -> datetime:
    return START + timedelta(hours=hours)


def spec(**changes: Any) -> ScheduleSpec:
    """Every hour on the hour from START; catchup latest, concurrency allow, grace 60 s."""
    values: dict[str, Any] = {
        "version": 3,
        "name": "hourly",
        "created": datetime(2026, 11, 23, 12, tzinfo=UTC),
        "definition": HANDLE,
        "cron": "0 * * * *",
        "start_at": START,
    }
    values.update(changes)
    made = ScheduleSpec(**values)
    assert made.problem() is None, made.problem()
    return made


def state(last: float | None = None, **changes: Any) -> ScheduleState:
    return ScheduleState(
        version=7,
        updated=START,
        last=None if last is None else at(last),
        **changes,
    )


def outcomes(decided: Plan, schedule: ScheduleSpec | None = None) -> list[tuple[float, str]]:
    """Each window's outcome, in hours from START (a row's windows listed one by one)."""
    timing = (schedule or spec()).timing()
    found = []
    for d in decided.decisions:
        windows = timing.between(d.window - timedelta(seconds=1), d.last, d.count)
        assert len(windows) == d.count and windows[-1] == d.last, d
        found += [((w - START).total_seconds() / 3600, d.outcome) for w in windows]
    return found


# -- on time, and the leader's usual loop ---------------------------------------------------------


def test_a_window_that_has_come_fires_once_and_the_next_one_is_named() -> None:
    decided = plan(spec(), state(last=0), at(1) + timedelta(seconds=2))
    assert outcomes(decided) == [(1, FIRED)]
    assert decided.next == at(2) and not decided.more
    assert plan(spec(), state(last=1), at(1) + timedelta(seconds=3)).decisions == ()


def test_nothing_is_due_before_the_first_window() -> None:
    decided = plan(spec(), state(), at(0) - timedelta(seconds=1))
    assert decided.decisions == () and decided.next == at(0)


def test_a_window_late_by_less_than_the_grace_fires_whatever_the_catchup() -> None:
    for catchup in ("none", "latest", "3", "all"):
        decided = plan(spec(catchup=catchup), state(last=0), at(1) + timedelta(seconds=59))
        assert outcomes(decided) == [(1, FIRED)], catchup


# -- windows that passed while nobody led ---------------------------------------------------------

OUTAGE_END = at(5) + timedelta(minutes=20)  # windows 1..5 passed; none is on time


@pytest.mark.parametrize(
    "catchup,expected",
    [
        ("none", [(1, MISSED), (2, MISSED), (3, MISSED), (4, MISSED), (5, MISSED)]),
        ("latest", [(1, MISSED), (2, MISSED), (3, MISSED), (4, MISSED), (5, FIRED)]),
        ("2", [(1, MISSED), (2, MISSED), (3, MISSED), (4, FIRED), (5, FIRED)]),
        ("all", [(1, FIRED), (2, FIRED), (3, FIRED), (4, FIRED), (5, FIRED)]),
    ],
)
def test_catchup_decides_the_late_windows(catchup: str, expected: list[tuple[int, str]]) -> None:
    decided = plan(spec(catchup=catchup), state(last=0), OUTAGE_END)
    assert outcomes(decided) == expected
    missed = [d for d in decided.decisions if d.outcome == MISSED]
    assert all(d.reason and "--catchup" in d.reason for d in missed)


def test_latest_counts_the_on_time_window_as_the_newest() -> None:
    """A leader back just after a window fires that one, not also the late one before it."""
    decided = plan(spec(catchup="latest"), state(last=0), at(3) + timedelta(seconds=10))
    assert outcomes(decided) == [(1, MISSED), (2, MISSED), (3, FIRED)]
    decided = plan(spec(catchup="2"), state(last=0), at(3) + timedelta(seconds=10))
    assert outcomes(decided) == [(1, MISSED), (2, FIRED), (3, FIRED)]


def test_a_new_schedule_with_a_start_in_the_past_catches_up_like_an_outage() -> None:
    decided = plan(spec(catchup="latest"), state(), at(2) + timedelta(minutes=5))
    assert outcomes(decided) == [(0, MISSED), (1, MISSED), (2, FIRED)]


# -- pauses ---------------------------------------------------------------------------------------


def test_windows_in_a_pause_are_skipped_and_never_caught_up() -> None:
    paused = spec(
        catchup="all",
        paused=False,
        paused_at=at(1) + timedelta(minutes=30),
        resumed_at=at(3) + timedelta(minutes=30),
    )
    decided = plan(paused, state(last=0), at(4) + timedelta(seconds=1))
    assert outcomes(decided) == [(1, FIRED), (2, SKIPPED), (3, SKIPPED), (4, FIRED)]
    assert decided.decisions[1].reason == PAUSED


def test_a_paused_schedule_records_its_windows_as_skipped_and_fires_none() -> None:
    paused = spec(paused=True, paused_at=at(0) + timedelta(minutes=1))
    decided = plan(paused, state(last=0), at(2) + timedelta(seconds=1))
    assert outcomes(decided) == [(1, SKIPPED), (2, SKIPPED)]
    assert decided.next == at(3)


# -- bounds on a plan -----------------------------------------------------------------------------


def test_a_backlog_is_fired_a_batch_at_a_time() -> None:
    first = plan(spec(catchup="all"), state(last=0), at(50), limit=20)
    assert [h for h, _ in outcomes(first)] == list(range(1, 21)) and first.more
    second = plan(spec(catchup="all"), state(last=20), at(50), limit=20)
    assert [h for h, _ in outcomes(second)] == list(range(21, 41)) and second.more
    third = plan(spec(catchup="all"), state(last=40), at(50), limit=20)
    assert [h for h, _ in outcomes(third)] == list(range(41, 51)) and not third.more


def test_a_long_outage_is_decided_in_one_plan_without_losing_the_newest() -> None:
    """A backlog of millions of windows is one row of missed windows, counted, and the newest N
    fired: nothing is stepped through."""
    every_second = spec(cron=None, every=1, catchup="3", grace=0)
    now = START + timedelta(days=40)
    decided = plan(every_second, state(), now)
    (missed, *fires) = decided.decisions
    assert (missed.outcome, missed.window, missed.through) == (
        MISSED,
        START,
        now - timedelta(seconds=3),
    )
    assert missed.count == 40 * 86400 - 2
    assert [(d.window, d.outcome) for d in fires] == [
        (now - timedelta(seconds=n), FIRED) for n in (2, 1, 0)
    ]
    assert not decided.more


def test_catchup_all_fires_the_newest_catchup_max_and_misses_the_rest() -> None:
    bounded = spec(catchup="all", catchup_max=5, grace=0)
    decided = plan(bounded, state(last=0), at(100) + timedelta(minutes=1), limit=100)
    assert outcomes(decided, bounded) == [(h, MISSED) for h in range(1, 96)] + [
        (h, FIRED) for h in range(96, 101)
    ]
    (row, *_) = decided.decisions
    assert row.count == 95 and row.reason is not None and "--catchup-max" in row.reason


def test_a_per_second_cron_behind_by_fifty_years_costs_what_a_minute_does() -> None:
    """The scan schedule of issue 44: a per-second cron from 1970, --catchup none. One plan
    decides 1.6 billion windows as one row; counted, not stepped (a unit test: it would take
    hours if it stepped)."""
    scan = spec(
        cron="* * * * * *", start_at=datetime(1970, 1, 1, tzinfo=UTC), catchup="none", grace=0
    )
    now = datetime(2020, 1, 1, 0, 0, 0, 500_000, tzinfo=UTC)
    (row,) = plan(scan, state(), now).decisions
    assert (row.outcome, row.count) == (MISSED, 1_577_836_801)
    assert (row.window, row.through) == (
        datetime(1970, 1, 1, tzinfo=UTC),
        now.replace(microsecond=0),
    )
    (entry,) = entries((row,))
    assert entry.count == row.count
    assert behind(scan, state(), now) == row.count
    assert behind(scan, state(last=(now - START).total_seconds() / 3600), now) == 0


def test_the_end_of_a_schedule_has_no_next_window() -> None:
    ending = spec(end_at=at(2))
    decided = plan(ending, state(last=0), at(5))
    assert [h for h, _ in outcomes(decided)] == [1] and decided.next is None


# -- steps and history ----------------------------------------------------------------------------


def test_steps_carry_each_fire_with_the_decisions_before_it() -> None:
    decided = Plan(
        (
            Decision(at(1), MISSED, "late"),
            Decision(at(2), MISSED, "late"),
            Decision(at(3), FIRED),
            Decision(at(4), SKIPPED, PAUSED),
            Decision(at(5), FIRED),
            Decision(at(6), SKIPPED, PAUSED),
        ),
        next=at(7),
    )
    found = steps(decided)
    assert [(len(s.before), s.fire) for s in found] == [(2, at(3)), (1, at(5)), (1, None)]
    assert [s.through for s in found] == [at(3), at(5), at(6)]


def test_rows_of_missed_windows_are_one_history_entry() -> None:
    decided = plan(spec(catchup="none"), state(last=0), OUTAGE_END)
    (entry,) = entries(decided.decisions)
    assert (entry.outcome, entry.count) == (MISSED, 5)
    assert (entry.window, entry.through) == (at(1), at(5))


def test_the_state_records_decisions_in_order_and_keeps_a_bounded_history() -> None:
    current = state(last=0)
    for hour in range(1, 120):
        decided = (
            (fired(at(hour), f"hourly-{hour}"),)
            if hour % 3
            else (skipped(at(hour), "--concurrency forbid: the previous run is running"),)
        )
        current = current.recording(decided, at(hour))
    assert current.last == at(119)
    assert current.last_run == "hourly-119"
    assert (current.fired, current.skipped, current.missed) == (80, 39, 0)
    assert len(current.history) == HISTORY_LIMIT
    assert current.history[-1] == HistoryEntry(at(119), FIRED, job="hourly-119")


def test_a_reason_is_cut_and_cleaned_to_fit() -> None:
    entry = HistoryEntry(START, SKIPPED, reason="a\x1b[2J" + "x" * 1000)
    assert entry.reason is not None and len(entry.reason) <= 300 and "\x1b" not in entry.reason


# -- concurrency ----------------------------------------------------------------------------------

LIVE = PreviousRun("hourly-20261124T000000Z", live=True, state="not ended yet")
ENDED = replace(LIVE, live=False, state="ended")


def test_allow_fires_whatever_the_previous_run_does() -> None:
    assert admit("allow", LIVE).fire and admit("allow", None).fire


def test_forbid_skips_while_the_previous_run_lives_and_says_which() -> None:
    verdict = admit("forbid", LIVE)
    assert not verdict.fire and verdict.reason is not None and LIVE.job_id in verdict.reason
    assert admit("forbid", ENDED).fire and admit("forbid", None).fire


def test_replace_fires_after_cancelling_the_previous_run() -> None:
    verdict = admit("replace", LIVE)
    assert verdict.fire and verdict.replace == LIVE.job_id
    assert admit("replace", ENDED) == admit("allow", None)
