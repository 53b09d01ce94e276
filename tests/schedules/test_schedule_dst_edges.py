"""Schedules at daylight-saving changes in zones with unusual offsets (issue 60.2): every window
exactly once across a change, forwards and backwards, checked against an independent
computation of the expected windows (each UTC minute, or second, of the range shown on the wall
clock by zoneinfo and matched by a field matcher of this module's own, not cronsim's).

Lord Howe Island moves its clocks by half an hour (02:00 -> 02:30 in October, 02:00 -> 01:30 in
April), Chatham at 02:45 local, Troll by two hours, Casablanca back for Ramadan, Dublin's
summer time is its standard time (a negative offset in the zone data), Adelaide and St John's
sit at half hours. Pure."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from zkstore.records.handle import Handle
from zkstore.schedules.counting import count, newest_until
from zkstore.schedules.due import entries, fired, plan, steps
from zkstore.schedules.runs import run_id
from zkstore.schedules.schedule_records import ScheduleSpec, ScheduleState
from zkstore.schedules.timing import Timing, format_time, parse_cron, parse_timezone

pytestmark = pytest.mark.unit

ZONES = [
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Antarctica/Troll",
    "Africa/Casablanca",
    "Europe/Dublin",
    "Australia/Adelaide",
    "America/St_Johns",
    "Europe/Berlin",
]
#: read on real time: a window at every instant whose wall-clock time matches
REAL_TIME = [
    "*/15 * * * *",
    "0 * * * *",
    "30 * * * *",
    "45 * * * *",
    "15,45 * * * *",
    "*/7 * * * *",
    "0 */2 * * *",
    "* 2 * * *",
    "0 30 * * * *",
]
#: read on the wall clock (minute and hour fixed): each wall-clock time once, at its first
#: occurrence; those in a spring gap at the gap's end, as one window
WALL_CLOCK = [
    "30 2 * * *",
    "15 2 * * *",
    "45 1 * * *",
    "50 2 * * *",
    "0,30 2 * * *",
    "15,45 1-3 * * *",
    "0 1-3 * * *",
    "0 2,3 * * *",
]
#: the range looked at around each change
AROUND = timedelta(hours=3)
HANDLE = Handle(
    uri="file:///s/c/schedules/edges/definition/0123.pkl",
    size=120,
    sha256="ab" * 32,
    created="2024-06-01T00:00:00.000Z",
    writer="w-1",
    summary={"name": "edges", "kind": "function", "max_attempts": 3},
)


def _changes(zone: str) -> list[datetime]:
    """The offset changes of 2025 and 2026 (found by zoneinfo hour by hour, then minute by
    minute: independent of the product's search)."""
    tz = ZoneInfo(zone)
    found: list[datetime] = []
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    while moment < datetime(2027, 1, 1, tzinfo=UTC):
        step = moment + timedelta(hours=1)
        if moment.astimezone(tz).utcoffset() != step.astimezone(tz).utcoffset():
            minute = moment
            while minute.astimezone(tz).utcoffset() == moment.astimezone(tz).utcoffset():
                minute += timedelta(minutes=1)
            found.append(minute)
        moment = step
    return found


CASES = [
    (zone, change)
    for zone in ZONES
    for change in _changes(zone)
    if zone not in ("Africa/Casablanca", "Europe/Dublin") or change.year == 2026
]


def _direction(zone: str, change: datetime) -> str:
    tz = ZoneInfo(zone)
    before = (change - timedelta(seconds=1)).astimezone(tz).utcoffset()
    after = change.astimezone(tz).utcoffset()
    assert before is not None and after is not None
    return "forward" if after > before else "back"


def _case_id(case: tuple[str, datetime]) -> str:
    zone, change = case
    return f"{zone}-{change:%Y%m%dT%H%M}-{_direction(zone, change)}"


@dataclass(frozen=True)
class Expression:
    """A cron expression matched by this module alone: ``*``, ``*/n``, ``a``, ``a-b``,
    ``a-b/n`` and lists of these, in the second, minute and hour fields (days and months
    ``*``)."""

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    step: timedelta
    wall_clock: bool

    @classmethod
    def parse(cls, text: str) -> Expression:
        fields = text.split()
        six = len(fields) == 6
        second, minute, hour = (fields[0], fields[1], fields[2]) if six else ("0", *fields[:2])
        assert fields[-3:] == ["*", "*", "*"], "days, months and weekdays are not matched here"
        return cls(
            seconds=_values(second, 60),
            minutes=_values(minute, 60),
            hours=_values(hour, 24),
            step=timedelta(seconds=1 if six else 60),
            wall_clock=not six and not minute.startswith("*") and not hour.startswith("*"),
        )

    def matches(self, wall: datetime) -> bool:
        return (
            wall.second in self.seconds and wall.minute in self.minutes and wall.hour in self.hours
        )


def _values(field: str, size: int) -> frozenset[int]:
    found: set[int] = set()
    for term in field.split(","):
        span, _, every = term.partition("/")
        if span == "*":
            low, high = 0, size - 1
        elif "-" in span:
            low, high = (int(part) for part in span.split("-"))
        else:
            low = high = int(span)
        found.update(range(low, high + 1, int(every) if every else 1))
    return frozenset(found)


def expected(text: str, zone: str, low: datetime, high: datetime) -> list[datetime]:
    """The windows ``w`` with ``low < w <= high``, by enumeration: on real time, every instant
    whose wall-clock time (zoneinfo's, at that instant) matches; on the wall clock, each
    matching wall-clock time at its first occurrence, and those that do not exist (a spring
    gap) at the instant the gap ends."""
    expression = Expression.parse(text)
    tz = ZoneInfo(zone)
    found: list[datetime] = []
    moment = low + expression.step
    while moment <= high:
        local = moment.astimezone(tz)
        wall = local.replace(tzinfo=None)
        if not expression.wall_clock:
            hit = expression.matches(wall)
        else:
            hit = expression.matches(wall) and not local.fold
            before = (moment - timedelta(seconds=1)).astimezone(tz).utcoffset()
            after = local.utcoffset()
            assert before is not None and after is not None
            skipped = (moment + before).replace(tzinfo=None)  # the gap's wall-clock times
            while after > before and skipped < wall:
                hit = hit or expression.matches(skipped)
                skipped += expression.step
        if hit:
            found.append(moment)
        moment += expression.step
    return found


@functools.cache
def _timing(text: str, zone: str) -> Timing:
    return Timing(
        start=datetime(2024, 6, 1, tzinfo=UTC), cron=parse_cron(text), zone=parse_timezone(zone)
    )


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_every_window_once_across_the_change(case: tuple[str, datetime]) -> None:
    """Forwards and backwards, on real time and on the wall clock: the windows that fire, their
    count and the newest of the range are the expected ones."""
    zone, change = case
    low, high = change - AROUND, change + AROUND
    for text in REAL_TIME + WALL_CLOCK:
        timing = _timing(text, zone)
        want = expected(text, zone, low, high)
        got = timing.between(low, high, 10_000)
        assert got == want, (text, [format_time(w) for w in sorted(set(got) ^ set(want))])
        assert count(timing, low, high) == len(want), text
        assert newest_until(timing, high, low) == (want[-1] if want else None), text


def test_lord_howe_half_hour_windows_are_named() -> None:
    """The windows cronsim's own stepping lost, by name: 02:00 of the April morning happens
    once, at 02:00 +10:30 (the +11:00 one never comes), and 01:30 twice; in October the
    clocks go from 02:00 to 02:30, and 02:30 +11:00 is a window."""
    april = _timing("0 */2 * * *", "Australia/Lord_Howe")
    two = april.next_after(datetime(2026, 4, 4, 14, 0, tzinfo=UTC))
    assert two is not None and format_time(two) == "2026-04-04T15:30:00Z"
    half_past = _timing("30 * * * *", "Australia/Lord_Howe")
    around = half_past.between(
        datetime(2026, 4, 4, 14, 0, tzinfo=UTC), datetime(2026, 4, 4, 16, 0, tzinfo=UTC), 10
    )
    assert [format_time(w) for w in around] == [
        "2026-04-04T14:30:00Z",  # 01:30 +11:00
        "2026-04-04T15:00:00Z",  # 01:30 +10:30, the second time
        "2026-04-04T16:00:00Z",  # 02:30 +10:30
    ]
    october = half_past.between(
        datetime(2026, 10, 3, 14, 0, tzinfo=UTC), datetime(2026, 10, 3, 16, 0, tzinfo=UTC), 10
    )
    assert [format_time(w) for w in october] == [
        "2026-10-03T15:00:00Z",  # 01:30 +10:30
        "2026-10-03T15:30:00Z",  # 02:30 +11:00, the first instant after the change
    ]


@pytest.mark.parametrize("text", ["*/15 * * * *", "0 */2 * * *", "30 * * * *", "15,45 1-3 * * *"])
@pytest.mark.parametrize("zone", ["Australia/Lord_Howe", "Pacific/Chatham"])
def test_a_leader_deciding_minute_by_minute_fires_each_window_once(text: str, zone: str) -> None:
    """The decisions that fire (plan, steps, the state moved by each), a leader looking once a
    minute through both of the year's changes: each expected window fired once, none else."""
    windows = _timing(text, zone)
    schedule = ScheduleSpec(
        version=1,
        name="edges",
        created=datetime(2024, 6, 1, tzinfo=UTC),
        definition=HANDLE,
        cron=windows.cron,
        timezone=zone,
        start_at=windows.start,
    )
    assert schedule.problem() is None, schedule.problem()
    for change in _changes(zone)[2:4]:  # 2026's two
        low, high = change - AROUND, change + AROUND
        current = ScheduleState(version=1, updated=low, last=low)
        fired_windows: list[datetime] = []
        now = low
        while now <= high:
            for step in steps(plan(schedule, current, now)):
                decisions = entries(step.before)
                if step.fire is not None:
                    fired_windows.append(step.fire)
                    decisions = (*decisions, fired(step.fire, run_id("edges", step.fire)))
                current = current.recording(decisions, now)
            now += timedelta(minutes=1)
        assert fired_windows == expected(text, zone, low, high), _case_id((zone, change))
