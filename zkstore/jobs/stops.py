"""A job's stop, end and heartbeat records (``R/jobs/<job>/stop|end|heartbeat``): read by the
snapshot (:mod:`zkstore.jobs.snapshot`), written by :mod:`zkstore.lifecycle` (the client's stop,
the leader's end request) and by the driver (its heartbeat). See
:mod:`zkstore.lifecycle.lifecycle_records` for who writes what and when.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from zkstore.records.job_states import END_REASONS
from zkstore.records.record import EPOCH, Record

__all__ = ["EndRequest", "Heartbeat", "StopRequest", "redact_url"]


@dataclass(frozen=True)
class StopRequest(Record):
    """``R/jobs/<job>/stop``: the job is to be stopped. With ``checkpoint``, the live attempt is
    first asked for a checkpoint (the control plane's request, carrying ``token``) and given
    ``timeout_ms`` to answer it; then, answered or not, its driver is ended."""

    requested: datetime = EPOCH
    by: str | None = None
    reason: str | None = None
    checkpoint: bool = False
    token: str | None = None
    timeout_ms: int = 0

    optional = frozenset({"by", "reason", "token"})
    times = frozenset({"requested"})
    multiline = frozenset({"reason"})

    def problem(self) -> str | None:
        if self.checkpoint and not self.token:
            return "a checkpoint is asked for without its request's token"
        if self.token is not None and not re.fullmatch(r"[A-Za-z0-9._:-]{1,64}", self.token):
            return "the checkpoint token is not [A-Za-z0-9._:-]{1,64}"
        return None


@dataclass(frozen=True)
class EndRequest(Record):
    """``R/jobs/<job>/end``: the leader ended ``attempt`` (``reason``: TIMED_OUT, STUCK or
    STOPPED; ``detail`` names the limit). Its member sends the driver SIGTERM, then after
    ``grace_ms`` SIGKILL to its process group, and records the exit; the leader counts the
    attempt once it is known dead (:data:`~zkstore.lifecycle.lifecycle_states.COUNTED_AS`)."""

    attempt: int = 0
    reason: str = ""
    requested: datetime = EPOCH
    grace_ms: int = 0
    detail: str | None = None
    leader: str | None = None

    optional = frozenset({"detail", "leader"})
    times = frozenset({"requested"})
    choices = {"reason": END_REASONS}
    multiline = frozenset({"detail"})


@dataclass(frozen=True)
class Heartbeat(Record):
    """``R/jobs/<job>/heartbeat``: EPHEMERAL; the newest heartbeat of ``attempt`` its driver
    wrote (``at``, the driver's clock), and how many ``ctx.heartbeat()`` calls it had seen."""

    attempt: int = 0
    at: datetime = EPOCH
    beats: int = 0

    times = frozenset({"at"})
    wide = frozenset({"beats"})


def redact_url(url: str) -> str:
    """``scheme://host[:port]/...``: what logs, ``jobs show`` and the API may show of a
    notification URL (a webhook's path or query often is its secret)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "(invalid URL)"
    rest = "/..." if (parts.path not in ("", "/") or parts.query) else ""
    return f"{parts.scheme}://{host}{port}{rest}"
