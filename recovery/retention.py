"""Result retention: the leader deletes CLEAN results older than ``--keep-results``.

A finished job's result is what keeps its id from running again. Past the retention period the
leader deletes it, and the id may be submitted anew (the guarantee "a finished id never runs
again" holds for the retention period). A DIRTY result is never deleted: only a result read
CLEAN is, by a delete conditional on the version it was read at, fenced on the leadership.

The work is spread over passes on the leader's loop thread, each bounded: one page of
:data:`PAGE` results read in a pipelined round, the expired ones deleted in another. A cycle
lists ``R/results`` once and walks it a page per pass, :data:`PAGE_DELAY` apart, so that events
never wait long behind it; the next cycle starts a tenth of the retention period later (within
:data:`MIN_CYCLE_PAUSE` and :data:`MAX_CYCLE_PAUSE`). The first pass runs that long after the
takeover's reconcile, never within it: a takeover does not wait for retention.

A pass also hands every DIRTY result it meets to the leader, so that a result recorded before
the cleanup index existed still gets its cleanup finished.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from recovery.loop import Event
from zkstore.errors import HandleExists, NotLeader
from zkstore.jobs.records import JobResult
from zkstore.jobs.states import CLEAN, DIRTY
from zkstore.jobs.triage import remove_records
from zkstore.strict import parse_time

if TYPE_CHECKING:
    from recovery.leader import LeaderProcess

logger = logging.getLogger(__name__)

#: the event of a retention pass; its data is the leadership it was scheduled by
RETENTION = "retention"
#: results read per pass (and at most deleted): a pass that deletes a full page holds the loop
#: for about 0.2 s on a busy 2-core machine, one that only reads for a fraction of that
PAGE = 200
#: between the passes of one cycle
PAGE_DELAY = 1.0
MIN_CYCLE_PAUSE = 1.0
MAX_CYCLE_PAUSE = 600.0


class ResultRetention:
    """The retention passes of one leadership (a new grant starts a new cycle)."""

    def __init__(self, leader: LeaderProcess) -> None:
        self.leader = leader
        self.cluster = leader.cluster
        self.keep = leader.settings.keep_results
        self._names: list[str] = []

    @property
    def cycle_pause(self) -> float:
        assert self.keep is not None
        return min(MAX_CYCLE_PAUSE, max(MIN_CYCLE_PAUSE, self.keep / 10))

    def schedule(self) -> None:
        """Post the next pass: soon within a cycle, after the cycle pause between cycles."""
        if self.keep is None or not self.leader.active:
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
        assert self.keep is not None
        cutoff = datetime.now(UTC) - timedelta(seconds=self.keep)
        expired: list[JobResult] = []
        for result in results:
            if result.state == DIRTY:
                self.leader.post(result.job_id)
            elif result.state == CLEAN and parse_time(result.finished) <= cutoff:
                expired.append(result)
        return self._delete(expired) if expired else 0

    def _delete(self, expired: list[JobResult]) -> int:
        """Delete the expired results in one pipelined round. A result whose job still has
        records under ``R/jobs/<job>`` (a late cancel request, say) is kept: a new job of that
        id must not inherit them. They are removed now, and the result goes next cycle."""
        transactions = [self.cluster.results.removal_ops(result) for result in expired]
        errors = self.cluster.zk.commit_many(transactions, fence=self.leader.fence)
        deleted = 0
        for result, error in zip(expired, errors, strict=True):
            if isinstance(error, NotLeader):
                raise error
            if error is None:
                deleted += 1
                continue
            logger.info("result of %s kept for now: %s", result.job_id, error)
            if isinstance(error, HandleExists) and error.path == self.cluster.layout.job_dir(
                result.job_id
            ):
                remove_records(self.cluster, result.job_id)
        logger.info("retention: %d finished job result(s) past their retention deleted", deleted)
        return deleted
