"""Counting a schedule's windows without stepping through them (zkstore.schedules.counting):
the counts, the newest window of a range and the split before the newest N agree with the
forward iteration that fires (cronsim), in UTC and across daylight-saving changes, for
expressions read on real time and on the wall clock. Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import examples
from zkstore.schedules.counting import count, newest_until, shortest_gap, split, transitions
from zkstore.schedules.timing import Timing, parse_cron, parse_timezone

pytestmark = pytest.mark.unit

EXPRESSIONS = [
    "*/7 * * * * *",
    "*/20 * * * * *",
    "0 * * * *",
    "30 * * * *",
    "*/15 * * * *",
    "0 */2 * * *",
    "30 2 * * *",
    "45 2 * * *",
    "0,30 2 * * *",
    "0 2,3 * * *",
    "15,45 1-3 * * *",
    "0 1-4 * * *",
    "59 1 * * *",
    "0 0 L * *",
    "0 0 LW * *",
    "0 12 * * 1-5",
    "0 9 1,15 * MON",
    "5 4 * * SUN#2",
    "0 0 * * 5L",
    "0 1 29 2 *",
]
#: zones whose offsets change by whole hours at a whole hour, and those that do not (Lord Howe
#: Island by half an hour, Chatham at 02:45, Troll by two hours)
ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "America/Sao_Paulo",
    "Africa/Casablanca",
    "Asia/Kolkata",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Antarctica/Troll",
]
CHANGES = {
    name: transitions(
        parse_timezone(name), datetime(2012, 1, 1, tzinfo=UTC), datetime(2028, 1, 1, tzinfo=UTC)
    )
    for name in ZONES
}
SPANS = [1, 59, 3600, 4 * 3600, 86400, 8 * 86400, 45 * 86400]
#: the per-second expressions are enumerated over shorter spans (the test's own cost)
SHORT = 86400


def timing(expression: str, zone: str, start: datetime) -> Timing:
    return Timing(start=start, cron=parse_cron(expression), zone=parse_timezone(zone))


@pytest.mark.property
@settings(max_examples=examples(2000), deadline=None, derandomize=True)
@given(
    expression=st.sampled_from(EXPRESSIONS),
    zone=st.sampled_from(ZONES),
    near=st.integers(0, 10_000),
    shift=st.integers(-4 * 86400, 4 * 86400),
    span=st.sampled_from(SPANS),
    within=st.floats(0.0, 1.0),
)
def test_counts_agree_with_the_iteration_that_fires(
    expression: str, zone: str, near: int, shift: int, span: int, within: float
) -> None:
    """Ranges around daylight-saving changes (or anywhere, in a zone without them)."""
    changes = CHANGES[zone] or [datetime(2020, 6, 1, tzinfo=UTC)]
    anchor = changes[near % len(changes)]
    after = anchor + timedelta(seconds=shift)
    if len(expression.split()) == 6:
        span = min(span, SHORT)
    until = after + timedelta(seconds=int(span * within))
    windows = timing(expression, zone, anchor - timedelta(days=5))
    found = windows.between(after, until, 10**7)
    assert count(windows, after, until) == len(found)
    assert newest_until(windows, until, after) == (found[-1] if found else None)
    for newest in (1, 3):
        edge = split(windows, after, until, newest)
        assert [w for w in found if w > edge] == found[-newest:]


def test_intervals_are_counted_arithmetically() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    every = Timing(start=start, every=90, end=start + timedelta(hours=1))
    assert count(every, None, start) == 1
    assert count(every, start, start + timedelta(seconds=179)) == 1
    assert count(every, None, start + timedelta(days=3)) == 40  # the end bounds it
    assert newest_until(every, start + timedelta(seconds=200)) == start + timedelta(seconds=180)
    assert newest_until(every, start - timedelta(seconds=1)) is None
    # the newest two are 810 and 900: the split is the window before them
    assert split(every, start - timedelta(seconds=1), start + timedelta(seconds=900), 2) == (
        start + timedelta(seconds=720)
    )


def test_a_split_leaves_a_pause_out() -> None:
    """The newest N windows outside a span (a pause) lie after the split."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    every = Timing(start=start, every=10)
    pause = (start + timedelta(seconds=55), start + timedelta(seconds=95))  # 60..90 skipped
    edge = split(every, start, start + timedelta(seconds=100), 3, pause)
    assert edge == start + timedelta(seconds=30)  # 40, 50, then 100 after the pause


def test_fifty_years_of_seconds_are_counted_without_stepping() -> None:
    every_second = timing("* * * * * *", "Europe/Berlin", datetime(1970, 1, 1, tzinfo=UTC))
    until = datetime(2020, 1, 1, tzinfo=UTC)
    # the same instants in UTC: as many seconds, an hour that does not exist and one that
    # happens twice every year cancel out
    assert count(every_second, None, until) == int((until - every_second.start).total_seconds()) + 1
    assert newest_until(every_second, until) == until


@pytest.mark.parametrize(
    "expression,seconds",
    [
        ("* * * * * *", 1),
        ("*/5 * * * * *", 5),
        ("0,30 * * * * *", 30),
        ("* * * * *", 60),
        ("0,59 * * * *", 60),
        ("0 * * * *", 3600),
        ("0 9-17 * * 1-5", 3600),
        ("0 2 * * *", 86400),
        ("@daily", 86400),
    ],
)
def test_the_shortest_gap_of_an_expression(expression: str, seconds: int) -> None:
    assert shortest_gap(timing(expression, "UTC", datetime(2026, 1, 1, tzinfo=UTC))) == seconds
