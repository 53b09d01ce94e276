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


@dataclass(frozen=True)
class Listing:
    """The children of the cluster's four job parents, read once: which nodes exist at all.

    A listing lets a snapshot of many jobs skip the reads of nodes that cannot exist (a new
    job has no records yet). It is only ever a hint: a node created after the listing is seen
    by the next look, and every write is conditional, so acting on a stale "absent" fails
    instead of doing harm.
    """

    current_jobs: frozenset[str]
    job_dirs: frozenset[str]
    results: frozenset[str]
    quarantine: frozenset[str]

    def job_ids(self) -> set[str]:
        """Every job id with any trace."""
        return set(self.current_jobs | self.job_dirs | self.results | self.quarantine)


def read_listing(zk: ZooKeeper, layout: Layout) -> Listing:
    parents = (layout.current_jobs, layout.jobs, layout.results, layout.quarantine)
    current, dirs, results, quarantine = (frozenset(c or ()) for c in zk.children_many(parents))
    return Listing(current, dirs, results, quarantine)


_KINDS = ("handle", "status", "running", "outcome", "cancel", "result", "quarantine")


def _paths(layout: Layout, job_id: str, listing: Listing | None) -> list[str | None]:
    """The paths of the job's records, ``None`` where the listing says there is nothing."""
    records = [layout.status, layout.running, layout.outcome, layout.cancel]
    has_dir = listing is None or job_id in listing.job_dirs
    return [
        layout.job_handle(job_id) if listing is None or job_id in listing.current_jobs else None,
        *(record(job_id) if has_dir else None for record in records),
        layout.result(job_id) if listing is None or job_id in listing.results else None,
        layout.quarantine_entry(job_id)
        if listing is None or job_id in listing.quarantine
        else None,
    ]


def read_snapshots(
    zk: ZooKeeper, layout: Layout, job_ids: Iterable[str], *, listing: Listing | None = None
) -> dict[str, JobSnapshot]:
    """Snapshots of ``job_ids`` (pipelined); jobs with no trace at all are left out.

    Seven small reads per job, all sent before any answer is awaited; with a ``listing``, only
    the reads of nodes that exist.
    """
    ids = sorted(job_id for job_id in set(job_ids) if _valid(job_id))
    per_job = [_paths(layout, job_id, listing) for job_id in ids]
    wanted = [path for paths in per_job for path in paths if path is not None]
    answers = iter(zk.get_many(wanted))
    snapshots: dict[str, JobSnapshot] = {}
    for job_id, paths in zip(ids, per_job, strict=True):
        found = [next(answers) if path is not None else None for path in paths]
        if any(item is not None for item in found):
            snapshots[job_id] = _snapshot(job_id, dict(zip(_KINDS, found, strict=True)), layout)
    return snapshots


def _snapshot(job_id: str, items: dict[str, Any], layout: Layout) -> JobSnapshot:
    errors: dict[str, str] = {}
    handle = None
    marked = False
    if items["handle"] is not None:
        marked = is_marked(items["handle"][1])
        try:
            data, stat = items["handle"]
            handle = Handle.from_znode(data, stat, layout.job_handle(job_id))
        except CorruptRecord as exc:
            errors["handle"] = str(exc)
    session = items["running"][1].ephemeralOwner if items["running"] is not None else None
    return JobSnapshot(
        job_id=job_id,
        handle=handle,
        marked=marked,
        status=_parse(JobStatus, items["status"], layout.status(job_id), errors, "status"),
        running=_parse(RunningInfo, items["running"], layout.running(job_id), errors, "running"),
        running_session=session,
        outcome=_parse(Outcome, items["outcome"], layout.outcome(job_id), errors, "outcome"),
        cancel=_parse(CancelRequest, items["cancel"], layout.cancel(job_id), errors, "cancel"),
        result=_parse(JobResult, items["result"], layout.result(job_id), errors, "result"),
        quarantine=_parse(
            QuarantineEntry,
            items["quarantine"],
            layout.quarantine_entry(job_id),
            errors,
            "quarantine",
        ),
        errors=errors,
    )
