"""Issue 49: ``--every`` windows aligned to the interval, a chained pair judged at create, and
``schedules update``'s pure parts: the spec as changed, what it says changed, and the changes
kept in the spec (strictly parsed, bounded)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import click
import pytest

from recovery.cli.schedules.schedule_commands import (
    WHEN_KEYS,
    changed_spec,
    interval_note,
    new_spec,
)
from recovery.cli.types import Duration
from zkstore.errors import ConfigError, CorruptRecord
from zkstore.records.handle import Handle, PayloadRef
from zkstore.records.record import MAX_RECORD_BYTES
from zkstore.records.strict import parse_time
from zkstore.schedules.schedule_records import CHANGES_LIMIT, MAX_REASON_CHARS, Change, ScheduleSpec
from zkstore.schedules.timing import EPOCH, Timing, aligned_start, format_time, shares_windows
from zkstore.schedules.update import describe

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 28, 1, 0, 12, 345000, tzinfo=UTC)


def when(**given: object) -> dict[str, object]:
    """The options as ``create`` gives them (its defaults), changed by ``given``."""
    defaults = {"timezone": "UTC", "concurrency": "allow", "catchup": "latest"}
    return {key: given.get(key, defaults.get(key)) for key in WHEN_KEYS}


def change(**given: object) -> dict[str, object]:
    """The options as ``update`` gives them: None, not given."""
    return {key: given.get(key) for key in WHEN_KEYS}


def spec(**fields: object) -> ScheduleSpec:
    ref = PayloadRef(uri="file:///s/d.pkl", size=1, sha256="a" * 64)
    handle = Handle.for_payload(ref, "w", {"max_attempts": 3, "max_lost": 10})
    base = new_spec("tick", NOW, **{**when(every="15s", timezone="UTC"), **fields})
    return replace(base, definition=handle)


@pytest.mark.parametrize(
    ("every", "first"),
    [
        (15, datetime(2026, 11, 28, 1, 0, 15, tzinfo=UTC)),
        (60, datetime(2026, 11, 28, 1, 1, tzinfo=UTC)),
        (86400, datetime(2026, 11, 29, tzinfo=UTC)),
        (7, EPOCH + timedelta(seconds=(int(NOW.timestamp()) // 7 + 1) * 7)),
    ],
)
def test_an_interval_starts_at_its_next_multiple_since_the_epoch(
    every: int, first: datetime
) -> None:
    assert aligned_start(every, NOW) == first
    assert aligned_start(every, first) == first + timedelta(seconds=every)  # strictly after


def test_two_every_schedules_created_a_second_apart_share_their_windows() -> None:
    first = new_spec("a", NOW, **when(every="15s", timezone="UTC"))
    second = new_spec("b", NOW + timedelta(seconds=1), **when(every="15s", timezone="UTC"))
    assert first.start_at == second.start_at == datetime(2026, 11, 28, 1, 0, 15, tzinfo=UTC)
    assert shares_windows(second.timing(), first.timing())
    assert second.timing().next_after(NOW) == first.timing().next_after(NOW)


def test_a_given_start_is_kept_and_a_stored_spec_without_one_keeps_its_old_windows() -> None:
    given = new_spec("a", NOW, **when(every="15s", timezone="UTC", start_at="2026-11-28T00:00:01Z"))
    assert given.start_at == datetime(2026, 11, 28, 0, 0, 1, tzinfo=UTC)
    old = replace(
        given, start_at=None, created=parse_time("2026-11-28T01:00:12.345Z")
    )  # made before
    assert old.timing().start == datetime(2026, 11, 28, 1, 0, 28, tzinfo=UTC)


def test_shares_windows_judges_two_intervals_only() -> None:
    start = datetime(2026, 11, 28, tzinfo=UTC)
    every = {n: Timing(start=start, every=n) for n in (10, 20, 15)}
    assert shares_windows(every[20], every[10])
    assert not shares_windows(every[10], every[20])
    assert not shares_windows(every[15], every[10])
    shifted = Timing(start=start + timedelta(seconds=1), every=20)
    assert not shares_windows(shifted, every[10])
    assert shares_windows(Timing(start=start, cron="* * * * *"), every[10])


def test_the_interval_note_says_seconds_when_no_unit_was_given() -> None:
    made = new_spec("a", NOW, **when(every="5", timezone="UTC"))
    assert interval_note(made, "5", aligned=True) == (
        "windows every 5 s (a plain number is seconds), at multiples of 5 s since "
        "1970-01-01T00:00:00Z"
    )
    assert interval_note(made, "5s", aligned=False) == (
        f"windows every 5 s, from --start-at {format_time(made.start_at)}"
    )


def test_a_change_touches_only_what_is_given_and_aligns_a_new_interval() -> None:
    current = spec()
    assert changed_spec(current, NOW, **change()) == current
    later = NOW + timedelta(minutes=1)
    every = changed_spec(current, later, **change(every="1m"))
    assert (every.every, every.start_at) == (60, datetime(2026, 11, 28, 1, 2, tzinfo=UTC))
    cron = changed_spec(current, NOW, **change(cron="@hourly"))
    assert (cron.cron, cron.every) == ("0 * * * *", None)
    ended = changed_spec(
        replace(current, end_at=datetime(2027, 1, 1, tzinfo=UTC), after_schedule="x"),
        NOW,
        **change(end_at="off", after_schedule="off"),
    )
    assert (ended.end_at, ended.after_schedule) == (None, None)
    with pytest.raises(ConfigError):
        changed_spec(current, NOW, **change(cron="@daily", every="1m"))
    with pytest.raises(ConfigError):
        changed_spec(current, NOW, **change(after_schedule="tick"))


def test_describe_says_each_change_before_and_after() -> None:
    current = spec()
    changed = changed_spec(current, NOW, **change(every="30s", concurrency="forbid"))
    assert describe(current, changed, None) == (
        "every: 15s -> 30s; start_at: 2026-11-28T01:00:15Z -> 2026-11-28T01:00:30Z; "
        "concurrency: allow -> forbid"
    )
    assert describe(current, current, None) is None


def test_changes_are_kept_bounded_and_parsed_strictly() -> None:
    current = spec()
    for n in range(CHANGES_LIMIT + 5):
        current = current.changed(
            Change(parse_time(f"2026-11-28T01:00:{n:02d}.000Z"), "u@h", "x" * 1000)
        )
    assert len(current.changes) == CHANGES_LIMIT
    assert all(len(c.what) == MAX_REASON_CHARS for c in current.changes)
    data = current.to_bytes()
    assert len(data) < MAX_RECORD_BYTES // 4
    back = ScheduleSpec.from_znode(data, None, "/s")
    assert back.changes == current.changes
    assert ScheduleSpec.from_znode(spec().to_bytes(), None, "/s").changes == ()
    raw = json.loads(spec().to_bytes())
    for garbage in ({}, [{"at": "x", "by": "u", "what": "w"}], [{"at": NOW.isoformat()}]):
        with pytest.raises(CorruptRecord):
            ScheduleSpec.from_znode(json.dumps({**raw, "changes": garbage}).encode(), None, "/s")


def test_the_store_deadline_is_a_bounded_duration() -> None:
    deadline = Duration((0.1, 600.0))
    assert deadline.convert("30s", None, None) == 30.0
    assert deadline.convert("2", None, None) == 2.0
    with pytest.raises(click.BadParameter, match=r"not between 0\.1 s and 600 s"):
        deadline.convert("11m", None, None)
