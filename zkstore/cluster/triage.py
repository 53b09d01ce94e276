"""What an operator does with a job the runtime will not finish by itself.

- **release** a quarantined job: its definition is verified again exactly as a driver would
  load it (from under the job's own storage prefix, size, sha256, signature, Python version,
  unpickled to this job's definition; nothing of the job runs), then one transaction puts its
  handle back into ``currentJobs``, deletes the quarantine entry at the version it was read, and
  sets its status to PENDING (attempts and failures so far kept) so that the leader starts its
  next attempt. Refused with :class:`~zkstore.errors.JobQuarantined` while it does not verify.
- **purge** a quarantined job: one transaction records its result (FAILED with the quarantine
  reason, or CANCELLED for ``jobs cancel``) and deletes the quarantine entry; then the job's
  cleanup removes everything else (its payload, records and checkpoints).
- **forget** a finished job: delete its CLEAN result, so that its id may be submitted again.

Leader-safe: while a job is quarantined the leader leaves it alone (it decides Nothing), and each
operation commits conditionally on the records it read (the quarantine entry's version, the
status's version, the result's absence), so that a concurrent change makes it read again instead
of overwriting. Idempotent: run again after a success (or a crash between its steps, at the
``cluster.step`` points), each finishes the work or says there is nothing left to do.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from zkstore.cluster.cleanup import clean_up, remove_records
from zkstore.errors import (
    HandleExists,
    HandleNotFound,
    JobFinished,
    JobNotFound,
    JobQuarantined,
    NotEmpty,
    PayloadError,
    VersionConflict,
    WrongState,
)
from zkstore.jobs.job_state_store import who
from zkstore.jobs.logs import JobLogs
from zkstore.jobs.snapshot import JobSnapshot, check_cancellable, read_snapshot
from zkstore.records.handle import Handle
from zkstore.records.job_records import CancelRequest, JobStatus
from zkstore.records.job_states import CANCELLED, CLEAN, DIRTY, FAILED, PENDING
from zkstore.records.result_records import QuarantineEntry
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.ops import Delete, Fence, Op, SetData, absent
from zkstore.zookeeper.retry import RACES, TryAgain

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["Done", "cancel", "forget", "kept_handle", "purge", "release"]

logger = logging.getLogger(__name__)

#: a race lost to somebody else's write: read again and decide again
_RACES = (VersionConflict, HandleExists, HandleNotFound, NotEmpty)


@dataclass(frozen=True)
class Done:
    """What an operation did (``changed``), or found there was nothing to do, or (a dry run)
    would do; ``detail`` says it in one line."""

    job_id: str
    action: str
    changed: bool
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def kept_handle(entry: QuarantineEntry | None) -> Handle | None:
    """The handle a quarantine entry keeps, or None (no entry, or it kept raw garbage)."""
    return None if entry is None else entry.handle


# -- release ----------------------------------------------------------------------------------


def release(cluster: Cluster, job_id: str, *, dry_run: bool = False) -> Done:
    """Put a quarantined job whose definition verifies again back into ``currentJobs``.

    Raises :class:`JobQuarantined` (it stays: the definition does not verify, or the entry kept
    no valid handle), :class:`WrongState` (a driver of it still runs), :class:`JobFinished`
    (it has a result), :class:`JobNotFound`. A job that is current already is "released".
    """

    def release_once() -> Done:
        job = read_snapshot(cluster.zk, cluster.layout, job_id)
        if not job.quarantined:
            if job.result is not None:
                raise JobFinished(f"job {job_id} has a result ({job.result.outcome}): not released")
            if job.in_current_jobs:
                return Done(
                    job_id, "release", False, f"job {job_id} is not quarantined ({job.state})"
                )
            raise JobNotFound(f"no job {job_id!r} in quarantine")
        handle = _releasable(cluster, job)
        if dry_run:
            return Done(
                job_id, "release", False, f"job {job_id} verifies: release would run it again"
            )
        cluster.step("release:verified")
        entry = job.quarantine
        assert entry is not None and entry.version is not None
        ops: list[Op] = [
            *cluster.jobs.handles.publish_ops(job_id, handle, lock=False),
            Delete(cluster.layout.quarantine_entry(job_id), entry.version),
            *_pending_status_ops(cluster, job),
        ]
        try:
            cluster.zk.commit(ops, fence=cluster.jobs.not_finished(job_id))
        except _RACES as exc:
            raise TryAgain(f"release raced: {exc}") from exc
        cluster.step("release:committed")
        logger.info("job %s released from quarantine by %s", job_id, who())
        attempt = job.status.attempt if job.status is not None else 0
        return Done(
            job_id, "release", True, f"job {job_id} released: attempt {attempt + 1} is next"
        )

    return RACES.call(release_once, what=f"release of job {job_id}")


def _releasable(cluster: Cluster, job: JobSnapshot) -> Handle:
    """The kept handle, once its definition verifies again; raises why the job stays."""
    job_id = job.job_id
    if job.quarantine is None:
        raise JobQuarantined(f"job {job_id} stays in quarantine: its entry is unreadable; purge it")
    if job.driver_present:
        who = (
            f" (attempt {job.running.attempt}, pid {job.running.pid} on {job.running.host})"
            if job.running is not None
            else ""
        )
        raise WrongState(
            f"job {job_id}: a driver of it still runs{who}; release it once that driver has "
            f"ended, or end the job and its driver with `zkstore jobs cancel {job_id}`"
        )
    handle = kept_handle(job.quarantine)
    if handle is None:
        raise JobQuarantined(
            f"job {job_id} stays in quarantine: it kept no valid handle, there is nothing to "
            "release (purge it, and submit it again)"
        )
    try:
        cluster.jobs.verify_definition(job_id, handle)
    except PayloadError as exc:
        raise JobQuarantined(
            f"job {job_id} stays in quarantine: its definition still does not verify: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return handle


def _pending_status_ops(cluster: Cluster, job: JobSnapshot) -> list[Op]:
    """Ops that leave the job PENDING for the leader (who starts the attempt after the last
    one), conditional on the status read; a job never initialized stays so."""
    path = cluster.layout.status(job.job_id)
    why = f"released from quarantine by {who()}"
    if job.status is not None and job.status.version is not None:
        status = replace(
            job.status,
            version=None,
            state=PENDING,
            daemon_id=None,
            not_before=None,
            updated=utc_moment(),
            leader_id=None,
            reason=why,
        )
        return [SetData(path, status.to_bytes(), job.status.version)]
    stat = cluster.zk.exists(path) if "status" in job.errors else None
    if stat is None:
        return []  # never initialized: the leader does that (it leaves quarantined jobs alone)
    attempt = job.outcome.attempt if job.outcome is not None else 0
    fresh = JobStatus(
        version=None, state=PENDING, attempt=attempt, updated=utc_moment(), reason=why
    )
    return [SetData(path, fresh.to_bytes(), stat.version)]  # an unreadable one is replaced


# -- purge ------------------------------------------------------------------------------------


def purge(
    cluster: Cluster, job_id: str, *, dry_run: bool = False, cancel: CancelRequest | None = None
) -> Done:
    """End a quarantined job: record its result (CANCELLED with ``cancel``, else FAILED), then
    remove everything else of it. Run again, it finishes an interrupted cleanup.

    Raises :class:`WrongState` for a job that is current (not quarantined), :class:`JobNotFound`.
    """

    def purge_once() -> Done:
        job = read_snapshot(cluster.zk, cluster.layout, job_id)
        if not job.quarantined:
            return _purged_already(cluster, job, dry_run)
        reason = job.quarantine.reason if job.quarantine is not None else "unreadable entry"
        if dry_run:
            return Done(job_id, "purge", False, f"would end job {job_id} and remove its data")
        try:
            cluster.zk.commit(_purge_ops(cluster, job, reason, cancel))
        except _RACES as exc:
            raise TryAgain(f"purge raced: {exc}") from exc
        cluster.step("purge:result-recorded")
        logger.info("job %s purged from quarantine by %s (%s)", job_id, who(), reason)
        return _finish(cluster, job_id, f"job {job_id} purged")

    return RACES.call(purge_once, what=f"purge of job {job_id}")


def _purge_ops(
    cluster: Cluster, job: JobSnapshot, reason: str, cancel: CancelRequest | None
) -> list[Op]:
    """The result's ops (they fail if it has one) and the versioned delete of the entry."""
    path = cluster.layout.quarantine_entry(job.job_id)
    version = job.quarantine.version if job.quarantine is not None else None
    if version is None:
        stat = cluster.zk.exists(path)
        if stat is None:
            raise HandleNotFound(f"{path} is gone", path=path)
        version = stat.version
    if job.result is not None:
        return [Delete(path, version)]  # it has a result already: that ends it
    handle = kept_handle(job.quarantine)
    result = cluster.results.new_result(
        job.job_id,
        CANCELLED if cancel is not None else FAILED,
        attempts=job.status.attempt if job.status is not None else 0,
        error=f"{'cancelled' if cancel else 'purged'} while quarantined: {reason}",
        name=job.name,
        summary=dict(handle.summary) if handle is not None else None,
        cancel=cancel,
        log=job.log,
    )
    ops = cluster.results.dirty_ops(result)
    garbage = (
        cluster.zk.exists(cluster.layout.result(job.job_id)) if "result" in job.errors else None
    )
    if garbage is not None:  # an unreadable result (what quarantined the job) is replaced
        ops[0] = SetData(cluster.layout.result(job.job_id), result.to_bytes(), garbage.version)
    return [*ops, Delete(path, version)]


