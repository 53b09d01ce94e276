"""A leader dates each attempt's cancel and stop no later than it first saw one: a job that
makes its own request again and again (a new ``ctime`` each time) cannot postpone its end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recovery.leader.decide import CANCEL_MARGIN, EndAttempt, Local, decide
from recovery.leader.requests_seen import RequestsSeen
from recovery.settings import DaemonSettings
from zkstore.config import StoreConfig
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.stops import StopRequest
from zkstore.records.handle import Handle
from zkstore.records.job_records import CancelRequest, JobStatus, RunningInfo
from zkstore.records.job_states import STARTING

pytestmark = pytest.mark.unit

FIRST = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
GRACE = 2.0
SETTINGS = DaemonSettings(store=StoreConfig(), cancel_grace=GRACE)
HANDLE = Handle(
    uri="file:///s/x",
    size=1,
    sha256="a" * 64,
    created="2026-11-30T08:00:00.000Z",
    writer="w",
    summary={"max_attempts": 3, "name": "n"},
    version=0,
)


def running(attempt: int, made: datetime, *, stop: bool = False) -> JobSnapshot:
    """A running attempt whose cancel (or stop) node ZooKeeper made at ``made``."""
    request = CancelRequest(version=0, requested=FIRST, by="the job", reason="its own")
    return JobSnapshot(
        job_id="j",
        handle=HANDLE,
        status=JobStatus(version=3, state=STARTING, attempt=attempt, daemon_id="d1", updated=FIRST),
        running=RunningInfo(version=0, attempt=attempt, host="h", pid=1, started=FIRST),
        cancel=None if stop else request,
        cancel_made=None if stop else made,
        stop=StopRequest(version=0, requested=FIRST) if stop else None,
        stop_made=made if stop else None,
    )


def test_a_cancel_made_again_is_as_old_as_the_first_one_seen() -> None:
    seen = RequestsSeen()
    assert seen.dated(running(1, FIRST)).cancel_made == FIRST
    later = FIRST + timedelta(seconds=30)
    again = seen.dated(running(1, later))
    assert again.cancel_made == FIRST and again.cancel_asked == FIRST
    # so its grace is over: the leader ends the attempt (a ctime-counted grace would wait on)
    now = later + timedelta(seconds=1)
    assert isinstance(decide(again, Local(member_alive=True), SETTINGS, now), EndAttempt)
    assert not isinstance(
        decide(running(1, later), Local(member_alive=True), SETTINGS, now), EndAttempt
    )
    assert now - later < timedelta(seconds=GRACE + CANCEL_MARGIN)


def test_a_new_attempt_and_a_cleanup_start_again_and_the_memory_is_bounded() -> None:
    seen = RequestsSeen(kept=2)
    seen.dated(running(1, FIRST))
    later = FIRST + timedelta(seconds=30)
    assert seen.dated(running(2, later)).cancel_made == later  # another attempt's
    assert seen.dated(running(2, later, stop=True)).stop_made == later
    assert seen.dated(running(2, later + timedelta(seconds=5), stop=True)).stop_made == later
    seen.forget("j")
    assert seen.dated(running(2, later + timedelta(seconds=9))).cancel_made == later + timedelta(
        seconds=9
    )
    for n in range(5):
        seen.dated(JobSnapshot(job_id=f"k{n}", cancel=running(1, FIRST).cancel))
    assert len(seen._seen) == 2  # the newest two


def test_a_job_without_requests_is_not_remembered() -> None:
    seen = RequestsSeen()
    plain = JobSnapshot(job_id="j")
    assert seen.dated(plain) is plain and not seen._seen
