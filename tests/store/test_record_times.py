"""Issue 53 item 4: every record family holds its times as ``datetime``, converted once where it
is read, and writes them back as the release before wrote them (byte for byte: 0.2.0 reads
them). Each literal below is what today's writer makes (a window and a bound to the second, the
other times to the millisecond, UTC with ``Z``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from zkstore.conditions import Condition, Conditions
from zkstore.errors import CorruptRecord
from zkstore.jobs.control.control_history import HistoryEntry as ControlEntry
from zkstore.jobs.history import JobHistory, LeaderHistory
from zkstore.records.strict import time_text
from zkstore.schedules.schedule_records import ScheduleSpec, ScheduleState

pytestmark = pytest.mark.unit

SPEC = (
    b'{"after_schedule":null,"catchup":"latest","catchup_max":null,"changes":[{"at":'
    b'"2026-11-25T07:59:59.456Z","by":"u@h","what":"grace: 60s -> 30s"}],"concurrency":"allow",'
    b'"created":"2026-11-23T12:00:00.123Z","cron":"30 2 * * *","definition":{"created":'
    b'"2026-11-24T00:00:00.000Z","format":1,"kind":"function","max_attempts":3,"name":"nightly",'
    b'"sha256":"abababababababababababababababababababababababababababababababab","size":120,'
    b'"uri":"file:///s/c/schedules/nightly/definition/0123.pkl","writer":"w-1"},"end_at":'
    b'"2027-01-01T00:00:00Z","every":null,"grace":60,"name":"nightly","paused":true,"paused_at":'
    b'"2026-11-25T08:00:05Z","resumed_at":null,"start_at":"2026-11-24T00:00:00Z","timezone":'
    b'"Europe/Berlin"}'
)
STATE = (
    b'{"fired":1,"history":[{"count":2,"outcome":"missed","reason":"r","through":'
    b'"2026-11-24T01:30:00Z","window":"2026-11-23T01:30:00Z"},{"count":1,"job":'
    b'"nightly-20261125T013000Z","outcome":"fired","window":"2026-11-25T01:30:00Z"}],"last":'
    b'"2026-11-25T01:30:00Z","last_run":"nightly-20261125T013000Z","missed":2,"skipped":0,'
    b'"updated":"2026-11-25T02:30:01Z"}'
)
JOB_HISTORY = (
    b'{"attempts":{"1":{"daemon":"d1","definition":"abababababababababababababababababababababab'
    b'ababababababababababab","ended":"2026-11-28T01:05:00.456Z","note":"killed by signal 9",'
    b'"outcome":"LOST","placed":"2026-11-28T01:00:00.123Z","target":"etl.py:run"},"2":{"daemon":'
    b'"d2","definition":"abababababababababababababababababababababababababababababababab",'
    b'"outcome":"PLACED","placed":"2026-11-28T01:06:00.000Z","target":"etl.py:run"}}}'
)
LEADER_HISTORY = (
    b'{"departed":{"d3":"2026-11-28T01:04:59.500Z"},"terms":{"d1-0000000001":{"leader":"d1",'
    b'"since":"2026-11-28T00:59:59.999Z"}}}'
)
CONTROL_ENTRY = (
    b'{"by":"me@h","changes":{"rate":{"new":2,"old":1}},"previous":2,"version":3,'
    b'"when":"2026-11-28T01:07:00.250Z"}'
)
CONDITIONS = (
    b'{"items":{"CannotFire":{"message":"cannot fire: its windows are 2 s apart","reason":'
    b'"UnderMinimumInterval","since":"2026-11-28T01:08:00.000Z"}}}'
)


def at(text: str) -> datetime:
    """A literal time, UTC (``2026-11-25T08:00:05.123``)."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_a_schedule_spec_holds_datetimes_and_writes_them_back_as_it_read_them() -> None:
    spec = ScheduleSpec.from_znode(SPEC, None, "/s")
    assert spec.created == at("2026-11-23T12:00:00.123")
    assert (spec.start_at, spec.end_at) == (at("2026-11-24T00:00:00"), at("2027-01-01T00:00:00"))
    assert (spec.paused_at, spec.resumed_at) == (at("2026-11-25T08:00:05"), None)
    assert spec.changes[0].at == at("2026-11-25T07:59:59.456")
    assert spec.to_bytes() == SPEC


def test_a_schedule_state_holds_datetimes_and_writes_them_back_as_it_read_them() -> None:
    state = ScheduleState.from_znode(STATE, None, "/s/state")
    assert (state.updated, state.last) == (at("2026-11-25T02:30:01"), at("2026-11-25T01:30:00"))
    missed, fired = state.history
    assert (missed.window, missed.through) == (at("2026-11-23T01:30:00"), at("2026-11-24T01:30:00"))
    assert (fired.window, fired.through, fired.last) == (
        at("2026-11-25T01:30:00"),
        None,
        at("2026-11-25T01:30:00"),
    )
    assert state.to_bytes() == STATE


