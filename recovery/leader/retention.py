"""Retention: the leader deletes CLEAN results older than ``--keep-results``, and the driver logs
of finished jobs once their ``--keep-logs`` has passed.

A finished job's result is what keeps its id from running again. Past the retention period the
leader deletes it, and the id may be submitted anew (the guarantee "a finished id never runs
again" holds for the retention period). A DIRTY result is never deleted: only a result read
CLEAN is, by a delete conditional on the version it was read at, fenced on the leadership. A
job's driver logs are kept until the time recorded in its result (``logs_until``), and never
longer than the result itself: a result that expires takes its logs with it first. Logs are
removed, then ``logs_until`` is dropped from the result with a write fenced on the leadership: a
crash between the two leaves ``logs_until`` in place, and the next pass removes what is left
(nothing, or chunks that arrived late) and drops it. When logs are due is one rule,
:func:`zkstore.jobs.logs.logs_due` (``handles lingering`` applies the same one).

The work is spread over passes on the leader's loop thread, each bounded: one page of
:data:`PAGE` results read in a pipelined round, the expired logs removed, the expired results
deleted in another round. A cycle lists ``R/results`` once and walks it a page per pass,
:data:`PAGE_DELAY` apart, so that events never wait long behind it; the next cycle starts a tenth
of the shorter retention period later (within :data:`MIN_CYCLE_PAUSE` and
:data:`MAX_CYCLE_PAUSE`). The first pass runs that long after the takeover's reconcile, never
within it: a takeover does not wait for retention.

A pass also hands every DIRTY result it meets to the leader, so that a result recorded before
the cleanup index existed still gets its cleanup finished.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from recovery.leader.loop import Event
from recovery.leader.role import LeaderRole
from zkstore.cluster.cleanup import remove_records
from zkstore.errors import HandleExists, NotLeader
from zkstore.jobs.logs import JobLogs, logs_due
from zkstore.records.job_states import CLEAN, DIRTY
from zkstore.records.result_records import JobResult
from zkstore.records.strict import optional_time_text
from zkstore.zookeeper.ops import Fence

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = [
    "LOG_REMOVALS",
    "MAX_CYCLE_PAUSE",
    "MIN_CYCLE_PAUSE",
    "PAGE",
    "PAGE_DELAY",
    "RETENTION",
    "Expiry",
    "Retention",
    "expire",
    "remove_logs",
]

logger = logging.getLogger(__name__)

#: the event of a retention pass; its data is the leadership it was scheduled by
RETENTION = "retention"
#: results read per pass (and at most deleted): a pass that deletes a full page holds the loop
#: for about 0.2 s on a busy 2-core machine, one that only reads for a fraction of that
PAGE = 200
#: between the passes of one cycle
PAGE_DELAY = 1.0
#: jobs whose driver logs a pass removes at most (each is a listing and deletes in storage)
LOG_REMOVALS = 20
MIN_CYCLE_PAUSE = 1.0
MAX_CYCLE_PAUSE = 600.0


class Retention:
    """The retention passes of one leadership (a new grant starts a new cycle): results and
    driver logs."""

    def __init__(self, leader: LeaderRole) -> None:
        self.leader = leader
        self.cluster = leader.cluster
        self.keep = leader.settings.keep_results
        self.keep_logs = leader.settings.keep_logs
        self._names: list[str] = []

    @property
    def cycle_pause(self) -> float:
        shorter = min(self.keep_logs, self.keep if self.keep is not None else self.keep_logs)
        return min(MAX_CYCLE_PAUSE, max(MIN_CYCLE_PAUSE, shorter / 10))

    def schedule(self) -> None:
        """Post the next pass: soon within a cycle, after the cycle pause between cycles."""
        if not self.leader.active:
            return
        delay = PAGE_DELAY if self._names else self.cycle_pause
        self.leader.loop.post_at(time.monotonic() + delay, Event(RETENTION, data=self.leader))

    def run_pass(self) -> int:
        """One bounded pass (loop thread); returns how many results it deleted. The next pass
        is scheduled whatever happens (an outage or a lost leadership raises)."""
        try:
            if not self._names:
                self._names = sorted(self.cluster.zk.children(self.cluster.layout.results))
            page, self._names = self._names[:PAGE], self._names[PAGE:]
            return self._expire(page)
        finally:
            self.schedule()

    def _expire(self, page: Sequence[str]) -> int:
        results, _ = self.cluster.results.read_many(page)
        found = expire(
            self.cluster,
            results,
            keep_results=self.keep,
            fence=self.leader.fence,
            now=self.leader.clock.now(),  # ZooKeeper's time, as the results' ``finished``
        )
        self._names = found.rest + self._names
        for job_id in found.dirty:
            self.leader.post(job_id)
        return self._delete(found.expired) if found.expired else 0

    def _delete(self, expired: list[JobResult]) -> int:
        """Delete the expired results in one pipelined round. A result whose job still has
        records under ``R/jobs/<job>`` (a late cancel request, say) is kept: a new job of that
        id must not inherit them. They are removed now, and the result goes next cycle."""
        claims, claimed = self.cluster.claims, self.cluster.artifact_space.claimed
        unclaims = claims.output_ops([(r.job_id, r.outputs) for r in expired], claimed)
        transactions = [
            self.cluster.results.removal_ops(result) + unclaim  # kept outputs: nobody's now
            for result, unclaim in zip(expired, unclaims, strict=True)
        ]
        errors = self.cluster.zk.commit_many(transactions, fence=self.leader.fence)
        deleted = 0
        gone: list[str] = []
        for result, error in zip(expired, errors, strict=True):
            if isinstance(error, NotLeader):
                raise error
            if error is None:
                deleted += 1
                gone.append(result.job_id)
                claims.prune_outputs(result.outputs, claimed, fence=self.leader.fence)
                continue
            logger.info("result of %s kept for now: %s", result.job_id, error)
            if isinstance(error, HandleExists) and error.path == self.cluster.layout.job_dir(
                result.job_id
            ):
                remove_records(self.cluster, result.job_id, fence=self.leader.fence, quota=False)
        self.leader.conditions.forget(gone)  # what the leader did not do for them goes too
        logger.info("retention: %d finished job result(s) past their retention deleted", deleted)
        return deleted


@dataclass
class Expiry:
    """What one look at a page of results did and found."""

    #: CLEAN results past their retention, their logs removed: to delete
    expired: list[JobResult] = field(default_factory=list)
    #: jobs whose result is DIRTY: their cleanup is unfinished
    dirty: list[str] = field(default_factory=list)
    #: jobs whose driver logs were removed
    logs_removed: int = 0
    #: jobs not looked at (the page's bound of log removals was reached)
    rest: list[str] = field(default_factory=list)


def expire(
    cluster: Cluster,
    results: Sequence[JobResult],
    *,
    keep_results: float | None,
    fence: Fence | None,
    now: datetime | None = None,
    limit: int = LOG_REMOVALS,
) -> Expiry:
    """Look at ``results``: remove the driver logs past their retention (and those of a result
    past its own, which is then listed to delete), at most ``limit`` jobs' worth."""
    now = now or datetime.now(UTC)
    found = Expiry()
    for index, result in enumerate(results):
        if found.logs_removed == limit and result.logs_until is not None:
            # Each removal lists and deletes objects: the rest waits for the next pass.
            found.rest = [r.job_id for r in results[index:]]
            break
        if result.state == DIRTY:
            found.dirty.append(result.job_id)
        elif result.state != CLEAN:
            continue
        elif keep_results is not None and result.finished <= now - timedelta(seconds=keep_results):
            if result.logs_until is not None:
                remove_logs(cluster, result, fence, forget=True)
                found.logs_removed += 1
            found.expired.append(result)
        elif logs_due(result, now):
            remove_logs(cluster, result, fence, forget=False)
            found.logs_removed += 1
    return found


def remove_logs(cluster: Cluster, result: JobResult, fence: Fence | None, *, forget: bool) -> int:
    """Remove the job's driver logs; then, unless the result is about to be deleted anyway
    (``forget``), drop ``logs_until`` from it. Returns how many objects were removed."""
    job_id = result.job_id
    cluster.zk.ensure_fence(fence)  # a deposed leader removes nothing
    removed = JobLogs(cluster.storage, cluster.storage_layout, job_id).remove()
    cluster.step("retention:logs-removed")
    if not forget:
        cluster.results.logs_removed(job_id, fence=fence)
    logger.info(
        "job %s: %d log object(s) removed, kept until %s",
        job_id,
        removed,
        optional_time_text(result.logs_until),
    )
    return removed
