"""Notifications: the events a user cares about, their idempotency key, and the outbox.

An event is recorded **in the same fenced leader transaction as the state change it reports**
(:func:`notification_ops` gives the ops to add), one outbox entry per URL it goes to, under
``R/notifications``. So an event exists iff its state change was recorded: a deposed leader's
write carries neither, a crash between them is impossible, and delivery is decided inside the
leader's fence (apache/airflow PR #64737: two schedulers each fired the same callback).

The sender (:mod:`recovery.leader.notifier`) drains the outbox: it POSTs each due entry, and
deletes it in a fenced write once a receiver answered 2xx, or records the failed try (its count,
the next try, the error) in a fenced write and backs off. A leader that dies between a 2xx and
the delete leaves the entry, which the next leader delivers again: delivery is **at least
once**, and every delivery of an event carries the same key ``<job>:<attempt>:<state>``
(``Idempotency-Key`` header and ``key`` field) so that a receiver can drop duplicates.

Entry names are ``<job>~<attempt>~<state>~<nonce>``: the nonce is fixed when the ops are built,
so a transaction retried after a lost answer writes (and reads back) the same entry, while the
same state recorded again later (a job quarantined, released, quarantined) is a new entry and
can never make the state change's own transaction fail.

An entry that no receiver took within the retention (a day by default) is dropped with a log
line at ERROR. The outbox is bounded when events are written, never by evicting entries: a
job has at most ``--notify-max-per-job`` undelivered entries (its outcome always gets one) and
the outbox at most :data:`OUTBOX_LIMIT` (:mod:`zkstore.lifecycle.outboxcap`). Nothing here
blocks the leader: its cost is one create of a few hundred bytes per event and URL in a
transaction it writes anyway.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from zkstore.errors import CorruptRecord, HandleNotFound, ZkStoreError
from zkstore.layout import Layout
from zkstore.lifecycle.lifecycle_records import (
    NotificationEntry,
    redact_url,
    url_problem,
)
from zkstore.records.strict import time_text, utc_moment
from zkstore.zookeeper.ops import Create, Delete, Fence, Op, SetData

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "ATTEMPT_FAILED",
    "ATTEMPT_LOST",
    "CANCELLED",
    "DEFAULT_RETENTION",
    "EVENT_STATES",
    "FAILED",
    "FORMAT",
    "OUTBOX_LIMIT",
    "QUARANTINED",
    "STOPPED",
    "SUCCEEDED",
    "TIMED_OUT",
    "Event",
    "Outbox",
    "OutboxView",
    "Pending",
    "body",
    "entry_name",
    "event_key",
    "notification_ops",
    "notification_targets",
]

logger = logging.getLogger(__name__)

# The states a user is told about (the ``state`` of an event, third part of its key).
ATTEMPT_FAILED = "ATTEMPT_FAILED"  # an attempt failed; the job will be retried
ATTEMPT_LOST = "ATTEMPT_LOST"  # an attempt was lost (host, session, killed, stuck); retried
TIMED_OUT = "TIMED_OUT"  # an attempt ran past its --timeout or --start-timeout
QUARANTINED = "QUARANTINED"  # the job cannot run as it is
STOPPED = "STOPPED"  # the job was stopped (zkstore jobs stop)
SUCCEEDED = "SUCCEEDED"  # the job finished: these three are its outcome
FAILED = "FAILED"
CANCELLED = "CANCELLED"
EVENT_STATES = (
    ATTEMPT_FAILED,
    ATTEMPT_LOST,
    TIMED_OUT,
    QUARANTINED,
    STOPPED,
    SUCCEEDED,
    FAILED,
    CANCELLED,
)

#: The body's format version (a receiver can tell).
FORMAT = 1
#: Entries the outbox holds at most: events past it are not written (its outcome is).
OUTBOX_LIMIT = 10_000
#: How long an undelivered entry is kept, unless the daemon says otherwise: a day.
DEFAULT_RETENTION = 86400.0


@dataclass(frozen=True)
class Event:
    """One state change a user cares about."""

    job_id: str
    attempt: int
    state: str
    at: datetime
    reason: str | None = None
    name: str | None = None
    cluster: str | None = None

    def __post_init__(self) -> None:
        if self.state not in EVENT_STATES:
            raise ValueError(f"not a notification state: {self.state!r}")

    @property
    def key(self) -> str:
        """The idempotency key: the same for every delivery of this event."""
        return event_key(self.job_id, self.attempt, self.state)


def event_key(job_id: str, attempt: int, state: str) -> str:
    return f"{job_id}:{attempt}:{state}"


def entry_name(event: Event, url: str, nonce: str) -> str:
    """``<job>~<attempt>~<state>~<nonce>`` (``~`` is in no job id); the URL's hash makes the
    name of each URL's entry differ."""
    tag = hashlib.sha256(f"{nonce}\x00{url}".encode()).hexdigest()[:12]
    return f"{event.job_id}~{event.attempt}~{event.state}~{tag}"