def test_a_time_held_is_the_time_read_back_at_the_precision_it_is_stored() -> None:
    """A window or bound is stored to the second, other times to the millisecond: what a record
    holds is what it reads back (a pause at 08:00:05.9 skips the window of 08:00:05 either
    way, before and after a leader reads it)."""
    spec = ScheduleSpec.from_znode(SPEC, None, "/s")
    moment = at("2026-11-25T08:00:05.987654")
    changed = replace(spec, paused_at=moment, created=moment)
    assert (changed.paused_at, changed.created) == (
        at("2026-11-25T08:00:05"),
        at("2026-11-25T08:00:05.987"),
    )
    assert ScheduleSpec.from_znode(changed.to_bytes(), None, "/s") == changed


def test_a_job_history_gives_typed_attempts_and_writes_them_back_as_it_read_them() -> None:
    record = JobHistory.from_znode(JOB_HISTORY, None, "/h")
    lost, placed = record.entries()
    assert (lost.placed, lost.ended) == (
        at("2026-11-28T01:00:00.123"),
        at("2026-11-28T01:05:00.456"),
    )
    assert (placed.placed, placed.ended) == (at("2026-11-28T01:06:00"), None)
    again = JobHistory(version=None).with_entry(lost).with_entry(placed)
    assert again.to_bytes() == JOB_HISTORY


def test_the_leader_history_gives_typed_times_and_writes_them_back_as_it_read_them() -> None:
    record = LeaderHistory.from_znode(LEADER_HISTORY, None, "/l")
    assert record.leaders() == [(at("2026-11-28T00:59:59.999"), "d1")]
    assert record.departed_since() == {"d3": at("2026-11-28T01:04:59.500")}
    assert record.to_bytes() == LEADER_HISTORY


def test_a_control_history_entry_holds_its_when_and_writes_it_back_as_it_read_it() -> None:
    entry = ControlEntry.parse(CONTROL_ENTRY, "file:///h/3")
    assert entry.when == at("2026-11-28T01:07:00.250")
    assert entry.to_bytes() == CONTROL_ENTRY


def test_conditions_hold_their_since_and_write_it_back_as_they_read_it() -> None:
    record = Conditions.from_znode(CONDITIONS, None, "/c")
    (condition,) = record.conditions()
    assert condition.since == at("2026-11-28T01:08:00")
    assert condition.as_dict()["since"] == "2026-11-28T01:08:00.000Z"
    rebuilt = Conditions(version=None).holding(condition)
    assert rebuilt.to_bytes() == CONDITIONS
    later = Condition(condition.type, condition.reason, "again", at("2026-11-28T02:00:00"))
    assert record.holding(later).conditions()[0].since == condition.since  # it still holds


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        (JobHistory, JOB_HISTORY.replace(b'"placed":"2026-11-28T01:00:00.123Z"', b'"placed":"x"')),
        (JobHistory, JOB_HISTORY.replace(b"01:05:00.456Z", b"01:05:00.456")),  # no time zone
        (
            LeaderHistory,
            LEADER_HISTORY.replace(b'"since":"2026-11-28T00:59:59.999Z"', b'"since":"x"'),
        ),
        (LeaderHistory, LEADER_HISTORY.replace(b"2026-11-28T01:04:59.500Z", b"0001-01-01T00:00Z")),
        (Conditions, CONDITIONS.replace(b"2026-11-28T01:08:00.000Z", b"yesterday")),
    ],
)
def test_a_time_in_a_nested_entry_that_no_writer_writes_is_a_corrupt_record(
    kind: type[JobHistory | LeaderHistory | Conditions], data: bytes
) -> None:
    """The maps' times are converted once, with the record: garbage there is found as the record
    is read (CorruptRecord naming the path), never later by whoever asks for the times."""
    assert data not in (JOB_HISTORY, LEADER_HISTORY, CONDITIONS), "the garbage is in"
    with pytest.raises(CorruptRecord, match="/n: not a valid"):
        kind.from_znode(data, None, "/n")


HANDLE = (
    b'{"created":"2026-11-24T00:00:00.123Z","entry":"etl.py:run","format":1,"kind":"function",'
    b'"name":"etl","sha256":"abababababababababababababababababababababababababababababababab",'
    b'"size":120,"submitted":"2026-11-23T23:59:59.987Z","uri":"file:///s/c/jobs/etl/definition/'
    b'0123.pkl","writer":"w-1"}'
)


def test_a_handle_holds_its_created_and_its_jobs_submitted_as_datetimes() -> None:
    from zkstore.records.handle import Handle, PayloadRef

    handle = Handle.parse(HANDLE, "/h")
    assert handle.created == datetime(2026, 11, 24, 0, 0, 0, 123000, tzinfo=UTC)
    assert handle.submitted == datetime(2026, 11, 23, 23, 59, 59, 987000, tzinfo=UTC)
    assert handle.to_bytes() == HANDLE, "written back as it was read"
    # a text another writer made (an offset, microseconds) is written back unchanged too
    other = HANDLE.replace(b'"2026-11-24T00:00:00.123Z"', b'"2026-11-24T01:00:00.123456+01:00"')
    assert Handle.parse(other, "/h").to_bytes() == other
    assert Handle.parse(other, "/h").created == datetime(2026, 11, 24, 0, 0, 0, 123456, tzinfo=UTC)
    made = Handle.for_payload(PayloadRef("file:///x", 1, "0" * 64), "w", {"submitted": "later"})
    assert isinstance(made.created, datetime) and made.submitted is None
    assert Handle.parse(made.to_bytes(), "/h") == made
    assert b'"created":"' + time_text(made.created).encode() + b'"' in made.to_bytes()
