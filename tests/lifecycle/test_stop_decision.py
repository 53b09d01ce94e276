"""The leader's decision for a job asked to stop, stopping or stopped
(zkstore.lifecycle.stopping), branch by branch, and over every combination of records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkstore.lifecycle.lifecycle_records import EndRequest, StopRequest
from zkstore.lifecycle.lifecycle_states import STOPPED
from zkstore.lifecycle.stopping import (
    AwaitCheckpoint,
    AwaitEnd,
    EndAttempt,
    NotStopping,
    RecordStopped,
    ResumeJob,
    StayStopped,
    StopView,
    stop_step,
)
from zkstore.records.job_states import (
    BROKEN,
    CANCELLED,
    FAILED,
    PENDING,
    RESTARTING,
    STARTING,
    SUCCEEDED,
)
from zkstore.records.strict import parse_time

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
ASKED = "2026-11-21T11:59:00.000Z"  # 60 s before NOW


def stop(checkpoint: bool = False, timeout: float = 300) -> StopRequest:
    return StopRequest(
        version=0,
        requested=parse_time(ASKED),
        by="me@h",
        checkpoint=checkpoint,
        token="stop-abc" if checkpoint else None,
        timeout_ms=int(timeout * 1000),
    )


def end(attempt: int = 3) -> EndRequest:
    return EndRequest(
        version=0, attempt=attempt, reason=STOPPED, requested=parse_time(ASKED), grace_ms=30_000
    )


def view(**kw: object) -> StopView:
    base: dict[str, object] = {"state": STARTING, "attempt": 3, "stop": stop()}
    return StopView(**{**base, **kw})  # type: ignore[arg-type]


def test_no_stop_is_the_usual_decision() -> None:
    assert stop_step(view(stop=None, driver_present=True), NOW) == NotStopping()


def test_a_running_attempt_is_ended_at_once_without_checkpoint() -> None:
    step = stop_step(view(driver_present=True), NOW)
    assert isinstance(step, EndAttempt) and step.attempt == 3 and step.detail == "stopped"


def test_the_asked_checkpoint_is_waited_for_until_the_deadline() -> None:
    step = stop_step(view(driver_present=True, stop=stop(checkpoint=True, timeout=300)), NOW)
    assert isinstance(step, AwaitCheckpoint)
    assert step.until == NOW - timedelta(seconds=60) + timedelta(seconds=300)


def test_the_answered_checkpoint_ends_the_attempt() -> None:
    step = stop_step(
        view(driver_present=True, stop=stop(checkpoint=True), checkpoint_token="stop-abc"), NOW
    )
    assert isinstance(step, EndAttempt)
    assert step.detail == "stopped after the checkpoint it was asked for"


def test_an_older_checkpoint_is_no_answer() -> None:
    step = stop_step(
        view(driver_present=True, stop=stop(checkpoint=True), checkpoint_token="stop-older"), NOW
    )
    assert isinstance(step, AwaitCheckpoint)


def test_past_the_deadline_the_attempt_is_ended_anyway() -> None:
    step = stop_step(view(driver_present=True, stop=stop(checkpoint=True, timeout=30)), NOW)
    assert isinstance(step, EndAttempt)
    assert "without the checkpoint it was asked for (none within 30 s)" in step.detail


def test_the_end_written_means_wait_for_the_driver() -> None:
    assert isinstance(stop_step(view(driver_present=True, end=end()), NOW), AwaitEnd)
    assert isinstance(stop_step(view(end=end()), NOW), AwaitEnd)  # released running, not dead


def test_an_end_of_an_older_attempt_is_not_this_one() -> None:
    step = stop_step(view(driver_present=True, end=end(attempt=2)), NOW)
    assert isinstance(step, EndAttempt) and step.attempt == 3


def test_known_dead_records_stopped() -> None:
    assert isinstance(stop_step(view(end=end(), known_dead=True), NOW), RecordStopped)


def test_a_failure_on_the_way_is_kept_and_the_job_still_stops() -> None:
    step = stop_step(view(outcome=FAILED, known_dead=True), NOW)
    assert isinstance(step, RecordStopped) and step.error == "attempt 3 ended FAILED"
    assert isinstance(stop_step(view(outcome=FAILED), NOW), AwaitEnd)  # its driver still exits


def test_a_job_with_no_attempt_placed_stops_at_once() -> None:
    for state in (PENDING, RESTARTING):
        assert isinstance(stop_step(view(state=state), NOW), RecordStopped)


def test_an_attempt_that_is_starting_is_ended_not_raced() -> None:
    step = stop_step(view(), NOW)
    assert isinstance(step, EndAttempt) and step.detail == "stopped before its driver started"


def test_what_ends_a_job_by_itself_wins_over_a_stop() -> None:
    for outcome in (SUCCEEDED, CANCELLED, BROKEN):
        assert isinstance(stop_step(view(outcome=outcome), NOW), NotStopping)
    assert isinstance(stop_step(view(driver_present=True, cancel_requested=True), NOW), NotStopping)


def test_stopped_stays_stopped_until_resumed_or_cancelled() -> None:
    assert isinstance(stop_step(view(state=STOPPED), NOW), StayStopped)
    assert isinstance(stop_step(view(state=STOPPED, stop=None), NOW), ResumeJob)
    assert isinstance(stop_step(view(state=STOPPED, cancel_requested=True), NOW), NotStopping)


def test_a_status_the_leader_does_not_write_is_left_to_the_usual_decision() -> None:
    assert isinstance(stop_step(view(state=SUCCEEDED), NOW), NotStopping)


@given(
    state=st.sampled_from([PENDING, STARTING, RESTARTING, STOPPED, SUCCEEDED, "garbage"]),
    has_stop=st.booleans(),
    checkpoint=st.booleans(),
    end_attempt=st.sampled_from([None, 2, 3]),
    driver_present=st.booleans(),
    known_dead=st.booleans(),
    outcome=st.sampled_from([None, SUCCEEDED, FAILED, CANCELLED, BROKEN]),
    cancel=st.booleans(),
    token=st.sampled_from([None, "stop-abc", "other"]),
    seconds=st.floats(-(10**6), 10**6),
)
def test_every_combination_of_records_has_a_safe_step(
    state: str,
    has_stop: bool,
    checkpoint: bool,
    end_attempt: int | None,
    driver_present: bool,
    known_dead: bool,
    outcome: str | None,
    cancel: bool,
    token: str | None,
    seconds: float,
) -> None:
    """What a new leader can find at any point of a stop, whatever happened before: it never
    records STOPPED while a driver holds ``running`` or may still be alive after starting, never
    ends an attempt that is not running or starting, never resumes a job that is to stay
    stopped, and never raises."""
    v = StopView(
        state=state,
        attempt=3,
        stop=stop(checkpoint=checkpoint) if has_stop else None,
        end=None if end_attempt is None else end(end_attempt),
        driver_present=driver_present,
        known_dead=known_dead and not driver_present,
        outcome=outcome,
        cancel_requested=cancel,
        checkpoint_token=token,
    )
    step = stop_step(v, NOW + timedelta(seconds=seconds))
    if isinstance(step, RecordStopped):
        assert not v.driver_present
        assert v.known_dead or v.state in (PENDING, RESTARTING)
        assert v.stop is not None
    if isinstance(step, EndAttempt):
        assert v.state == STARTING and not v.known_dead and step.attempt == v.attempt
        assert v.end is None or v.end.attempt != v.attempt
    if isinstance(step, ResumeJob):
        assert v.stop is None and v.state == STOPPED and not v.cancel_requested
    if isinstance(step, (AwaitCheckpoint, AwaitEnd, EndAttempt, RecordStopped, StayStopped)):
        assert v.stop is not None and not v.cancel_requested
    if v.stop is None and v.state != STOPPED:
        assert isinstance(step, NotStopping)


def test_a_stray_running_node_holds_off_recording_stopped() -> None:
    step = stop_step(view(state=PENDING, driver_present=True), NOW)
    assert isinstance(step, AwaitEnd)