def notification_ops(
    layout: Layout,
    events: Iterable[Event],
    urls: Sequence[str | None],
    *,
    nonce: str | None = None,
    created: datetime | None = None,
) -> list[Op]:
    """The creates of the outbox entries of ``events``, one per distinct URL (None and invalid
    URLs are skipped: an event nobody listens to is not kept). Add them to the transaction that
    records the state change; build them once per decision (the nonce) and reuse them when that
    transaction is retried. ``created``: the writer's time (a leader's: ZooKeeper's), now if
    not given."""
    targets = notification_targets(urls)
    if not targets:
        return []
    nonce = nonce or uuid.uuid4().hex
    created = created or utc_moment()
    parent = layout.notifications
    ops: list[Op] = []
    for event in events:
        for url in targets:
            entry = NotificationEntry(
                version=None,
                key=event.key,
                job_id=event.job_id,
                attempt=event.attempt,
                state=event.state,
                at=event.at,
                url=url,
                created=created,
                reason=event.reason,
                name=event.name,
                cluster=event.cluster,
            )
            ops.append(Create(f"{parent}/{entry_name(event, url, nonce)}", entry.to_bytes()))
    return ops


def notification_targets(urls: Sequence[str | None]) -> list[str]:
    """The distinct valid URLs of ``urls``: each event has one entry per URL."""
    return sorted({u for u in urls if u is not None and url_problem(u) is None})


def body(entry: NotificationEntry) -> bytes:
    """The JSON a receiver gets: the event, its key, and which delivery this is."""
    payload: dict[str, Any] = {
        "format": FORMAT,
        "key": entry.key,
        "job_id": entry.job_id,
        "name": entry.name,
        "attempt": entry.attempt,
        "state": entry.state,
        "at": time_text(entry.at),
        "reason": entry.reason,
        "cluster": entry.cluster,
        "delivery": entry.tries + 1,
    }
    return json.dumps(payload, sort_keys=True).encode()


@dataclass(frozen=True)
class Pending:
    """One outbox entry as read: its node name, its record (with its znode version), and the
    znode's creation order (``czxid``: the order the state changes were recorded in)."""

    name: str
    entry: NotificationEntry
    order: int

    def due(self, now: datetime) -> bool:
        return self.entry.next_try is None or self.entry.next_try <= now

    def age(self, now: datetime) -> float:
        return (now - self.entry.created).total_seconds()

    def describe(self) -> str:
        return f"{self.entry.key} to {redact_url(self.entry.url)}"


