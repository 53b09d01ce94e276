"""The leader's decision for the lifecycle, branch by branch: stop steps, the limits
(TIMED_OUT, STUCK), how an ended attempt is counted, and the retry pacing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recovery.leader.decide import (
    CANCEL_END_GRACE,
    CANCEL_MARGIN,
    Adopt,
    EndAttempt,
    Finish,
    Local,
    Nothing,
    RecordStopped,
    Restart,
    Start,
    Wait,
    decide,
)
from recovery.settings import DaemonSettings
from zkstore.config import StoreConfig
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.stops import EndRequest, Heartbeat, StopRequest
from zkstore.records.handle import Handle
from zkstore.records.job_records import CancelRequest, JobStatus, Outcome, RunningInfo
from zkstore.records.job_states import CANCELLED, FAILED, STARTING, STOPPED, STUCK, TIMED_OUT
from zkstore.records.strict import parse_time

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
SETTINGS = DaemonSettings(store=StoreConfig(), restart_backoff=1.0, start_timeout=60)
ALIVE = Local(member_alive=True)
EXITED = Local(member_alive=True, exited="exited with code -9")


def ago(seconds: float) -> str:
    return (
        (NOW - timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def job(summary: dict[str, Any] | None = None, **records: Any) -> JobSnapshot:
    handle = Handle(
        uri="file:///s/x",
        size=1,
        sha256="a" * 64,
        created=ago(3600),
        writer="w",
        summary={"max_attempts": 3, "name": "n", **(summary or {})},
        version=0,
    )
    return JobSnapshot(job_id="j", handle=handle, **records)


def status(state: str = STARTING, attempt: int = 1, **kw: Any) -> JobStatus:
    return JobStatus(
        version=4,
        state=state,
        attempt=attempt,
        updated=parse_time(kw.pop("updated", ago(100))),
        **kw,
    )


def running(started: float = 100, attempt: int = 1) -> RunningInfo:
    return RunningInfo(
        version=0, attempt=attempt, host="h", pid=1, started=parse_time(ago(started))
    )


def end(reason: str, attempt: int = 1) -> EndRequest:
    return EndRequest(
        version=0,
        attempt=attempt,
        reason=reason,
        requested=parse_time(ago(5)),
        grace_ms=30000,
        detail="why",
    )


def decided(snapshot: JobSnapshot, local: Local = ALIVE) -> Any:
    return decide(snapshot, local, SETTINGS, NOW)


# -- limits ----------------------------------------------------------------------------------


def test_an_attempt_over_its_timeout_is_ended_as_timed_out() -> None:
    action = decided(job({"timeout": 60}, status=status(), running=running(started=61)))
    assert isinstance(action, EndAttempt) and action.why == TIMED_OUT and action.attempt == 1
    assert "over its --timeout of 1m" in action.detail


def test_within_its_timeout_the_leader_looks_again_at_the_deadline() -> None:
    action = decided(job({"timeout": 60}, status=status(), running=running(started=50)))
    assert isinstance(action, Adopt) and action.until == NOW + timedelta(seconds=10)


def test_without_limits_a_driver_is_adopted_with_no_deadline() -> None:
    action = decided(job(status=status(), running=running(started=10_000)))
    assert isinstance(action, Adopt) and action.until is None


def test_an_attempt_being_ended_is_not_ended_twice() -> None:
    snapshot = job({"timeout": 60}, status=status(), running=running(61), end=end(TIMED_OUT))
    assert isinstance(decided(snapshot), Adopt)


def test_no_progress_for_the_progress_timeout_is_stuck() -> None:
    beat = Heartbeat(version=0, attempt=1, at=parse_time(ago(200)), beats=4)
    snapshot = job(
        {"progress_timeout": 120}, status=status(), running=running(1000), heartbeat=beat
    )
    action = decided(snapshot)
    assert isinstance(action, EndAttempt) and action.why == STUCK
    fresh = Heartbeat(version=0, attempt=1, at=parse_time(ago(10)), beats=5)
    kept = decided(
        job({"progress_timeout": 120}, status=status(), running=running(1000), heartbeat=fresh)
    )
    assert isinstance(kept, Adopt) and kept.until == NOW + timedelta(seconds=110)


def test_placed_and_not_running_past_the_start_timeout_is_timed_out() -> None:
    action = decided(job({"start_timeout": 30}, status=status(updated=ago(31))))
    assert isinstance(action, EndAttempt) and action.why == TIMED_OUT
    waiting = decided(job({"start_timeout": 30}, status=status(updated=ago(10))))
    assert isinstance(waiting, Wait) and waiting.until == NOW + timedelta(seconds=20)


def test_an_ended_attempt_waits_until_its_driver_is_known_dead() -> None:
    snapshot = job({"timeout": 60}, status=status(), end=end(TIMED_OUT))
    assert isinstance(decided(snapshot, ALIVE), Wait)


def test_a_timed_out_attempt_counts_as_a_failure_once_dead() -> None:
    snapshot = job({"timeout": 60}, status=status(), end=end(TIMED_OUT))
    action = decided(snapshot, EXITED)
    assert isinstance(action, Restart)
    assert (action.failures, action.lost, action.ended) == (1, 0, TIMED_OUT)
    assert action.error == "TIMED_OUT: why"
    last = job({"timeout": 60, "max_attempts": 1}, status=status(), end=end(TIMED_OUT))
    final = decided(last, EXITED)
    assert isinstance(final, Finish) and final.outcome == FAILED and final.ended == TIMED_OUT


def test_a_stuck_attempt_counts_as_lost_and_is_placed_again_at_once() -> None:
    snapshot = job({"progress_timeout": 60}, status=status(), end=end(STUCK))
    action = decided(snapshot, EXITED)
    assert isinstance(action, Start) and action.attempt == 2
    assert action.ended is not None and (action.ended.failures, action.ended.lost) == (0, 1)


# -- retry pacing ----------------------------------------------------------------------------


def failed(attempt: int = 1, started: float | None = None) -> Outcome:
    return Outcome(
        version=0,
        attempt=attempt,
        outcome=FAILED,
        finished=parse_time(ago(1)),
        error="boom",
        started=None if started is None else parse_time(ago(started)),
    )


def test_a_jobs_own_retry_delay_paces_its_failures() -> None:
    snapshot = job({"retry_delay": 30, "retry_jitter": 0}, status=status(), outcome=failed())
    action = decided(snapshot, EXITED)
    assert isinstance(action, Restart) and action.not_before == NOW + timedelta(seconds=30)


def test_failures_and_lost_attempts_keep_separate_streaks() -> None:
    # Two lost attempts in a row before: the failure's delay is still the first one.
    before = status(attempt=3, lost=2, streak_lost=2, streak_failures=0)
    action = decided(job({"retry_jitter": 0}, status=before, outcome=failed(3)), EXITED)
    assert isinstance(action, Restart) and action.not_before == NOW + timedelta(seconds=1)
    assert (action.streak_failures, action.streak_lost) == (1, 2)


def test_a_stable_run_resets_the_delay() -> None:
    before = status(attempt=4, failures=3, streak_failures=3)
    summary = {"retry_jitter": 0, "max_attempts": 10, "retry_reset_after": 600}
    short = decided(job(summary, status=before, outcome=failed(4, started=100)), EXITED)
    long = decided(job(summary, status=before, outcome=failed(4, started=700)), EXITED)
    assert isinstance(short, Restart) and short.not_before == NOW + timedelta(seconds=8)
    assert isinstance(long, Restart) and long.not_before == NOW + timedelta(seconds=1)
    assert (long.failures, long.streak_failures) == (4, 1)  # the attempts still count


# -- stop and resume -------------------------------------------------------------------------


def stop(checkpoint: bool = False, timeout: float = 60) -> StopRequest:
    return StopRequest(
        version=0,
        requested=parse_time(ago(5)),
        by="me",
        checkpoint=checkpoint,
        token="t1" if checkpoint else None,
        timeout_ms=round(timeout * 1000),
    )


def test_a_stop_of_a_running_attempt_ends_it() -> None:
    action = decided(job(status=status(), running=running(), stop=stop()))
    assert isinstance(action, EndAttempt) and action.why == STOPPED


def test_a_stop_with_a_checkpoint_waits_for_it_then_ends() -> None:
    waiting = decided(job(status=status(), running=running(), stop=stop(checkpoint=True)))
    assert isinstance(waiting, Wait) and waiting.until is not None
    answered = Handle(
        uri="file:///c",
        size=1,
        sha256="b" * 64,
        created=ago(1),
        writer="w",
        summary={"control_checkpoint": "t1", "checkpoint_id": 3},
        version=0,
    )
    snapshot = job(
        status=status(), running=running(), stop=stop(checkpoint=True), newest_checkpoint=answered
    )
    action = decided(snapshot)
    assert isinstance(action, EndAttempt) and "after the checkpoint" in action.detail
    late = job(status=status(), running=running(), stop=stop(checkpoint=True, timeout=2))
    assert isinstance(decided(late), EndAttempt)


def test_a_stops_checkpoint_deadline_counts_from_when_zookeeper_made_the_stop() -> None:
    """A stop dated an hour ahead by its writer's clock waited an hour for the checkpoint it
    asked; one dated an hour behind gave it no time. The node's ``ctime`` is ZooKeeper's."""
    ahead = replace(stop(checkpoint=True, timeout=60), requested=NOW + timedelta(hours=1))
    made = NOW - timedelta(seconds=61)
    late = decided(job(status=status(), running=running(), stop=ahead, stop_made=made))
    assert isinstance(late, EndAttempt) and "without the checkpoint" in late.detail, late
    behind = replace(stop(checkpoint=True, timeout=60), requested=NOW - timedelta(hours=1))
    made = NOW - timedelta(seconds=59)
    fresh = decided(job(status=status(), running=running(), stop=behind, stop_made=made))
    assert isinstance(fresh, Wait) and "checkpoint" in fresh.reason, fresh


def test_a_stopped_attempt_known_dead_is_recorded_stopped() -> None:
    snapshot = job(status=status(), stop=stop(), end=end(STOPPED))
    assert isinstance(decided(snapshot, ALIVE), Wait)
    assert isinstance(decided(snapshot, EXITED), RecordStopped)


def test_stopped_stays_until_resumed_or_cancelled() -> None:
    stopped = status(STOPPED, attempt=2, failures=1)
    assert isinstance(decided(job(status=stopped, stop=stop())), Nothing)
    resumed = decided(job(status=stopped))
    assert isinstance(resumed, Start) and resumed.attempt == 3 and resumed.resume
    cancel = CancelRequest(version=0, requested=parse_time(ago(1)), by="me")
    finished = decided(job(status=stopped, stop=stop(), cancel=cancel))
    assert isinstance(finished, Finish) and finished.outcome == CANCELLED


# -- a cancel the driver does not carry out (issue 54) ----------------------------------------


def cancel(seconds_ago: float) -> CancelRequest:
    return CancelRequest(version=0, requested=parse_time(ago(seconds_ago)), by="u@h")


def test_a_cancelled_driver_gets_its_grace_then_the_leader_ends_it() -> None:
    grace = SETTINGS.cancel_grace
    within = decided(job(status=status(), running=running(), cancel=cancel(grace)))
    assert isinstance(within, Adopt) and within.until == NOW + timedelta(seconds=CANCEL_MARGIN)
    past = decided(job(status=status(), running=running(), cancel=cancel(grace + CANCEL_MARGIN)))
    assert isinstance(past, EndAttempt) and past.why == STOPPED and past.attempt == 1
    assert past.grace == CANCEL_END_GRACE and "cancelled" in past.detail
    # being ended: not ended twice
    ending = job(status=status(), running=running(), cancel=cancel(600), end=end(STOPPED))
    assert isinstance(decided(ending), Adopt)


def test_the_grace_counts_from_when_zookeeper_made_the_cancel_not_from_its_writers_date() -> None:
    """A cancel dated an hour ahead (its writer's clock, or a job that planted it so) kept
    the leader from ending a job that ignored it for that hour: ``min(requested, now)`` moved
    with the clock. The node's ``ctime`` is ZooKeeper's, and no writer's to set."""
    grace = SETTINGS.cancel_grace + CANCEL_MARGIN
    ahead = CancelRequest(version=0, requested=NOW + timedelta(hours=1), by="u@h")
    made = NOW - timedelta(seconds=grace + 1)
    past = decided(job(status=status(), running=running(), cancel=ahead, cancel_made=made))
    assert isinstance(past, EndAttempt) and past.why == STOPPED, past
    behind = CancelRequest(version=0, requested=NOW - timedelta(hours=1), by="u@h")
    fresh = decided(job(status=status(), running=running(), cancel=behind, cancel_made=NOW))
    assert isinstance(fresh, Adopt) and fresh.until == NOW + timedelta(seconds=grace), fresh


def test_a_cancel_that_cannot_be_read_is_carried_out_at_once() -> None:
    planted = job(status=status(), running=running(), errors={"cancel": "not readable"})
    assert isinstance(decided(planted), EndAttempt)


def test_an_attempt_the_leader_ended_while_cancelled_finishes_cancelled() -> None:
    ended = job(status=status(), cancel=cancel(600), end=end(STOPPED))
    action = decided(ended, EXITED)
    assert isinstance(action, Finish) and action.outcome == CANCELLED
