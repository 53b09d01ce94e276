"""The conditions the leader keeps on jobs (:mod:`zkstore.conditions`): a notification of the
job it dropped undelivered (its destination refused by this leader's settings, or past the
outbox's retention) or did not write (past ``--notify-max-per-job``), cleared once a later
notification of the job is delivered; deleted with the job's result.

Called from the notification sender's thread (its settling of each answer) and the loop's
(retention): every write is fenced on the leadership, and a job's conditions are read at most
once a leadership unless this leadership made them hold.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from zkstore.cluster.fleet_protocol import FleetReading
from zkstore.conditions import JOB, NOTIFICATION_DROPPED, Condition, ConditionStore
from zkstore.errors import HandleNotFound, NotLeader, StoreUnavailable, ZkStoreError
from zkstore.jobs.stops import redact_url
from zkstore.layout import Layout
from zkstore.lifecycle.outbox import Pending
from zkstore.protocol import CLUSTER_SETTINGS
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.ops import Delete, Fence

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["JobConditions"]

logger = logging.getLogger(__name__)


class JobConditions:
    """One leadership's writer of job conditions (any thread)."""

    def __init__(
        self, zk: ZooKeeper, layout: Layout, fence: Fence, raised: Counter[str] | None = None
    ) -> None:
        """``raised``: where each condition made to hold is counted (a metric)."""
        self.zk = zk
        self.layout = layout
        self.fence = fence
        self.store = ConditionStore(zk, layout)
        self._protocol = FleetReading(zk, layout)
        self._lock = threading.Lock()
        #: jobs whose conditions this leadership read or wrote, and those it made hold
        self._seen: set[str] = set()
        self._held: dict[str, set[str]] = {}
        self.raised: Counter[str] = raised if raised is not None else Counter()

    def _allowed(self) -> bool:
        with self._lock:
            return self._protocol.allows(CLUSTER_SETTINGS)

    def dropped(self, item: Pending, why: str) -> None:
        """A notification of the job was dropped undelivered: say so on the job."""
        entry = item.entry
        refused = "refused" in why
        self._hold(
            entry.job_id,
            redact_url(entry.url),
            "RefusedDestination" if refused else "Expired",
            f"notification of {entry.state} (attempt {entry.attempt}) to "
            f"{redact_url(entry.url)} dropped after {entry.tries} tries: {why}"
            + (
                " (not among the leader's --notify-allowed-hosts: zkstore cluster settings)"
                if refused
                else ""
            ),
        )

    def refused(self, job_id: str, state: str, url: str, message: str) -> None:
        """An event of the job was not written at all (past its bound): say so on the job."""
        self._hold(
            job_id,
            redact_url(url),
            "TooManyWaiting",
            f"its {state} event to {redact_url(url)} is not sent: {message}",
        )

    def _hold(self, job_id: str, destination: str, reason: str, message: str) -> None:
        if not self._allowed():
            return
        condition = Condition(NOTIFICATION_DROPPED, reason, message, utc_moment())
        if self._write(job_id, lambda: self.store.hold(JOB, job_id, condition, fence=self.fence)):
            with self._lock:
                self.raised[NOTIFICATION_DROPPED] += 1
        with self._lock:
            self._seen.add(job_id)
            self._held.setdefault(job_id, set()).add(destination)

    def delivered(self, item: Pending) -> None:
        """A notification of the job was delivered: a drop of one to the same destination
        no longer holds (one to another destination still does)."""
        job_id, destination = item.entry.job_id, redact_url(item.entry.url)
        with self._lock:
            if job_id in self._seen and destination not in self._held.get(job_id, ()):
                return
            self._seen.add(job_id)
            self._held.get(job_id, set()).discard(destination)
        if self._allowed():
            self._write(
                job_id,
                lambda: self.store.clear(
                    JOB,
                    job_id,
                    [NOTIFICATION_DROPPED],
                    fence=self.fence,
                    when=lambda held: f" to {destination} " in held.message,
                ),
            )

    def forget(self, job_ids: Iterable[str]) -> None:
        """The jobs' results are deleted: delete their conditions too (one pipelined round)."""
        ids = list(job_ids)
        if not ids or not self._allowed():
            return
        paths = [self.store.path(JOB, job_id) for job_id in ids]
        errors = self.zk.commit_many([[Delete(p)] for p in paths], fence=self.fence)
        for error in errors:
            if isinstance(error, NotLeader):
                raise error
            if error is not None and not isinstance(error, HandleNotFound):
                logger.info("conditions of a deleted result kept for now: %s", error)

    def _write(self, job_id: str, change: Callable[[], bool]) -> bool:
        try:
            return change()
        except (NotLeader, StoreUnavailable):
            raise
        except ZkStoreError as exc:
            logger.warning("job %s: its conditions are not written (%s)", job_id, exc)
            return False
