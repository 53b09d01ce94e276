"""Notification events (zkstore.lifecycle.outbox): the idempotency key, the entries a state
change adds to its transaction, and the body a receiver gets; the lifecycle's records parse
strictly (zkstore.lifecycle.lifecycle_records)."""

from __future__ import annotations

import json

import pytest

from zkstore.errors import CorruptRecord
from zkstore.layout import Layout
from zkstore.lifecycle.lifecycle_records import (
    MAX_REASON_CHARS,
    EndRequest,
    Heartbeat,
    NotificationEntry,
    StopRequest,
)
from zkstore.lifecycle.outbox import (
    ATTEMPT_FAILED,
    FAILED,
    QUARANTINED,
    TIMED_OUT,
    Event,
    body,
    entry_name,
    notification_ops,
)
from zkstore.records.strict import parse_time
from zkstore.zookeeper.ops import Create

pytestmark = pytest.mark.unit

LAYOUT = Layout("/zkstore/default")
AT = "2026-11-21T12:00:00.000Z"
MOMENT = parse_time(AT)


def event(state: str = ATTEMPT_FAILED, attempt: int = 2, reason: str | None = "boom") -> Event:
    return Event(
        "nightly", attempt, state, MOMENT, reason=reason, name="Nightly", cluster="default"
    )


def entries(ops: list[object]) -> list[NotificationEntry]:
    found = []
    for op in ops:
        assert isinstance(op, Create) and not op.ephemeral
        assert op.path.startswith("/zkstore/default/notifications/")
        found.append(NotificationEntry.from_znode(op.data, None, op.path))
    return found


def test_the_key_is_job_attempt_and_state() -> None:
    assert event().key == "nightly:2:ATTEMPT_FAILED"
    assert event(TIMED_OUT, attempt=3).key == "nightly:3:TIMED_OUT"
    with pytest.raises(ValueError):
        event("RUNNING")


def test_one_entry_per_distinct_valid_url() -> None:
    urls = ["http://a/x", None, "http://b/y", "http://a/x", "ftp://nope"]
    ops = notification_ops(LAYOUT, [event()], urls, nonce="n1")
    found = entries(ops)
    assert sorted(e.url for e in found) == ["http://a/x", "http://b/y"]
    assert {e.key for e in found} == {"nightly:2:ATTEMPT_FAILED"}
    assert all(e.tries == 0 and e.next_try is None for e in found)
    assert notification_ops(LAYOUT, [event()], [None]) == []


def test_a_state_change_can_report_several_events() -> None:
    ops = notification_ops(LAYOUT, [event(TIMED_OUT, 3), event(FAILED, 3)], ["http://a/x"])
    assert [e.key for e in entries(ops)] == ["nightly:3:TIMED_OUT", "nightly:3:FAILED"]


def paths(ops: list[object]) -> list[str]:
    return [op.path for op in ops if isinstance(op, Create)]


def test_names_are_fixed_by_the_nonce_and_differ_per_url_and_per_recording() -> None:
    built = paths(notification_ops(LAYOUT, [event()], ["http://a/x", "http://b/x"], nonce="n1"))
    rebuilt = paths(notification_ops(LAYOUT, [event()], ["http://a/x", "http://b/x"], nonce="n1"))
    assert built == rebuilt and len(set(built)) == 2  # a retried transaction: the same entries
    once = paths(notification_ops(LAYOUT, [event(QUARANTINED)], ["http://a/x"]))
    twice = paths(notification_ops(LAYOUT, [event(QUARANTINED)], ["http://a/x"]))
    assert once != twice  # the same state recorded again never collides with the first
    name = entry_name(event(), "http://a/x", "n1")
    assert name.startswith("nightly~2~ATTEMPT_FAILED~") and "/" not in name


def test_the_body_carries_the_key_and_the_delivery() -> None:
    (entry,) = entries(notification_ops(LAYOUT, [event()], ["http://a/x"]))
    sent = json.loads(body(entry))
    assert sent == {
        "format": 1,
        "key": "nightly:2:ATTEMPT_FAILED",
        "job_id": "nightly",
        "name": "Nightly",
        "attempt": 2,
        "state": ATTEMPT_FAILED,
        "at": AT,
        "reason": "boom",
        "cluster": "default",
        "delivery": 1,
    }
    assert "url" not in sent  # a receiver is not told where else it went


def test_a_long_reason_keeps_its_end_and_an_entry_stays_small() -> None:
    trace = "Traceback\n" + "frame\n" * 5000 + "ValueError: the last line says it"
    (entry,) = entries(notification_ops(LAYOUT, [event(reason=trace)], ["http://a/" + "p" * 300]))
    assert entry.reason is not None and len(entry.reason) <= MAX_REASON_CHARS
    assert entry.reason.endswith("ValueError: the last line says it")
    assert len(entry.to_bytes()) < 2000


def test_paths() -> None:
    assert LAYOUT.stop("j") == "/zkstore/default/jobs/j/stop"
    assert LAYOUT.end("j") == "/zkstore/default/jobs/j/end"
    assert LAYOUT.heartbeat("j") == "/zkstore/default/jobs/j/heartbeat"
    assert LAYOUT.notifications == "/zkstore/default/notifications"


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        (StopRequest, b'{"requested":"' + AT.encode() + b'","checkpoint":true}'),
        (StopRequest, b'{"requested":"' + AT.encode() + b'","token":"a/b","checkpoint":true}'),
        (
            EndRequest,
            b'{"attempt":1,"reason":"BORED","requested":"' + AT.encode() + b'","grace_ms":1}',
        ),
        (Heartbeat, b'{"attempt":1,"at":"yesterday","beats":1}'),
        (
            NotificationEntry,
            b'{"key":"k","job_id":"j","attempt":1,"state":"FAILED","at":"'
            + AT.encode()
            + b'","url":"file:///etc/passwd","created":"'
            + AT.encode()
            + b'"}',
        ),
        (NotificationEntry, b"[]"),
    ],
)
def test_garbage_records_are_refused(kind: type, data: bytes) -> None:
    with pytest.raises(CorruptRecord):
        kind.from_znode(data, None, "/p")


def test_records_round_trip() -> None:
    records = [
        StopRequest(
            None, requested=parse_time(AT), by="u@h", checkpoint=True, token="stop-1", timeout_ms=5
        ),
        EndRequest(
            None, attempt=2, reason=TIMED_OUT, requested=parse_time(AT), grace_ms=30_000, detail="x"
        ),
        Heartbeat(None, attempt=2, at=parse_time(AT), beats=2**40),
    ]
    for record in records:
        assert type(record).from_znode(record.to_bytes(), None, "/p") == record
