"""The cleanups of the jobs a leadership finished, done after what their freed slots allow.

The look that finishes a job records its result (DIRTY, in one transaction with its
assignment's delete: the member's slot is free) and keeps the job's cleanup here (its records,
its handle and payload, the history kept beside its logs: a dozen writes and storage deletes).
The leader first places the jobs waiting for the freed slots, in the same turn of the loop; the
daemon's member launches them from an event of the same loop; the cleanups run at the end of
the daemon's turns (:meth:`FinishedJobs.run`): at least one per turn, then until an event
waits. While any is left the loop does not wait for events.

Nothing is lost if a cleanup never runs here: the result is DIRTY, in the cleanup index, and
the next look or leadership cleans the job up from there, as after a crash between the two
steps. A cleanup that meets an outage is kept and tried again :data:`RETRY` seconds later, not
at every turn (the loop, not waiting while one is due, would spin).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from zkstore.errors import StoreUnavailable
from zkstore.jobs.snapshot import JobSnapshot

__all__ = ["RETRY", "Cleanup", "FinishedJobs"]

#: Seconds before a cleanup that met an outage (or could not finish: a lock still held) is
#: tried again.
RETRY = 2.0

#: One job's cleanup, with what the look that finished it left for it.
Cleanup = Callable[[], None]


class FinishedJobs:
    """The jobs whose results this leadership recorded and whose cleanups are still to run,
    oldest first (the leader's loop thread only)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._cleanups: dict[str, tuple[JobSnapshot, Cleanup]] = {}
        self._clock = clock
        self._resume = 0.0

    def add(self, job: JobSnapshot, cleanup: Cleanup) -> None:
        """The job's result is recorded: its cleanup, for later."""
        self._cleanups[job.job_id] = (job, cleanup)

    def take(self, job_id: str) -> Cleanup | None:
        """The job's cleanup, no longer kept here (a look at it does it now), if kept."""
        kept = self._cleanups.pop(job_id, None)
        return None if kept is None else kept[1]

    def __contains__(self, job_id: object) -> bool:
        """Whether the job's result is recorded and its cleanup still to run."""
        return job_id in self._cleanups

    @property
    def due(self) -> bool:
        """Whether a cleanup is to run now (some are kept, and no outage asked to wait)."""
        return bool(self._cleanups) and self._clock() >= self._resume

    def run(
        self, act: Callable[[JobSnapshot, Cleanup], None], give_way: Callable[[], bool]
    ) -> None:
        """Run the cleanups with ``act(job, cleanup)`` (the leader's guard), oldest first: at
        least one, then until ``give_way()``. A cleanup stays kept until ``act`` returns; an
        outage (:class:`StoreUnavailable`) keeps it, postpones them all by :data:`RETRY`, and
        is raised."""
        done = 0
        while self.due and not (done and give_way()):
            job_id = next(iter(self._cleanups))
            job, cleanup = self._cleanups[job_id]
            try:
                act(job, cleanup)
            except StoreUnavailable:
                self._resume = self._clock() + RETRY
                raise
            self._cleanups.pop(job_id, None)
            done += 1
