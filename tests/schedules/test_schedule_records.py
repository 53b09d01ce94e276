"""A schedule's records are bounded: the state with a full history fits a ZooKeeper node many
times over, and a run's handle, with the longest names the store accepts and every field a run
adds, fits the handle limit. And the spec refuses what no writer writes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from zkstore.errors import CorruptRecord
from zkstore.jobs.definition import MAX_ENTRY_BYTES, JobDefinition, ShippedFile
from zkstore.jobs.dependencies import ENDED, Dependency, format_after
from zkstore.jobs.resubmit import fingerprint
from zkstore.records.handle import MAX_HANDLE_BYTES, Handle, PayloadRef
from zkstore.records.record import MAX_RECORD_BYTES
from zkstore.schedules.runs import AFTER_SCHEDULE, MAX_SCHEDULE_NAME_CHARS, run_id, run_summary
from zkstore.schedules.schedule_records import (
    HISTORY_LIMIT,
    MAX_REASON_CHARS,
    HistoryEntry,
    ScheduleSpec,
    ScheduleState,
)

pytestmark = pytest.mark.unit

WINDOW = datetime(2026, 11, 24, 2, tzinfo=UTC)
LONGEST = "n" * MAX_SCHEDULE_NAME_CHARS


def test_a_full_history_of_the_longest_entries_fits_well_under_the_node_limit() -> None:
    state = ScheduleState(version=None, updated=WINDOW)
    for n in range(HISTORY_LIMIT + 10):
        window = WINDOW + timedelta(hours=n)
        state = state.recording(
            (
                HistoryEntry(
                    window,
                    "skipped",
                    reason="\x07" * MAX_REASON_CHARS,  # escaped: four times as long, then cut
                    through=window,
                    count=2**31 - 1,
                ),
                HistoryEntry(window, "fired", job=run_id(LONGEST, window)),
            ),
            window,
        )
    size = len(state.to_bytes())
    assert len(state.history) == HISTORY_LIMIT
    assert size < 40 * 1024 < MAX_RECORD_BYTES, size
    assert ScheduleState.from_znode(state.to_bytes(), None, "/s").history == state.history


def test_a_runs_handle_with_the_longest_names_and_every_run_field_fits() -> None:
    cluster = "c" * 128
    job = run_id(LONGEST, WINDOW)
    definition = JobDefinition.for_script(
        job,
        "print(1)",
        filename="/x/" + "f" * 300 + ".py",
        name="N" * 100,
        require={"k" * 50: "v" * 60},
        files=tuple(ShippedFile(f"{n:02d}" + "m" * 30 + ".py", "py-file", b"") for n in range(5)),
    )
    assert len(definition.entry_point.encode()) > MAX_ENTRY_BYTES  # it is clipped
    previous = run_id(LONGEST, WINDOW - timedelta(hours=1))
    summary = {
        **definition.summary(),
        **run_summary(LONGEST, WINDOW),
        AFTER_SCHEDULE: "a" * MAX_SCHEDULE_NAME_CHARS,
        "after": format_after([Dependency(previous, ENDED)]),
        **fingerprint(definition),  # phase B: idempotent submission's fields
    }
    root = "s3://" + "b" * 63 + "/" + "r" * 220  # the longest storage root (300 bytes)
    uri = f"{root}/{cluster}/jobs/{job}/definition/{'0' * 32}.pkl"
    ref = PayloadRef(uri, 2**40, "ab" * 32, "cd" * 32)
    handle = Handle.for_payload(ref, "w" * 40, summary)
    assert len(handle.to_bytes()) <= MAX_HANDLE_BYTES, len(handle.to_bytes())


HANDLE = Handle(
    uri="file:///s/c/schedules/nightly/definition/0123.pkl",
    size=120,
    sha256="ab" * 32,
    created="2026-11-24T00:00:00.000Z",
    writer="w-1",
)
VALID = ScheduleSpec(
    version=None,
    name="nightly",
    created=datetime(2026, 11, 24, tzinfo=UTC),
    definition=HANDLE,
    cron="30 2 * * *",
)


@pytest.mark.parametrize(
    "changes",
    [
        {"cron": None},
        {"every": 60},
        {"cron": "30  2 * * *"},  # not the normal form its writer stores
        {"cron": "61 * * * *"},
        {"cron": None, "every": 0},
        {"timezone": "Mars/Olympus"},
        {"catchup": "many"},
        {"catchup": "0"},
        {"catchup": "1001"},
        {"concurrency": "sometimes"},
        {"grace": 86401},
        {
            "start_at": datetime(2026, 11, 25, tzinfo=UTC),
            "end_at": datetime(2026, 11, 24, tzinfo=UTC),
        },
        {"paused": True},
        {"after_schedule": "../x"},
        {"name": "n" * 101},
        {"definition": None},
    ],
)
def test_a_spec_no_writer_writes_is_refused(changes: dict[str, object]) -> None:
    assert ScheduleSpec.from_znode(VALID.to_bytes(), None, "/s") == VALID
    bad = replace(VALID, **changes)  # type: ignore[arg-type]
    with pytest.raises(CorruptRecord):
        ScheduleSpec.from_znode(bad.to_bytes(), None, "/s")


@pytest.mark.parametrize(
    "data",
    [
        b'{"updated": "2026-11-23T19:24:32Z", "last_run": ""}',
        b'{"updated": "2026-11-23T19:24:32Z", "history": [{"window": "2026-11-24T01:30:00Z",'
        b' "outcome": "fired", "job": "../etc"}]}',
    ],
)
def test_a_bad_job_id_in_the_state_is_a_corrupt_record(data: bytes) -> None:
    """Found by the node-parser property: an empty run id raised the usage error of an invalid
    id (exit 2 for whoever read the node) instead of CorruptRecord."""
    with pytest.raises(CorruptRecord):
        ScheduleState.from_znode(data, None, "/zkstore/default/schedules/nightly/state")
