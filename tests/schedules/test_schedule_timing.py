"""A schedule's windows: cron expressions in a time zone (at the daylight-saving changes) and
intervals, their bounds, and the run ids they make. Pure: every "now" is given."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import examples
from zkstore.errors import ConfigError
from zkstore.schedules.runs import run_id, window_of
from zkstore.schedules.timing import (
    Timing,
    format_time,
    parse_cron,
    parse_every,
    parse_moment,
    parse_timezone,
)

pytestmark = pytest.mark.unit

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def cron_windows(expr: str, zone: ZoneInfo, after: str, until: str) -> list[str]:
    timing = Timing(start=utc("2026-01-01T00:00:00"), cron=parse_cron(expr), zone=zone)
    return [format_time(w) for w in timing.between(utc(after), utc(until), 1000)]


# -- daylight-saving changes (Berlin: 2026-03-29 02:00 CET -> 03:00 CEST;
#    2026-10-25 03:00 CEST -> 02:00 CET) ---------------------------------------------------------


def test_a_wall_clock_time_in_the_spring_gap_fires_once_at_the_end_of_the_gap() -> None:
    """02:30 does not exist on 29 March in Berlin: the window is 03:00 CEST (01:00 UTC), once;
    the days around it are 02:30 local as usual."""
    assert cron_windows("30 2 * * *", BERLIN, "2026-03-27T12:00", "2026-03-30T12:00") == [
        "2026-03-28T01:30:00Z",  # 02:30 CET
        "2026-03-29T01:00:00Z",  # 03:00 CEST: the first moment after the gap
        "2026-03-30T00:30:00Z",  # 02:30 CEST
    ]


def test_a_wall_clock_time_in_the_repeated_autumn_hour_fires_once_at_its_first_occurrence() -> None:
    assert cron_windows("30 2 * * *", BERLIN, "2026-10-24T12:00", "2026-10-26T12:00") == [
        "2026-10-25T00:30:00Z",  # 02:30 CEST; not again at 02:30 CET (01:30 UTC)
        "2026-10-26T01:30:00Z",
    ]


def test_an_hourly_expression_runs_on_real_time_across_both_changes() -> None:
    """None in the hour that does not exist, two in the hour that happens twice: every window
    is an hour after the previous one."""
    spring = cron_windows("0 * * * *", BERLIN, "2026-03-28T23:30", "2026-03-29T03:30")
    assert spring == [
        "2026-03-29T00:00:00Z",  # 01:00 CET
        "2026-03-29T01:00:00Z",  # 03:00 CEST (02:00 does not exist)
        "2026-03-29T02:00:00Z",
        "2026-03-29T03:00:00Z",
    ]
    autumn = cron_windows("0 * * * *", BERLIN, "2026-10-24T22:30", "2026-10-25T02:30")
    assert autumn == [
        "2026-10-24T23:00:00Z",  # 01:00 CEST
        "2026-10-25T00:00:00Z",  # 02:00 CEST
        "2026-10-25T01:00:00Z",  # 02:00 CET: the hour again
        "2026-10-25T02:00:00Z",  # 03:00 CET
    ]


def test_every_few_minutes_keeps_real_intervals_across_the_autumn_change() -> None:
    found = cron_windows("*/30 * * * *", NEW_YORK, "2026-11-01T04:50", "2026-11-01T07:10")
    # New York: 2026-11-01 02:00 EDT -> 01:00 EST; 01:00 and 01:30 happen twice
    assert found == [
        "2026-11-01T05:00:00Z",  # 01:00 EDT
        "2026-11-01T05:30:00Z",  # 01:30 EDT
        "2026-11-01T06:00:00Z",  # 01:00 EST
        "2026-11-01T06:30:00Z",  # 01:30 EST
        "2026-11-01T07:00:00Z",  # 02:00 EST
    ]


def test_a_fixed_hour_range_in_the_spring_gap_fires_once_at_its_end() -> None:
    found = cron_windows("0 2-3 * * *", NEW_YORK, "2026-03-08T00:00", "2026-03-08T12:00")
    # New York: 2026-03-08 02:00 EST -> 03:00 EDT: the 02:00 and the 03:00 windows are one
    assert found == ["2026-03-08T07:00:00Z"]


def test_every_counts_real_seconds_whatever_the_time_zone() -> None:
    timing = Timing(start=utc("2026-10-24T23:00:00"), every=3600, zone=BERLIN)
    found = timing.between(None, utc("2026-10-25T02:00:00"), 10)
    assert [format_time(w) for w in found] == [
        "2026-10-24T23:00:00Z",
        "2026-10-25T00:00:00Z",
        "2026-10-25T01:00:00Z",
        "2026-10-25T02:00:00Z",
    ]


@pytest.mark.parametrize("expr", ["0 * * * *", "*/7 * * * *", "30 2 * * *", "15 1-3 * * *"])
def test_a_year_of_windows_in_a_dst_zone_is_strictly_increasing_with_distinct_run_ids(
    expr: str,
) -> None:
    timing = Timing(start=utc("2026-01-01T00:00:00"), cron=parse_cron(expr), zone=BERLIN)
    found = timing.between(None, utc("2027-01-01T00:00:00"), 200_000)
    assert all(a < b for a, b in itertools.pairwise(found))
    ids = [run_id("nightly", w) for w in found]
    assert len(set(ids)) == len(ids)
    assert [window_of("nightly", i) for i in ids] == found


# -- bounds and anchors ---------------------------------------------------------------------------


def test_start_is_inclusive_end_is_exclusive() -> None:
    timing = Timing(
        start=utc("2026-11-24T02:00:00"),
        cron=parse_cron("0 2 * * *"),
        end=utc("2026-11-27T02:00:00"),
    )
    found = timing.between(None, utc("2026-12-31T00:00:00"), 100)
    assert [format_time(w) for w in found] == [
        "2026-11-24T02:00:00Z",
        "2026-11-25T02:00:00Z",
        "2026-11-26T02:00:00Z",
    ]
    assert timing.next_after(utc("2026-11-26T02:00:00")) is None


def test_every_windows_are_anchored_at_the_start() -> None:
    timing = Timing(start=utc("2026-11-24T10:00:07"), every=600)
    assert timing.next_after(utc("2026-11-24T09:00:00")) == utc("2026-11-24T10:00:07")
    assert timing.next_after(utc("2026-11-24T10:00:07")) == utc("2026-11-24T10:10:07")
    assert timing.next_after(utc("2026-11-24T10:25:00")) == utc("2026-11-24T10:30:07")
    assert timing.between(utc("2026-11-24T10:00:07"), utc("2026-11-24T11:00:06"), 3) == [
        utc("2026-11-24T10:10:07"),
        utc("2026-11-24T10:20:07"),
        utc("2026-11-24T10:30:07"),
    ]


def test_a_cron_schedule_fires_nothing_before_its_start() -> None:
    timing = Timing(start=utc("2026-11-24T10:00:01"), cron=parse_cron("0 10 * * *"))
    assert timing.next_after(utc("2026-11-24T00:00:00")) == utc("2026-11-25T10:00:00")


def test_six_fields_have_seconds_first() -> None:
    timing = Timing(start=utc("2026-11-24T10:00:00"), cron=parse_cron("*/20 * * * * *"))
    found = timing.between(None, utc("2026-11-24T10:01:00"), 10)
    assert [w.second for w in found] == [0, 20, 40, 0]


# -- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given,normal",
    [
        ("30 2 * * *", "30 2 * * *"),
        ("  30   2 * *  * ", "30 2 * * *"),
        ("@daily", "0 0 * * *"),
        ("@HOURLY", "0 * * * *"),
        ("0 9 * * MON-FRI", "0 9 * * MON-FRI"),
        ("0 0 L * *", "0 0 L * *"),
    ],
)
def test_cron_expressions_are_normalized(given: str, normal: str) -> None:
    assert parse_cron(given) == normal


@pytest.mark.parametrize(
    "bad", ["", "* * * *", "61 * * * *", "0 0 31 2 *", "a b c d e", "*/0 * * * *", "x" * 201]
)
def test_bad_cron_expressions_are_usage_errors(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_cron(bad)


@pytest.mark.property
@settings(max_examples=examples(500), deadline=None, derandomize=True)
@given(
    st.lists(
        st.text(alphabet="0123456789*/,-LW#?ABCDEFJMNOPRSTUVYHZ@ ", max_size=8),
        min_size=0,
        max_size=7,
    ).map(" ".join)
)
def test_any_cron_text_parses_or_is_a_usage_error(text: str) -> None:
    try:
        normal = parse_cron(text)
    except ConfigError:
        return
    Timing(start=utc("2026-01-01T00:00:00"), cron=normal).next_after(utc("2026-06-01T00:00:00"))


@pytest.mark.parametrize(
    "text,seconds", [("90", 90), ("90s", 90), ("10m", 600), ("2h", 7200), ("1d", 86400)]
)
def test_every_durations(text: str, seconds: int) -> None:
    assert parse_every(text) == seconds
    assert parse_every("1h30m") == 5400


@pytest.mark.parametrize("bad", ["0", "0s", "1.5s", "", "m", "-5s", "400d", "1x", "5 m s"])
def test_bad_durations_are_usage_errors(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_every(bad)


@pytest.mark.parametrize("bad", ["Mars/Olympus", "../../etc/passwd", "/etc/localtime", "", "a b"])
def test_unknown_time_zones_are_usage_errors(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_timezone(bad)


def test_moments_without_an_offset_are_wall_clock_times_of_the_schedule() -> None:
    assert parse_moment("2026-11-24T02:00", BERLIN) == utc("2026-11-24T01:00:00")
    assert parse_moment("2026-11-24T02:00:00+00:00", BERLIN) == utc("2026-11-24T02:00:00")
    assert parse_moment("2026-11-24T02:00:00.2Z", BERLIN) == utc("2026-11-24T02:00:01")
    # the repeated hour: its first occurrence (summer time)
    assert parse_moment("2026-10-25T02:30", BERLIN) == utc("2026-10-25T00:30:00")
    with pytest.raises(ConfigError, match="does not exist"):
        parse_moment("2026-03-29T02:30", BERLIN)
    with pytest.raises(ConfigError):
        parse_moment("tomorrow", BERLIN)


def test_run_ids_are_valid_job_ids_and_name_their_window() -> None:
    window = utc("2026-11-24T02:00:00")
    assert run_id("nightly", window) == "nightly-20261124T020000Z"
    assert window_of("nightly", "nightly-20261124T020000Z") == window
    assert window_of("nightly", "nightly-x") is None
    assert window_of("nightly", "other-20261124T020000Z") is None
    assert window_of("night", "nightly-20261124T020000Z") is None
    with pytest.raises(ConfigError):
        run_id("n" * 101, window)
    with pytest.raises(ValueError):
        run_id("nightly", window + timedelta(milliseconds=5))
    assert len(run_id("n" * 100, window)) <= 128
