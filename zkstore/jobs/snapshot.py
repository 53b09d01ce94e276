"""A consistent-enough picture of many jobs at once, read with pipelined requests.

One snapshot reads, for every job, its handle (summary only, never the payload), status,
``running`` node, outcome, cancel request, result and quarantine entry: seven small reads per job,
all sent before any answer is awaited. The daemon reconciles from snapshots; the CLI lists them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from zkstore.errors import CorruptRecord, InvalidJobId
from zkstore.handle import Handle
from zkstore.jobs.records import (
    CancelRequest,
    JobResult,
    JobStatus,
    Outcome,
    QuarantineEntry,
    Record,
    RunningInfo,
)
from zkstore.jobs.states import CLEAN, CLEANING, QUARANTINED, RUNNING, SUBMITTED
from zkstore.layout import Layout, validate_job_id
from zkstore.store import is_marked
from zkstore.strict import is_time
from zkstore.zk import ZooKeeper

R = TypeVar("R", bound=Record)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSnapshot:
    """Everything ZooKeeper says about one job; ``errors`` names records that did not parse."""

    job_id: str
    handle: Handle | None = None
    marked: bool = False
    status: JobStatus | None = None
    running: RunningInfo | None = None
    running_session: int | None = None
    outcome: Outcome | None = None
    cancel: CancelRequest | None = None
    result: JobResult | None = None
    quarantine: QuarantineEntry | None = None
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def in_current_jobs(self) -> bool:
        return (self.handle is not None or "handle" in self.errors) and not self.marked

    @property
    def driver_present(self) -> bool:
        """A ``running`` node exists, readable or not: an unreadable one is a live driver whose
        record is garbage, never a dead one (only the node's going away says a driver died)."""
        return self.running is not None or "running" in self.errors

    @property
    def cancel_requested(self) -> bool:
        """A cancel node exists (an unreadable one still asks the job to stop)."""
        return self.cancel is not None or "cancel" in self.errors

    @property
    def quarantined(self) -> bool:
        return self.quarantine is not None or "quarantine" in self.errors

    def summary_int(self, key: str) -> int | None:
        """An integer of the handle's summary, or None if absent or not a positive integer."""
        value = self.handle.summary.get(key) if self.handle is not None else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        return None

    def summary_text(self, key: str) -> str | None:
        value = self.handle.summary.get(key) if self.handle is not None else None
        return value if isinstance(value, str) else None

    def summary_time(self, key: str) -> str | None:
        """A timestamp of the summary, or None if absent or not a valid zkstore timestamp."""
        value = self.summary_text(key)
        return value if value is not None and is_time(value) else None

    @property
    def state(self) -> str:
        """One word for people: the result, QUARANTINED, RUNNING, or the leader's status."""
        if self.result is not None:
            return self.result.outcome if self.result.state == CLEAN else CLEANING
        if self.quarantined:
            return QUARANTINED
        if self.driver_present:
            return RUNNING
        if self.status is not None:
            return self.status.state
        return SUBMITTED if self.in_current_jobs else "UNKNOWN"

    @property
    def name(self) -> str | None:
        if self.handle is not None:
            return self.summary_text("name")
        if self.quarantine is not None and self.quarantine.handle is not None:
            value = self.quarantine.handle.get("name")
            return value if isinstance(value, str) else None
        return self.result.name if self.result is not None else None

    @property
    def attempt(self) -> int | None:
        if self.running is not None:
            return self.running.attempt
        if self.status is not None:
            return self.status.attempt
        return self.result.attempts if self.result is not None else None


def _parse(record: type[R], found: Any, path: str, errors: dict[str, str], key: str) -> R | None:
    if found is None:
        return None
    try:
        parsed = record.from_znode(found[0], found[1], path)
    except CorruptRecord as exc:
        errors[key] = str(exc)
        return None
    owner = getattr(parsed, "job_id", None)
    if owner is not None and owner != path.rsplit("/", 1)[1]:
        errors[key] = f"{path}: names job {owner!r:.140}, not its own"
        return None
    return parsed


def _valid(job_id: str) -> bool:
    try:
        validate_job_id(job_id)
    except InvalidJobId:
        logger.warning("ignoring %r: not a valid job id (planted by hand?)", job_id[:200])
        return False
    return True


def read_snapshots(zk: ZooKeeper, layout: Layout, job_ids: Iterable[str]) -> dict[str, JobSnapshot]:
    """Snapshots of ``job_ids`` (pipelined); jobs with no trace at all are left out."""
    ids = sorted(job_id for job_id in set(job_ids) if _valid(job_id))
    kinds = ("handle", "status", "running", "outcome", "cancel", "result", "quarantine")

    def paths(job_id: str) -> list[str]:
        return [
            layout.job_handle(job_id),
            layout.status(job_id),
            layout.running(job_id),
            layout.outcome(job_id),
            layout.cancel(job_id),
            layout.result(job_id),
            layout.quarantine_entry(job_id),
        ]

    all_paths = [p for job_id in ids for p in paths(job_id)]
    found = zk.get_many(all_paths)
    snapshots: dict[str, JobSnapshot] = {}
    for i, job_id in enumerate(ids):
        items = dict(zip(kinds, found[i * len(kinds) : (i + 1) * len(kinds)], strict=True))
        if all(v is None for v in items.values()):
            continue
        errors: dict[str, str] = {}
        job_paths = dict(zip(kinds, paths(job_id), strict=True))
        handle = None
        marked = False
        if items["handle"] is not None:
            marked = is_marked(items["handle"][1])
            try:
                handle = Handle.from_znode(*items["handle"], job_paths["handle"])
            except CorruptRecord as exc:
                errors["handle"] = str(exc)
        running = _parse(RunningInfo, items["running"], job_paths["running"], errors, "running")
        session = items["running"][1].ephemeralOwner if items["running"] is not None else None
        snapshots[job_id] = JobSnapshot(
            job_id=job_id,
            handle=handle,
            marked=marked,
            status=_parse(JobStatus, items["status"], job_paths["status"], errors, "status"),
            running=running,
            running_session=session,
            outcome=_parse(Outcome, items["outcome"], job_paths["outcome"], errors, "outcome"),
            cancel=_parse(CancelRequest, items["cancel"], job_paths["cancel"], errors, "cancel"),
            result=_parse(JobResult, items["result"], job_paths["result"], errors, "result"),
            quarantine=_parse(
                QuarantineEntry, items["quarantine"], job_paths["quarantine"], errors, "quarantine"
            ),
            errors=errors,
        )
    return snapshots


def known_job_ids(zk: ZooKeeper, layout: Layout) -> set[str]:
    """Every job id with any trace: in currentJobs, jobs, results or quarantine."""
    ids: set[str] = set()
    for parent in (layout.current_jobs, layout.jobs, layout.results, layout.quarantine):
        ids.update(zk.children(parent))
    return ids
