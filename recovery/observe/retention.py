"""The retention of driver logs: a finished job's logs go once the time recorded with it passed.

A job's cleanup (:func:`zkstore.jobs.cleanup.clean_up`) leaves its logs in storage and records
in its CLEAN result until when they are kept (``logs_until``). The leader's retention passes
(:mod:`recovery.retention`, which walk the results a page at a time) call :func:`remove_logs`
for each result whose time has come: the logs are removed, then ``logs_until`` is dropped from
the result with a write fenced on the leadership. A crash between the two leaves ``logs_until``
in place, and the next pass (of this leader or the next) removes what is left (nothing, or
chunks that arrived late) and drops it: idempotent at every step. A result deleted at the end of
its own retention takes its logs with it first.
"""

from __future__ import annotations

import logging
from datetime import datetime

from zkstore.cluster import Cluster
from zkstore.jobs.logs import JobLogs
from zkstore.jobs.records import JobResult
from zkstore.jobs.states import CLEAN
from zkstore.ops import Fence
from zkstore.strict import parse_time

logger = logging.getLogger(__name__)


def logs_due(result: JobResult, now: datetime) -> bool:
    """True if ``result`` is CLEAN and the retention of its logs has passed at ``now``."""
    return (
        result.state == CLEAN
        and result.logs_until is not None
        and parse_time(result.logs_until) <= now
    )


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
        "job %s: %d log object(s) removed, kept until %s", job_id, removed, result.logs_until
    )
    return removed
