"""The summary a job was submitted with, wherever the store keeps it now: its current handle, its
result's copy (once it ended) or its quarantine entry's copy of the handle. Idempotent submission
compares a new submission with it; a schedule's fire recognizes its own run by it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zkstore.errors import ZkStoreError
from zkstore.layout import Layout
from zkstore.records.handle import Handle, SummaryValue
from zkstore.records.result_records import JobResult, QuarantineEntry

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["AFTER_SCHEDULE", "JOB_KEYS", "SCHEDULE", "SCHEDULED", "stored_summary"]

#: The summary fields of a schedule's run: the schedule that fired it and its window.
SCHEDULE = "schedule"
SCHEDULED = "scheduled"
#: the schedule a schedule's run chains after (its run of the same window must succeed first)
AFTER_SCHEDULE = "after_schedule"
#: The summary fields that are the job's, not its definition's: a new definition given to a
#: stopped job (``jobs resume --definition``, or new options) keeps them.
JOB_KEYS = (SCHEDULE, SCHEDULED, AFTER_SCHEDULE)


def stored_summary(zk: ZooKeeper, layout: Layout, job_id: str) -> dict[str, SummaryValue] | None:
    """The job's summary (one pipelined read of three nodes); None if the store has no job
    ``job_id`` or its record is unreadable (never taken for the same submission)."""
    paths = [layout.job_handle(job_id), layout.result(job_id), layout.quarantine_entry(job_id)]
    current, result, quarantined = zk.get_many(paths)
    try:
        if current is not None:
            return dict(Handle.from_znode(current[0], current[1], paths[0]).summary)
        if result is not None:
            kept_summary = JobResult.from_znode(result[0], result[1], paths[1]).summary
            return None if kept_summary is None else dict(kept_summary)
        if quarantined is not None:
            kept = QuarantineEntry.from_znode(*quarantined, paths[2]).handle
            return None if kept is None else dict(kept.summary)
    except ZkStoreError:
        return None
    return None
