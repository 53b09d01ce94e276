"""Removing every trace of a finished job, idempotently, so that it can be retried until done.

Order: the job's artifacts (every one but the outputs a SUCCEEDED job keeps, which its result
lists), checkpoints (handles, then payloads), the job's attempt history copied beside its logs,
the job's records under ``R/jobs/<job>``, the
definition's handle and payload, then every object left under the job's storage prefix (orphans
of crashed writes included) except the driver logs, and only then the result is marked CLEAN,
with the end of the logs' retention (``logs_until``). A crash anywhere leaves a DIRTY result,
which tells the next leader to run this again.

Every step is fenced when a fence is given (the leader's): each ZooKeeper write and delete
carries it, the job's records are deleted node by node in fenced transactions, and every delete
in storage comes after a write or a check of the fence, so that a deposed leader deletes nothing
(it fails with :class:`~zkstore.errors.NotLeader` at its first step).

The logs stay for people to read after the job (``zkstore jobs logs``); the leader's retention
passes (:mod:`recovery.leader.retention`) remove them once ``logs_until`` has passed. They are never
removed here, even with no retention at all: a driver's last lines may still be on their way to
storage when its outcome is recorded, and a later pass catches them.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from zkstore.cluster import quotas
from zkstore.errors import NotEmpty, ZkStoreError
from zkstore.jobs.job_artifacts import release_for_cleanup
from zkstore.jobs.logs import JobLogs
from zkstore.payloads.storage import is_temporary
from zkstore.records.result_records import JobResult
from zkstore.records.strict import to_millisecond
from zkstore.zookeeper.ops import Fence

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["DEFAULT_KEEP_LOGS", "clean_up", "remove_records"]

logger = logging.getLogger(__name__)

#: How long a finished job's driver logs are kept, unless the daemon says otherwise.
DEFAULT_KEEP_LOGS = 7 * 86400.0


def clean_up(
    cluster: Cluster,
    job_id: str,
    *,
    fence: Fence | None = None,
    keep_logs: float = DEFAULT_KEEP_LOGS,
    history: bytes | None = None,
    result: JobResult | None = None,
    quota: bool = True,
    now: datetime | None = None,
) -> bool:
    """Remove the job's checkpoints, records, definition and payloads; mark its result clean,
    its logs kept for ``keep_logs`` seconds from ``now``: the caller's time (a leader's is
    ZooKeeper's, by which its retention passes decide), else this host's clock.

    The job's attempt history is kept beside its logs: ``history`` if given (the leader's, with
    the end it has not written to ZooKeeper: a write saved), else the record's. ``result``: the
    job's result as the caller just recorded it (with its version), not read again.
    ``quota``: the job's ZooKeeper quota (:mod:`zkstore.cluster.quotas`) goes with its records
    (False: none was made, so none is looked for).

    Returns False if something is still held (a lock of a session that has not expired yet, a
    node added meanwhile): call again later. Raises on outages and on a lost fence.
    """
    result = release_for_cleanup(
        cluster.artifacts(job_id), cluster.results, fence=fence, known=result
    )
    if not cluster.checkpoints(job_id).remove_all(fence=fence):
        logger.info("cleanup of %s: a checkpoint is still locked; will retry", job_id)
        return False
    _keep_history(cluster, job_id, history)
    try:
        cluster.zk.delete_tree(
            cluster.layout.job_dir(job_id),
            fence=fence,
            shallow=True,
            also=quotas.nodes(cluster.layout, job_id) if quota else (),
        )
    except NotEmpty:
        logger.info("cleanup of %s: its records changed meanwhile; will retry", job_id)
        return False
    if not cluster.jobs.remove(job_id, fence=fence):
        logger.info("cleanup of %s: its definition is still locked; will retry", job_id)
        return False
    logs = cluster.storage_layout.logs(job_id)
    # Not a write in flight: a submission of the same id may be writing its payload meanwhile
    # (it will be refused, the id has a result, and removes its own file); a temporary file
    # left by a writer that died is the operator's lingering cleanup's, past its minimum age.
    leftovers = [
        found.uri
        for found in cluster.storage.list(cluster.storage_layout.job(job_id))
        if not cluster.storage.is_under(found.uri, logs) and not is_temporary(found.uri)
    ]
    if leftovers:  # deletes in storage, where no fence reaches: checked just before
        cluster.zk.ensure_fence(fence)
    for uri in leftovers:
        cluster.storage.discard(uri)
    cluster.step("cleanup:leftovers-discarded")
    until = to_millisecond((now or datetime.now(UTC)) + timedelta(seconds=max(0.0, keep_logs)))
    cluster.results.mark_clean(job_id, fence=fence, logs_until=until, known=result)
    return True


def _keep_history(cluster: Cluster, job_id: str, history: bytes | None = None) -> None:
    """Copy the job's attempt history (``history``, else its record) beside its logs before its
    records go (for the job page of a finished job). Never fails the cleanup: the history is
    for people."""
    if history is None:
        found = cluster.zk.get_if_exists(cluster.layout.history(job_id))
        if found is None:
            return
        history = found[0]
    try:
        JobLogs(cluster.storage, cluster.storage_layout, job_id).keep_history(history)
    except ZkStoreError as exc:
        logger.warning("cleanup of %s: its attempt history not kept (%s)", job_id, exc)


def remove_records(
    cluster: Cluster, job_id: str, *, fence: Fence | None = None, quota: bool = True
) -> bool:
    """Delete what is left under ``R/jobs/<job>`` of a job that is over (checkpoints with their
    payloads first); False, changing nothing more, while a driver holds ``running`` or if the
    records change meanwhile. Only for a job that is neither current nor quarantined. Every
    delete carries ``fence`` (the leader's). ``quota``: its ZooKeeper quota may be left too
    (False: it went with the job's cleanup, none is looked for)."""
    if cluster.zk.exists(cluster.layout.running(job_id)) is not None:
        return False
    if not cluster.checkpoints(job_id).remove_all(fence=fence):
        return False
    _keep_history(cluster, job_id)
    try:
        cluster.zk.delete_tree(
            cluster.layout.job_dir(job_id),
            fence=fence,
            shallow=True,
            also=quotas.nodes(cluster.layout, job_id) if quota else (),
        )
    except NotEmpty:
        return False
    return True
