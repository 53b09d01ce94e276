"""What ``jobs wait`` says as a job changes (issue 27): a lost attempt says so and why, no
duplicate RUNNING line, never "STARTING (attempt 1)" again after its driver died, and Ctrl-C says
the job goes on and how to follow it again."""

from __future__ import annotations

from typing import Any

import pytest

from recovery.cli.progress import Followed, follow_lines, interrupted_lines, start, state_line
from tests import builders
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.records.job_records import JobStatus, Outcome, RunningInfo, SparkApp
from zkstore.records.job_states import CLEAN, FAILED, PENDING, RESTARTING, STARTING, SUCCEEDED
from zkstore.records.result_records import JobResult
from zkstore.records.strict import parse_time

pytestmark = pytest.mark.unit

T = "2026-11-23T12:00:00.000Z"
RESULT = JobResult(
    version=0, job_id="etl", state=CLEAN, outcome=SUCCEEDED, attempts=1, finished=parse_time(T)
)
KILLED = "driver of attempt 1 on host-a killed by signal 9 and left no outcome"


def snap(**records: Any) -> JobSnapshot:
    return builders.snapshot("etl", summary={"max_attempts": 3, "max_lost": 10}, **records)


def status(state: str, attempt: int, **kw: Any) -> JobStatus:
    return JobStatus(version=attempt, state=state, attempt=attempt, updated=parse_time(T), **kw)


def running(attempt: int, host: str = "host-a", pid: int = 100) -> RunningInfo:
    return RunningInfo(version=0, attempt=attempt, host=host, pid=pid, started=parse_time(T))


def told(*snapshots: JobSnapshot) -> list[str]:
    seen, lines = Followed(), []
    for snapshot in snapshots:
        more, seen = follow_lines(seen, snapshot)
        lines += more
    return lines


def test_a_run_is_told_once_per_change_and_spark_on_a_line_of_its_own() -> None:
    spark = SparkApp(
        version=0, attempt=1, app_id="local-1", master="local[2]", started=parse_time(T)
    )
    on_a = status(STARTING, 1, daemon_id="host-a")
    lines = told(
        snap(status=status(PENDING, 0, reason="no free driver slot (4 of 4 in use)")),
        snap(status=on_a),
        snap(status=on_a, running=running(1)),
        snap(status=on_a, running=running(1), spark=spark),
        snap(status=on_a, running=running(1), spark=spark),  # the control ack changed, say
        snap(
            status=on_a,
            result=JobResult(
                version=0,
                job_id="etl",
                state=CLEAN,
                outcome=SUCCEEDED,
                attempts=1,
                finished=parse_time(T),
            ),
        ),
    )
    assert lines == [
        "PENDING: no free driver slot (4 of 4 in use)",
        "STARTING attempt 1 on host-a",
        "RUNNING attempt 1 on host-a pid 100",
        "attempt 1: Spark application local-1",
    ]


def test_a_killed_driver_is_told_as_lost_with_why_never_as_starting_again() -> None:
    on_a = status(STARTING, 1, daemon_id="host-a")
    lines = told(
        snap(status=on_a, running=running(1)),
        snap(status=on_a),  # the driver vanished; the leader has not acted yet
        snap(status=on_a),
        snap(status=status(STARTING, 2, daemon_id="host-b", lost=1, last_error=KILLED)),
        snap(status=status(STARTING, 2, daemon_id="host-b", lost=1), running=running(2, "host-b")),
    )
    assert lines == [
        "RUNNING attempt 1 on host-a pid 100",
        "attempt 1: its driver on host-a is gone without an outcome; waiting for the leader "
        "to record how it ended",
        f"attempt 1 was lost: {KILLED} (lost attempts do not count against --max-attempts: "
        "1 of 10 allowed)",
        "STARTING attempt 2 on host-b",
        "RUNNING attempt 2 on host-b pid 100",
    ]
    assert not any(line.startswith("STARTING attempt 1") for line in lines[1:])


def test_a_loss_seen_late_is_still_told() -> None:
    lines = told(
        snap(status=status(STARTING, 1, daemon_id="host-a"), running=running(1)),
        snap(status=status(STARTING, 2, lost=1, last_error=KILLED), running=running(2)),
    )
    assert lines[1].startswith("attempt 1 was lost: driver of attempt 1 on host-a killed")
    assert lines[2] == "RUNNING attempt 2 on host-a pid 100"


def test_a_failure_says_its_error_and_the_count_then_when_the_next_starts() -> None:
    error = "Traceback (most recent call last):\n  File x\nValueError: bad row 17"
    on_a = status(STARTING, 1, daemon_id="host-a")
    outcome = Outcome(version=0, attempt=1, outcome=FAILED, finished=parse_time(T), error=error)
    restarting = status(
        RESTARTING,
        1,
        failures=1,
        last_error=error,
        not_before=parse_time("2026-11-23T12:00:05.000Z"),
    )
    lines = told(
        snap(status=on_a, running=running(1)),
        snap(status=on_a, outcome=outcome),  # ENDED: nothing yet, the leader decides
        snap(status=restarting, outcome=outcome),
    )
    assert lines == [
        "RUNNING attempt 1 on host-a pid 100",
        "attempt 1 failed: ValueError: bad row 17 (1 of 3 attempts used)",
        "RESTARTING: attempt 2 at 12:00:05 UTC",
    ]


def test_following_a_job_late_summarizes_its_past_once() -> None:
    job = snap(
        status=status(STARTING, 4, failures=1, lost=2, last_error=KILLED), running=running(4)
    )
    lines, seen = start(job)
    assert lines == [
        f"earlier attempts: 1 failed, 2 lost; the last: {KILLED}",
        "RUNNING attempt 4 on host-a pid 100",
    ]
    assert follow_lines(seen, job)[0] == []


def test_ctrl_c_says_the_job_goes_on_and_how_to_follow_it() -> None:
    lines = interrupted_lines("etl")
    assert lines[0] == "interrupted: only this command stopped; job etl goes on in the cluster"
    assert "zkstore jobs wait etl" in lines[1]
    assert "zkstore jobs logs etl --follow" in lines[2]
    assert "zkstore jobs cancel etl" in lines[3]


def test_a_pending_job_without_a_reason() -> None:
    assert state_line(snap(status=status(PENDING, 0))) == "PENDING: waiting for its first start"


def test_a_driver_the_leader_ended_is_told_as_ended_with_why_not_as_lost() -> None:
    """Issue 49: on a timeout, ``submit --wait`` said the driver was "gone without an
    outcome; the leader will count it as lost", then "attempt 1 failed: TIMED_OUT"."""
    from zkstore.jobs.stops import EndRequest

    on_a = status(STARTING, 1, daemon_id="host-a")
    end = EndRequest(
        version=0,
        attempt=1,
        reason="TIMED_OUT",
        requested=parse_time(T),
        grace_ms=0,
        detail="it ran longer than --timeout 1s",
        leader="d1",
    )
    lines = told(
        snap(status=on_a, running=running(1)),
        snap(status=on_a, end=end),
        snap(status=status(RESTARTING, 1, daemon_id="host-a", failures=1, last_error="timed out")),
    )
    assert lines[1] == (
        "attempt 1: its driver on host-a was ended by the leader (TIMED_OUT: it ran longer "
        "than --timeout 1s)"
    )
    assert not any("lost" in line for line in lines), lines
