"""A consistent-enough picture of many jobs at once, read with pipelined requests.

One snapshot reads, for every job, its handle (summary only, never the payload), status,
``running`` node, outcome, cancel request, result and quarantine entry: seven small reads per job,
all sent before any answer is awaited (then the Spark application of the jobs that run). The
daemon reconciles from snapshots; the CLI lists them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from zkstore.errors import CorruptRecord, JobFinished, JobNotFound, JobQuarantined
from zkstore.handle import Handle
from zkstore.jobs.records import (
    CLEAN,
    STARTING,
    CancelRequest,
    JobResult,
    JobStatus,
    Outcome,
    QuarantineEntry,
    Record,
    RunningInfo,
    SparkApp,
)
from zkstore.layout import Layout
from zkstore.zk import ZooKeeper

R = TypeVar("R", bound=Record)

RUNNING = "RUNNING"
QUARANTINED = "QUARANTINED"
SUBMITTED = "SUBMITTED"
CLEANING = "CLEANING"
#: the attempt in ``status`` ended (its driver recorded an outcome and let go of ``running``),
#: and the leader has not acted on it yet: it will restart the job or record its result
ENDED = "ENDED"


@dataclass(frozen=True)
class JobSnapshot:
    """Everything ZooKeeper says about one job; ``errors`` names records that did not parse."""

    job_id: str
    handle: Handle | None = None
    marked: bool = False
    status: JobStatus | None = None
    running: RunningInfo | None = None
    running_session: int | None = None
    spark: SparkApp | None = None
    outcome: Outcome | None = None
    cancel: CancelRequest | None = None
    result: JobResult | None = None
    quarantine: QuarantineEntry | None = None
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def in_current_jobs(self) -> bool:
        return (self.handle is not None or "handle" in self.errors) and not self.marked

    @property
    def state(self) -> str:
        """One word for people: the result, QUARANTINED, RUNNING, or the leader's status."""
        if self.result is not None:
            return self.result.outcome if self.result.state == CLEAN else CLEANING
        if self.quarantine is not None:
            return QUARANTINED
        if self.running is not None:
            return RUNNING
        if self.attempt_outcome is not None:
            return ENDED
        if self.status is not None:
            return self.status.state
        return SUBMITTED if self.in_current_jobs else "UNKNOWN"

    @property
    def attempt_outcome(self) -> Outcome | None:
        """The outcome of the attempt the leader started last, once it ended and until the
        leader acts on it (then ``status`` moves on)."""
        status, outcome = self.status, self.outcome
        if status is None or outcome is None or self.running is not None:
            return None
        if status.state == STARTING and outcome.attempt == status.attempt:
            return outcome
        return None

    @property
    def log(self) -> str | None:
        """Where the log of the running attempt, or else of the last one that ended, is."""
        if self.running is not None and self.running.log:
            return self.running.log
        if self.outcome is not None and self.outcome.log:
            return self.outcome.log
        return self.result.log if self.result is not None else None

    @property
    def summary(self) -> dict[str, Any]:
        """What the job's handle says about it (kind, entry, submitted, max_attempts...), from
        wherever it still is: the handle, the quarantine entry, or the result."""
        if self.handle is not None:
            return dict(self.handle.summary)
        if self.quarantine is not None and self.quarantine.handle is not None:
            return dict(self.quarantine.handle)
        if self.result is not None and self.result.summary is not None:
            return dict(self.result.summary)
        return {}

    @property
    def name(self) -> str | None:
        if self.handle is not None:
            value = self.handle.summary.get("name")
            return str(value) if value is not None else None
        if self.quarantine is not None and self.quarantine.handle is not None:
            value = self.quarantine.handle.get("name")
            return str(value) if value is not None else None
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
        return record.from_znode(found[0], found[1], path)
    except CorruptRecord as exc:
        errors[key] = str(exc)
        return None


