"""What submit --wait prints of the attempts it sees."""

from __future__ import annotations

import pytest

from zkstore.records.job_states import FAILED, SUCCEEDED
from zkstore.records.strict import parse_time

pytestmark = pytest.mark.unit


def test_a_finished_attempt_is_never_shown_as_starting_again() -> None:
    """The moment between the driver's outcome and the leader's reaction is ENDED."""
    from zkstore.jobs.snapshot import ENDED, JobSnapshot
    from zkstore.records.job_records import JobStatus, Outcome
    from zkstore.records.job_states import STARTING

    status = JobStatus(
        version=3, state=STARTING, attempt=2, updated=parse_time("2026-11-21T00:00:00Z")
    )
    ended = Outcome(
        version=0, attempt=2, outcome=SUCCEEDED, finished=parse_time("2026-11-21T00:00:01Z")
    )
    older = Outcome(
        version=0, attempt=1, outcome=FAILED, finished=parse_time("2026-11-21T00:00:01Z")
    )
    assert JobSnapshot("j", status=status, outcome=ended).state == ENDED
    assert JobSnapshot("j", status=status, outcome=older).state == STARTING