def _purged_already(cluster: Cluster, job: JobSnapshot, dry_run: bool) -> Done:
    job_id = job.job_id
    if job.result is None:
        if job.in_current_jobs:
            raise WrongState(f"job {job_id} is not quarantined ({job.state}): cancel it instead")
        raise JobNotFound(f"no job {job_id!r} in quarantine")
    if job.result.state == CLEAN or dry_run:
        return Done(job_id, "purge", False, f"job {job_id} has a result ({job.result.outcome})")
    return _finish(cluster, job_id, f"job {job_id} has a result ({job.result.outcome})")


def _finish(cluster: Cluster, job_id: str, what: str) -> Done:
    """The cleanup after a result was recorded (the leader's, done here at once)."""
    if cluster.zk.exists(cluster.layout.running(job_id)) is not None:
        cluster.state.request_cancel(job_id, reason="ended while quarantined")
        return Done(
            job_id,
            "purge",
            True,
            f"{what}; a driver still runs and is asked to stop, "
            "the leader removes the job's data once it has gone",
        )
    if not clean_up(cluster, job_id):
        return Done(
            job_id,
            "purge",
            True,
            f"{what}; its data is still locked, the leader removes it once released",
        )
    cluster.step("purge:cleaned")
    return Done(job_id, "purge", True, f"{what}; its data removed")


