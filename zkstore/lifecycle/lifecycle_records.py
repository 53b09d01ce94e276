"""The lifecycle's records in ZooKeeper, and where they live.

::

    R/jobs/<job>/stop            PERSISTENT, written by ``zkstore jobs stop`` (anybody): the job
                                 is to be stopped (its presence is the wish; ``resume`` deletes it)
    R/jobs/<job>/end             PERSISTENT, written by the leader (fenced): end ``attempt``, why,
                                 and the grace between SIGTERM and SIGKILL; its member acts on it
    R/jobs/<job>/heartbeat       EPHEMERAL, written by the live driver (fenced on its attempt):
                                 the newest ``ctx.heartbeat()`` it wrote out
    R/notifications/<entry>      PERSISTENT, written by the leader in the transaction of a state
                                 change; deleted by the sender once a receiver answered 2xx

The heartbeat is a node of its own rather than a field of ``running``: a driver's fence checks
its ``running`` node at version 0, so rewriting that node would break the fence. Being
EPHEMERAL, it goes with the driver's session and needs no cleanup. Every record parses strictly
(:class:`zkstore.records.record.Record`); the job's records go with the job's directory at cleanup;
the outbox outlives jobs on purpose (a job's last event is its end).

The job's three live in :mod:`zkstore.jobs.stops` (the snapshot reads them) and their paths in
:class:`zkstore.layout.Layout`, with the outbox's (``Layout.notifications``); the records are
re-exported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from zkstore.jobs.stops import EndRequest, Heartbeat, StopRequest, redact_url
from zkstore.records.record import EPOCH, MAX_ERROR_CHARS, Record, short_error

__all__ = [
    "EndRequest",
    "Heartbeat",
    "NotificationEntry",
    "StopRequest",
    "redact_url",
    "url_problem",
]

#: A notification URL is kept in the job's handle summary and in every outbox entry: bounded.
MAX_URL_BYTES = 400
#: A reason in a notification (an error's last lines) is cut to this.
MAX_REASON_CHARS = 1000
_SCHEMES = ("http", "https")


def url_problem(url: str) -> str | None:
    """What is wrong with a notification URL, or None: http(s) with a host, no credentials in
    it, no control characters, at most :data:`MAX_URL_BYTES`."""
    if not isinstance(url, str) or not url:
        return "a notification URL must be a non-empty text"
    if len(url.encode()) > MAX_URL_BYTES:
        return f"a notification URL is at most {MAX_URL_BYTES} bytes"
    if re.search(r"[\x00-\x20\x7f]", url):
        return "a notification URL holds spaces or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for a port that is not a number
    except ValueError as exc:
        return f"not a URL ({exc})"
    del port
    if parts.scheme not in _SCHEMES or not parts.hostname:
        return "a notification URL must be http:// or https:// with a host"
    if parts.username is not None or parts.password is not None:
        return "a notification URL must not carry credentials (user:password@)"
    return None


@dataclass(frozen=True)
class NotificationEntry(Record):
    """``R/notifications/<entry>``: one event for one URL, until a receiver took it.

    ``key`` is the idempotency key (job, attempt, state), the same on every delivery of the
    event. ``tries``, ``next_try`` and ``last_error`` are the sender's, written back after a
    failed try so that the next leader goes on with the same backoff.
    """

    key: str = ""
    job_id: str = ""
    attempt: int = 0
    state: str = ""
    at: datetime = EPOCH
    url: str = ""
    created: datetime = EPOCH
    reason: str | None = None
    name: str | None = None
    cluster: str | None = None
    tries: int = 0
    next_try: datetime | None = None
    last_error: str | None = None

    optional = frozenset({"reason", "name", "cluster", "next_try", "last_error"})
    times = frozenset({"at", "created", "next_try"})
    multiline = frozenset({"reason", "last_error"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.reason is not None and len(self.reason) > MAX_REASON_CHARS:
            object.__setattr__(self, "reason", _tail(self.reason, MAX_REASON_CHARS))
        if self.last_error is not None:
            object.__setattr__(self, "last_error", short_error(self.last_error[:MAX_ERROR_CHARS]))

    def problem(self) -> str | None:
        return url_problem(self.url)


def _tail(text: str, limit: int) -> str:
    """The end of ``text`` (an error's last lines say the most), at most ``limit`` chars."""
    return "..." + text[-(limit - 3) :] if len(text) > limit else text
