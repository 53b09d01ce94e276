"""A job's own records under ``R/jobs/<job>``: its status (written by the leader only), the
live driver's ``running`` and Spark application, the outcome of an attempt, a cancel
request and the job's control object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from zkstore.records.job_states import (
    ATTEMPT_OUTCOMES,
    END_REASONS,
    FAILED,
    OUTCOMES,
    PENDING,
    STATUS_STATES,
)
from zkstore.records.record import EPOCH, Record

__all__ = [
    "MAX_CONTROL_BYTES",
    "CancelRequest",
    "ControlObject",
    "JobStatus",
    "Outcome",
    "RunningInfo",
    "SparkApp",
]


#: A control object (``R/jobs/<job>/control``) is at most this big.
MAX_CONTROL_BYTES = 16 * 1024


@dataclass(frozen=True)
class JobStatus(Record):
    """``R/jobs/<job>/status``, written by the leader only.

    While an attempt is live the leader leaves ``status`` alone, so its version identifies the
    attempt: the driver's writes are fenced on it (together with its ``running`` node).
    ``daemon_id`` is the daemon the current attempt was placed on (stored as ``member``),
    ``leader_id`` the leader that wrote the status (stored as ``leader``); ``reason`` says why a
    job that is not running waits (no free driver slot, no member with the labels it requires).
    """

    state: str = PENDING
    attempt: int = 0
    failures: int = 0
    lost: int = 0
    updated: datetime = EPOCH
    last_error: str | None = None
    not_before: datetime | None = None
    leader_id: str | None = None
    daemon_id: str | None = None
    reason: str | None = None
    #: consecutive failures / lost attempts since the last stable run (the retry pacing's
    #: streaks, :class:`zkstore.lifecycle.retry_backoff.Streak`); missing: as ``failures``/``lost``
    streak_failures: int | None = None
    streak_lost: int | None = None
    #: how the leader ended the last attempt (TIMED_OUT, STUCK, STOPPED), and why
    ended: str | None = None
    ended_detail: str | None = None

    optional = frozenset(
        {
            "lost",
            "last_error",
            "not_before",
            "leader_id",
            "daemon_id",
            "reason",
            "streak_failures",
            "streak_lost",
            "ended",
            "ended_detail",
        }
    )
    stored = {"leader_id": "leader", "daemon_id": "member"}
    multiline = frozenset({"last_error", "ended_detail"})
    times = frozenset({"updated", "not_before"})
    choices = {"state": (*STATUS_STATES, *OUTCOMES), "ended": END_REASONS}


@dataclass(frozen=True)
class RunningInfo(Record):
    """``R/jobs/<job>/running``: EPHEMERAL, held by the live driver of ``attempt``.

    ``start_ticks`` (when the process started, field 22 of ``/proc/<pid>/stat``) and ``boot_id``
    make host and pid name one process for ever (a pid is reused, never with the same start
    time in the same boot): how a daemon restarted on that host recognises its live drivers.
    """

    attempt: int = 0
    host: str = ""
    pid: int = 0
    started: datetime = EPOCH
    log: str | None = None
    start_ticks: int | None = None
    boot_id: str | None = None

    optional = frozenset({"log", "start_ticks", "boot_id"})
    #: clock ticks since boot: past 2**31 after 248 days of uptime at 100 Hz
    wide = frozenset({"start_ticks"})
    times = frozenset({"started"})


@dataclass(frozen=True)
class Outcome(Record):
    """``R/jobs/<job>/outcome``: how ``attempt`` ended, written by its driver as it exits."""

    attempt: int = 0
    outcome: str = FAILED
    finished: datetime = EPOCH
    error: str | None = None
    host: str | None = None
    log: str | None = None
    #: when the attempt's driver took ``running`` (its ``running.started``): how long it ran
    started: datetime | None = None
    #: the driver JVM the attempt had and why (``warm: ...``, ``cold: ...``, ``none: ...``):
    #: kept by the leader in the job's history; a reader of an older release ignores it
    jvm: str | None = None

    optional = frozenset({"error", "host", "log", "started", "jvm"})
    times = frozenset({"finished", "started"})
    choices = {"outcome": ATTEMPT_OUTCOMES}
    multiline = frozenset({"error"})


@dataclass(frozen=True)
class CancelRequest(Record):
    """``R/jobs/<job>/cancel``: somebody asked the job to stop."""

    requested: datetime = EPOCH
    by: str | None = None
    reason: str | None = None

    optional = frozenset({"by", "reason"})
    times = frozenset({"requested"})
    multiline = frozenset({"reason"})


@dataclass(frozen=True)
class SparkApp(Record):
    """``R/jobs/<job>/spark``: EPHEMERAL, the Spark application of the live driver of
    ``attempt``, written by that driver (fenced on the attempt) once its SparkContext is up."""

    attempt: int = 0
    app_id: str = ""
    master: str = ""
    ui: str | None = None
    started: datetime = EPOCH
    #: the driver JVM the attempt got and why (``warm: ...``, ``cold: ...``); optional, read
    #: by nothing but people (a reader of an older release ignores it)
    jvm: str | None = None

    optional = frozenset({"ui", "jvm"})
    times = frozenset({"started"})


@dataclass(frozen=True)
class ControlObject(Record):
    """``R/jobs/<job>/control``: the desired configuration, a flat JSON object of the job's
    keys (anybody writes it, compare-and-set). Here it is only a JSON object of bounded size
    and depth; each key and value is judged where it is applied (a value the job cannot take is
    rejected with a reason, never a reason to refuse the others)."""

    values: dict[str, Any] = field(default_factory=dict)

    max_bytes = MAX_CONTROL_BYTES

    @classmethod
    def _values(cls, raw: dict[str, Any]) -> dict[str, Any]:
        return {"values": raw}

    def to_bytes(self) -> bytes:
        return json.dumps(self.values, sort_keys=True, separators=(",", ":")).encode()