# -- cancel, forget ---------------------------------------------------------------------------


def cancel(cluster: Cluster, job_id: str, *, reason: str | None = None) -> CancelRequest:
    """Ask a job to stop. A quarantined job does not run: it ends at once as CANCELLED (its
    result recorded, its data removed, as :func:`purge` does). Raises :class:`JobFinished`
    (it has a result) or :class:`JobNotFound`."""
    job = read_snapshot(cluster.zk, cluster.layout, job_id)
    if job.quarantined:
        request = CancelRequest(version=None, requested=utc_moment(), by=who(), reason=reason)
        purge(cluster, job_id, cancel=request)
        return request
    check_cancellable(job)
    return cluster.state.request_cancel(job_id, reason=reason)


def forget(cluster: Cluster, job_id: str, *, dry_run: bool = False) -> Done:
    """Delete a finished job's CLEAN result (and any records a late request left, and its driver
    logs), so that its id may be submitted again.

    Raises :class:`WrongState` while the job is current or its cleanup is unfinished,
    :class:`JobQuarantined` for a quarantined one (release or purge it), :class:`JobNotFound`.
    """

    def forget_once() -> Done:
        job = read_snapshot(cluster.zk, cluster.layout, job_id)
        version = _forgettable(cluster, job)
        if dry_run:
            return Done(
                job_id, "forget", False, f"would forget job {job_id}: its id could run again"
            )
        layout = cluster.layout
        if cluster.zk.exists(layout.job_dir(job_id)) and not remove_records(cluster, job_id):
            raise WrongState(f"job {job_id}: its records are in use (a driver still holds them)")
        # Its driver logs go first: a new job of this id counts its attempts from 1 again, and
        # a log's chunks are written once each.
        JobLogs(cluster.storage, cluster.storage_layout, job_id).remove()
        cluster.step("forget:logs-removed")
        ops: list[Op] = [*absent(layout.job_dir(job_id)), Delete(layout.result(job_id), version)]
        outputs = job.result.outputs if job.result is not None else None
        (unclaim,) = cluster.claims.output_ops([(job_id, outputs)], cluster.artifact_space.claimed)
        ops += unclaim  # its kept outputs are nobody's any more
        not_current = Fence.absent(layout.job_handle(job_id))
        try:
            cluster.zk.commit(
                ops, fence=not_current + Fence.absent(layout.quarantine_entry(job_id))
            )
        except _RACES as exc:
            raise TryAgain(f"forget raced: {exc}") from exc
        cluster.claims.prune_outputs(outputs, cluster.artifact_space.claimed, fence=None)
        logger.info("job %s forgotten by %s: its id may run again", job_id, who())
        return Done(
            job_id, "forget", True, f"job {job_id} forgotten: its id may be submitted again"
        )

    return RACES.call(forget_once, what=f"forget of job {job_id}")


def _forgettable(cluster: Cluster, job: JobSnapshot) -> int:
    """The version of the result to delete; raises why the job cannot be forgotten."""
    job_id = job.job_id
    if job.in_current_jobs:
        raise WrongState(f"job {job_id} is {job.state}: only a finished job is forgotten")
    if job.quarantined:
        raise JobQuarantined(f"job {job_id} is quarantined: release or purge it")
    if job.result is None and "result" in job.errors:
        stat = cluster.zk.exists(cluster.layout.result(job_id))  # garbage: forgetting it is fine
        if stat is not None:
            return int(stat.version)
    if job.result is None or job.result.version is None:
        raise WrongState(f"job {job_id} has no result to forget ({job.state})")
    if job.result.state == DIRTY:
        raise WrongState(f"job {job_id} is still being cleaned up; forget it once it is done")
    return job.result.version