def read_snapshots(zk: ZooKeeper, layout: Layout, job_ids: Iterable[str]) -> dict[str, JobSnapshot]:
    """Snapshots of ``job_ids`` (pipelined); jobs with no trace at all are left out.

    The ``spark`` record is read in a second round, for jobs with a live driver only: it
    exists only while ``running`` does, and most jobs in a big listing are not running.
    """
    ids = sorted(set(job_ids))
    kinds = ("handle", "status", "running", "outcome", "cancel", "result", "quarantine")
    found = zk.get_many([p for job_id in ids for p in _paths(layout, job_id)])
    snapshots: dict[str, JobSnapshot] = {}
    for i, job_id in enumerate(ids):
        items = dict(zip(kinds, found[i * len(kinds) : (i + 1) * len(kinds)], strict=True))
        if any(v is not None for v in items.values()):
            paths = dict(zip(kinds, _paths(layout, job_id), strict=True))
            snapshots[job_id] = _snapshot(job_id, items, paths)
    running = [job_id for job_id, snap in snapshots.items() if snap.running is not None]
    for job_id, item in zip(running, zk.get_many([layout.spark(j) for j in running]), strict=True):
        snap = snapshots[job_id]
        spark = _parse(SparkApp, item, layout.spark(job_id), snap.errors, "spark")
        snapshots[job_id] = replace(snap, spark=spark)
    return snapshots


def _paths(layout: Layout, job_id: str) -> list[str]:
    return [
        layout.job_handle(job_id),
        layout.status(job_id),
        layout.running(job_id),
        layout.outcome(job_id),
        layout.cancel(job_id),
        layout.result(job_id),
        layout.quarantine_entry(job_id),
    ]


def _snapshot(job_id: str, items: dict[str, Any], paths: dict[str, str]) -> JobSnapshot:
    errors: dict[str, str] = {}
    handle = None
    marked = False
    if items["handle"] is not None:
        data, stat = items["handle"]
        marked = stat.numChildren == 0
        try:
            handle = Handle.from_znode(data, stat, paths["handle"])
        except CorruptRecord as exc:
            errors["handle"] = str(exc)
    running = _parse(RunningInfo, items["running"], paths["running"], errors, "running")
    session = items["running"][1].ephemeralOwner if items["running"] is not None else None
    return JobSnapshot(
        job_id=job_id,
        handle=handle,
        marked=marked,
        status=_parse(JobStatus, items["status"], paths["status"], errors, "status"),
        running=running,
        running_session=session if running is not None else None,
        outcome=_parse(Outcome, items["outcome"], paths["outcome"], errors, "outcome"),
        cancel=_parse(CancelRequest, items["cancel"], paths["cancel"], errors, "cancel"),
        result=_parse(JobResult, items["result"], paths["result"], errors, "result"),
        quarantine=_parse(
            QuarantineEntry, items["quarantine"], paths["quarantine"], errors, "quarantine"
        ),
        errors=errors,
    )


def check_cancellable(job: JobSnapshot) -> None:
    """Raise unless a cancel request makes sense for ``job``: :class:`JobFinished` (it has a
    result), :class:`JobQuarantined` (it does not run), :class:`JobNotFound` (no such job)."""
    if job.result is not None:
        raise JobFinished(f"job {job.job_id} already finished ({job.result.outcome})")
    if job.quarantine is not None:
        raise JobQuarantined(
            f"job {job.job_id} is quarantined: it does not run (zkstore quarantine release|purge)"
        )
    if not job.in_current_jobs:
        raise JobNotFound(f"no job {job.job_id!r} in this cluster")


def known_job_ids(zk: ZooKeeper, layout: Layout) -> set[str]:
    """Every job id with any trace: in currentJobs, jobs, results or quarantine."""
    ids: set[str] = set()
    for parent in (layout.current_jobs, layout.jobs, layout.results, layout.quarantine):
        ids.update(zk.children(parent))
    return ids
