"""An attempt's end is acted on only once its driver is known gone (issue 21, finding 3).

A driver records its outcome (releasing ``running``), then closes its session and exits. Until
its member has seen the process end, the leader neither releases the attempt's artifacts nor
places the next attempt: first the leader's decision, branch by branch (pure), then a real
driver that lingers after its outcome.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recovery.leader.decide import CleanUp, Local, Restart, Wait, decide
from recovery.settings import DaemonSettings
from tests import builders
from zkstore.config import StoreConfig
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.records.job_records import JobStatus, Outcome
from zkstore.records.job_states import CANCELLED, DIRTY, FAILED, STARTING
from zkstore.records.result_records import JobResult
from zkstore.records.strict import parse_time

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
SETTINGS = DaemonSettings(
    store=StoreConfig(session_timeout=10.0), restart_backoff=1.0, start_timeout=60
)


def ago(seconds: float) -> str:
    return (
        (NOW - timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def failed_attempt(finished: float, **records: Any) -> JobSnapshot:
    status = JobStatus(
        version=4, state=STARTING, attempt=1, updated=parse_time(ago(120)), daemon_id="m"
    )
    outcome = Outcome(
        version=0, attempt=1, outcome=FAILED, finished=parse_time(ago(finished)), error="x"
    )
    return builders.snapshot(
        summary={"max_attempts": 3}, created=ago(600), status=status, outcome=outcome, **records
    )


def test_an_outcome_is_acted_on_once_the_member_saw_the_driver_exit() -> None:
    waiting = decide(failed_attempt(1), Local(member_alive=True), SETTINGS, NOW)
    assert isinstance(waiting, Wait) and "waiting for its driver to exit" in waiting.reason
    assert waiting.until == NOW + timedelta(seconds=59), "at most the launch deadline"
    exited = Local(member_alive=True, exited="exited with code 1")
    assert isinstance(decide(failed_attempt(1), exited, SETTINGS, NOW), Restart)


def test_with_no_member_to_say_the_end_waits_one_session_timeout() -> None:
    waiting = decide(failed_attempt(1), Local(member_alive=False), SETTINGS, NOW)
    assert isinstance(waiting, Wait) and waiting.until == NOW + timedelta(seconds=9)
    assert isinstance(decide(failed_attempt(11), Local(), SETTINGS, NOW), Restart)
    stuck = failed_attempt(61)  # its member is up but never saw it end: a stuck driver
    assert isinstance(decide(stuck, Local(member_alive=True), SETTINGS, NOW), Restart)


def test_a_cleanup_waits_for_a_driver_that_ended_after_the_result() -> None:
    """A quarantined job cancelled while its driver ran: the result was recorded first."""
    result = JobResult(
        version=0,
        job_id="j",
        state=DIRTY,
        outcome=CANCELLED,
        attempts=1,
        finished=parse_time(ago(5)),
    )
    later = failed_attempt(1, result=result)
    waiting = decide(later, Local(member_alive=True), SETTINGS, NOW)
    assert isinstance(waiting, Wait) and waiting.until == NOW + timedelta(seconds=9)
    earlier = failed_attempt(6, result=result)  # ended before the result: gone long since
    assert isinstance(decide(earlier, Local(member_alive=True), SETTINGS, NOW), CleanUp)


# -- a real driver that lingers after its outcome ---------------------------------------------
