"""The end of a job: its durable result (``R/results/<job>``) and, for a job that cannot be
run, its quarantine entry (``R/quarantine/<job>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zkstore.records.handle import Handle
from zkstore.records.job_records import CancelRequest
from zkstore.records.job_states import (
    CLEAN,
    DIRTY,
    FAILED,
    OUTCOMES,
)
from zkstore.records.record import EPOCH, Record, check_scalars
from zkstore.records.strict import (
    check_text,
)

__all__ = ["JobResult", "QuarantineEntry"]


@dataclass(frozen=True)
class JobResult(Record):
    """``R/results/<job>``: the durable end of a job (FLIP-194's job result store, in ZK).

    ``logs_until`` is written with CLEAN when the job's logs are kept for a retention period,
    and dropped once they are removed: a CLEAN result without it owns nothing in storage.
    """

    job_id: str = ""
    state: str = DIRTY
    outcome: str = FAILED
    attempts: int = 0
    finished: datetime = EPOCH
    error: str | None = None
    name: str | None = None
    #: what the job's handle said (kind, entry, submitted, max_attempts...): the handle is gone
    #: once the job is cleaned up, the result stays
    summary: dict[str, Any] | None = None
    #: the cancel request (requested, by, reason) of a cancelled job
    cancel: dict[str, Any] | None = None
    #: where the log of the last attempt is (a URI)
    log: str | None = None
    #: set while the job's driver logs are kept in storage after its cleanup: until when
    logs_until: datetime | None = None
    #: the artifacts a SUCCEEDED job marked to keep (name: URI), left in place by its cleanup
    outputs: dict[str, Any] | None = None
    #: the daemon the last attempt was placed on (``jobs list`` keeps its DAEMON once finished)
    daemon: str | None = None
    #: the job's counters at its end: attempts that failed, attempts lost to the infrastructure
    failures: int | None = None
    lost: int | None = None

    optional = frozenset(
        {
            "error",
            "name",
            "summary",
            "cancel",
            "log",
            "logs_until",
            "outputs",
            "daemon",
            "failures",
            "lost",
        }
    )
    times = frozenset({"finished", "logs_until"})
    choices = {"state": (DIRTY, CLEAN), "outcome": OUTCOMES}
    multiline = frozenset({"error"})

    @classmethod
    def _values(cls, raw: dict[str, Any]) -> dict[str, Any]:
        values = super()._values(raw)
        for name, uri in (values.get("outputs") or {}).items():
            if not isinstance(uri, str):
                raise ValueError(f"output {name!r:.40} is not a URI")
            check_text(name, "an output's name")
            check_text(uri, f"output {name!r:.40}")
        check_scalars(values.get("summary") or {}, "summary")
        if values.get("cancel") is not None:
            CancelRequest._values(values["cancel"])
        return values


@dataclass(frozen=True)
class QuarantineEntry(Record):
    """``R/quarantine/<job>``: a job that cannot be run, why, and its handle for forensics."""

    job_id: str = ""
    reason: str = ""
    since: datetime = EPOCH
    handle: Handle | None = None
    raw: str | None = None

    optional = frozenset({"handle", "raw"})
    times = frozenset({"since"})
    multiline = frozenset({"reason", "raw"})
    handles = frozenset({"handle"})
