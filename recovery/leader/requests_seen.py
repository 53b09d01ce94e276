"""When this leadership first saw each attempt's cancel and stop: what their graces count from.

A cancel's grace counts from ZooKeeper's ``ctime`` of its node, never from the date its writer
stamped (:attr:`~zkstore.jobs.snapshot.JobSnapshot.cancel_asked`). A job's identity may create
any name under its job's node, though: job code that makes a ``cancel`` of its own (before the
operator's, whose create then finds it there) and makes it again and again, deleting and
creating it in one transaction, gets a new ``ctime`` each time, and its grace never ends; so
does a ``stop``'s checkpoint deadline. The leader therefore dates each request no later than
the first time it saw one for the attempt: a request made again is as old as the first.

Pure memory of one leadership (a new leader starts again from the nodes' ``ctime``), bounded: an
attempt's entry goes with its job's cleanup, and the oldest go first past :data:`KEPT`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from zkstore.jobs.snapshot import JobSnapshot

__all__ = ["KEPT", "RequestsSeen"]

#: The attempts remembered at most (a job with a request is cleaned up soon after it ends).
KEPT = 10_000


@dataclass(frozen=True)
class _Seen:
    attempt: int | None
    cancel: datetime | None = None
    stop: datetime | None = None


def _earliest(first: datetime | None, now: datetime | None) -> datetime | None:
    if first is None or now is None:
        return first or now
    return min(first, now)


class RequestsSeen:
    """The first sighting of each attempt's cancel and stop in this leadership (loop thread)."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._seen: dict[str, _Seen] = {}

    def dated(self, job: JobSnapshot) -> JobSnapshot:
        """``job`` with its cancel and stop dated no later than their first sighting for its
        attempt (:attr:`~zkstore.jobs.snapshot.JobSnapshot.cancel_made`, ``stop_made``)."""
        if job.cancel is None and job.stop is None:
            return job  # absent, or unreadable (ended at once): nothing to date
        attempt = job.status.attempt if job.status is not None else None
        seen = self._seen.pop(job.job_id, None)
        if seen is None or seen.attempt != attempt:
            seen = _Seen(attempt)
        seen = _Seen(
            attempt,
            cancel=_earliest(seen.cancel, job.cancel_asked),
            stop=_earliest(seen.stop, job.stop_asked),
        )
        self._seen[job.job_id] = seen  # newest last: the oldest go first
        while len(self._seen) > self._kept:
            self._seen.pop(next(iter(self._seen)))
        return replace(
            job,
            cancel_made=seen.cancel if job.cancel is not None else job.cancel_made,
            stop_made=seen.stop if job.stop is not None else job.stop_made,
        )

    def forget(self, job_id: str) -> None:
        """The job is cleaned up: nothing of it to date any more."""
        self._seen.pop(job_id, None)
