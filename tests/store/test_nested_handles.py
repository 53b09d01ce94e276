"""Handles kept inside other records (a quarantine entry's, a schedule's definition) are held as
:class:`Handle`, parsed once where the record is read (issue 53 item 4), and stored as the
handle's own JSON object, as every release wrote them."""

from __future__ import annotations

import json

import pytest

from zkstore import protocol
from zkstore.errors import CorruptRecord, NewerRecord
from zkstore.records.handle import Handle
from zkstore.records.result_records import QuarantineEntry
from zkstore.records.strict import parse_time
from zkstore.schedules.schedule_records import ScheduleSpec

pytestmark = pytest.mark.unit

HANDLE = Handle(
    uri="file:///s/c/jobs/j/definition/0123.pkl",
    size=120,
    sha256="ab" * 32,
    created="2026-11-24T00:00:00.000Z",
    writer="w-1",
    summary={"name": "j", "kind": "script"},
)
ENTRY = QuarantineEntry(
    version=None,
    job_id="j",
    reason="r",
    since=parse_time("2026-11-24T00:00:00.000Z"),
    handle=HANDLE,
)
SPEC = ScheduleSpec(
    version=None,
    name="nightly",
    created=parse_time("2026-11-24T00:00:00.000Z"),
    definition=HANDLE,
    cron="30 2 * * *",
)


@pytest.mark.parametrize(("record", "field"), [(ENTRY, "handle"), (SPEC, "definition")])
def test_a_kept_handle_is_stored_as_its_own_json_and_read_back_as_a_handle(
    record: QuarantineEntry | ScheduleSpec, field: str
) -> None:
    stored = json.loads(record.to_bytes())
    assert stored[field] == json.loads(HANDLE.to_bytes())
    read = type(record).from_znode(record.to_bytes(), None, "/r")
    kept = getattr(read, field)
    assert isinstance(kept, Handle) and kept == HANDLE and kept.summary["name"] == "j"
    assert read == record


@pytest.mark.parametrize(("record", "field"), [(ENTRY, "handle"), (SPEC, "definition")])
@pytest.mark.parametrize(
    "garbage", [{"format": 1}, "a handle", [1], {**json.loads(HANDLE.to_bytes()), "size": -1}]
)
def test_a_garbled_kept_handle_makes_the_record_corrupt(
    record: QuarantineEntry | ScheduleSpec, field: str, garbage: object
) -> None:
    stored = {**json.loads(record.to_bytes()), field: garbage}
    with pytest.raises(CorruptRecord) as caught:
        type(record).from_znode(json.dumps(stored).encode(), None, "/r")
    assert not isinstance(caught.value, NewerRecord)


def test_a_kept_handle_of_a_newer_format_is_a_newer_record_not_garbage() -> None:
    newer = {**json.loads(HANDLE.to_bytes()), "format": protocol.PROTOCOL + 1}
    stored = {**json.loads(ENTRY.to_bytes()), "handle": newer}
    with pytest.raises(NewerRecord):
        QuarantineEntry.from_znode(json.dumps(stored).encode(), None, "/r")