class Outbox:
    """The outbox under ``R/notifications``: read it, and remove or update entries in writes
    fenced on the sender's leadership."""

    def __init__(self, zk: ZooKeeper, layout: Layout) -> None:
        self.zk = zk
        self.path = layout.notifications

    def ensure(self) -> None:
        """Make the outbox's parent (every transaction that adds an entry needs it)."""
        if self.zk.exists(self.path) is None:
            self.zk.ensure_path(self.path)

    def pending(self) -> tuple[list[Pending], list[str]]:
        """Every entry, oldest first, and the names of nodes that are no valid entry (left
        alone: zkstore deletes only what it knows it wrote)."""
        try:
            names = self.zk.children(self.path)
        except HandleNotFound:
            return [], []
        found = self.read(names)
        entries = [item for item in found.values() if item is not None]
        garbage = [name for name, item in found.items() if item is None]
        return sorted(entries, key=lambda p: p.order), sorted(garbage)

    def read(self, names: Sequence[str]) -> dict[str, Pending | None]:
        """The entries of ``names`` in one pipelined round: each name's entry, None for a node
        that is no valid entry; a name whose node is gone (delivered meanwhile) is left out."""
        found = self.zk.get_many([f"{self.path}/{name}" for name in names])
        read: dict[str, Pending | None] = {}
        for name, item in zip(names, found, strict=True):
            if item is None:
                continue
            try:
                entry = NotificationEntry.from_znode(item[0], item[1], f"{self.path}/{name}")
            except CorruptRecord:
                read[name] = None
                continue
            read[name] = Pending(name, entry, item[1].czxid)
        return read

    def settle(
        self,
        delivered: Sequence[Pending],
        failed: Sequence[tuple[Pending, str, datetime]],
        *,
        fence: Fence | None,
    ) -> list[ZkStoreError | None]:
        """In one pipelined round, each its own transaction fenced on the sender's leadership:
        remove the ``delivered`` entries, and record each ``failed`` try (entry, error, next
        try's time) as one more try. Per entry (delivered first, in order), None or the error
        (:class:`~zkstore.errors.HandleNotFound` / :class:`~zkstore.errors.VersionConflict`:
        another sender got there; the fence's error: this sender may write no more). An outage
        raises :class:`~zkstore.errors.OutcomeUnknown` (entries removed or not: at worst
        delivered again)."""
        transactions: list[list[Op]] = [[self._delete(p)] for p in delivered]
        for pending, error, next_try in failed:
            transactions.append([self._failed_op(pending, error, next_try)])
        if not transactions:
            return []
        return self.zk.commit_many(transactions, fence=fence)

    def _failed_op(self, pending: Pending, error: str, next_try: datetime) -> SetData:
        entry = pending.entry
        updated = replace(
            entry, version=None, tries=entry.tries + 1, next_try=next_try, last_error=error
        )
        version = -1 if entry.version is None else entry.version
        return SetData(f"{self.path}/{pending.name}", updated.to_bytes(), version)

    def drop(self, pending: Pending, why: str, *, fence: Fence | None) -> None:
        """Give up on an entry: remove it, with a log line at ERROR."""
        self.zk.commit([self._delete(pending)], fence=fence)
        entry = pending.entry
        logger.error(
            "notification %s dropped undelivered after %d tries (%s); last error: %s",
            pending.describe(),
            entry.tries,
            why,
            entry.last_error or "none",
        )

    def _delete(self, pending: Pending) -> Delete:
        version = pending.entry.version
        return Delete(f"{self.path}/{pending.name}", -1 if version is None else version)


class OutboxView:
    """The outbox as one sender reads it round after round: a round lists the names (one
    request, which the children watch that wakes the sender asks for anyway) and reads only the
    entries it has not read yet (new ones, and those :meth:`forget` was told of: the entries the
    sender itself changed). An entry is changed by nobody else: its writer creates it, and only
    the leader's sender, in fenced writes, updates or removes it. So a round costs the same
    requests whether the outbox holds 10 entries or 10,000 (invariant 15's bound), and only
    the new entries' bytes. A new leadership starts with a new view (reads everything once).
    Thread-safe: the sender settles tries on other threads while a round reads."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox
        self._lock = threading.Lock()
        #: each listed name's entry as last read (None: no valid entry)
        self._known: dict[str, Pending | None] = {}
        #: names forgotten while a round read them: that read may predate the change
        self._forgotten: set[str] = set()

    def forget(self, name: str) -> None:
        """The entry ``name`` changed (a try settled, the entry dropped): read it again."""
        with self._lock:
            self._known.pop(name, None)
            self._forgotten.add(name)

    def pending(self) -> tuple[list[Pending], list[str]]:
        """As :meth:`Outbox.pending`, reading only what this view has not read."""
        try:
            names = self.outbox.zk.children(self.outbox.path)
        except HandleNotFound:
            with self._lock:
                self._known.clear()
            return [], []
        listed = set(names)
        with self._lock:
            self._forgotten.clear()
            for gone in [name for name in self._known if name not in listed]:
                del self._known[gone]
            unread = [name for name in names if name not in self._known]
        read = self.outbox.read(unread) if unread else {}
        with self._lock:
            for name, item in read.items():
                if name not in self._forgotten:
                    self._known[name] = item
            known = list(self._known.items())
        entries = [item for _, item in known if item is not None]
        garbage = [name for name, item in known if item is None]
        return sorted(entries, key=lambda p: p.order), sorted(garbage)
