"""The retention of driver logs: the leader removes a finished job's logs once it has passed.

A job's cleanup (:func:`zkstore.jobs.cleanup.clean_up`) leaves its logs in storage and records
in its CLEAN result until when they are kept (``logs_until``). This sweep, run by the leader on
its loop thread, finds the results whose retention has passed, removes the logs, then drops
``logs_until`` from the result with a write fenced on the leadership. A crash between the two
leaves ``logs_until`` in place, and the next sweep (of this leader or the next) removes what is
left (nothing, or chunks that arrived late) and drops it: idempotent at every step.

Results are kept for ever, so reading them all (pipelined) is the sweep's cost: it runs once
in a while (:data:`MAX_INTERVAL`, sooner when a known retention ends sooner or ``--keep-logs``
is shorter, but never more often than every :data:`MIN_INTERVAL`), first a little after a
takeover, never in the middle of one, and removes at most :data:`BATCH` jobs' logs per turn of
the loop.
"""

from __future__ import annotations

import logging
import time

from zkstore.cluster import Cluster
from zkstore.jobs.logs import JobLogs
from zkstore.jobs.records import JobResult
from zkstore.jobs.states import CLEAN
from zkstore.ops import Fence
from zkstore.strict import parse_time

logger = logging.getLogger(__name__)

MAX_INTERVAL = 3600.0
MIN_INTERVAL = 5.0
FIRST_SWEEP_DELAY = 30.0
BATCH = 50


class LogRetention:
    """The sweep of one leadership: create one per grant, call :meth:`run_if_due` every turn."""

    def __init__(self, cluster: Cluster, keep_logs: float) -> None:
        self.cluster = cluster
        self.keep_logs = keep_logs
        self._due = time.monotonic() + self._interval(FIRST_SWEEP_DELAY)
        self.removed = 0

    def _interval(self, wanted: float) -> float:
        return max(MIN_INTERVAL, min(wanted, self.keep_logs, MAX_INTERVAL))

    def run_if_due(self, fence: Fence | None) -> int:
        """Sweep if it is time; returns the number of jobs whose logs were removed. Raises
        what the store raises (an outage, a lost leadership): the caller handles those."""
        if time.monotonic() < self._due:
            return 0
        return self.sweep(fence)

    def sweep(self, fence: Fence | None) -> int:
        results, _ = self.cluster.results.all()
        now = time.time()
        expired: list[tuple[float, JobResult]] = []
        upcoming: list[tuple[float, JobResult]] = []
        for result in results:
            until = _logs_until(result)
            if until is not None:
                (expired if until <= now else upcoming).append((until, result))
        for _, result in sorted(expired, key=lambda pair: pair[0])[:BATCH]:
            self._remove(result, fence)
        next_end = min((until for until, _ in upcoming), default=now + MAX_INTERVAL)
        wait = 0.0 if len(expired) > BATCH else self._interval(next_end - now)
        self._due = time.monotonic() + wait
        return min(len(expired), BATCH)

    def _remove(self, result: JobResult, fence: Fence | None) -> None:
        job_id = result.job_id
        removed = JobLogs(self.cluster.storage, self.cluster.storage_layout, job_id).remove()
        self.cluster.step("retention:logs-removed")
        self.cluster.results.logs_removed(job_id, fence=fence)
        self.removed += 1
        logger.info(
            "job %s: %d log object(s) removed, kept until %s", job_id, removed, result.logs_until
        )


def _logs_until(result: JobResult) -> float | None:
    if result.state != CLEAN or result.logs_until is None:
        return None
    return parse_time(result.logs_until).timestamp()
