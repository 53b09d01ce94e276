"""The leader's decision function, branch by branch (pure: no servers needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recovery.leader.decide import (
    Adopt,
    CleanUp,
    EndAttempt,
    Finish,
    Initialize,
    Local,
    Nothing,
    QuarantineJob,
    ReleaseSlot,
    Restart,
    Start,
    Wait,
    decide,
)
from recovery.settings import DaemonSettings
from zkstore.config import StoreConfig
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.stops import EndRequest
from zkstore.records.handle import Handle
from zkstore.records.job_records import CancelRequest, JobStatus, Outcome, RunningInfo
from zkstore.records.job_states import (
    BROKEN,
    CANCELLED,
    CLEAN,
    DIRTY,
    FAILED,
    PENDING,
    RESTARTING,
    STARTING,
    STUCK,
    SUCCEEDED,
)
from zkstore.records.result_records import JobResult, QuarantineEntry
from zkstore.records.strict import parse_time

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
T = "2026-11-21T11:59:00.000Z"
SETTINGS = DaemonSettings(store=StoreConfig(), max_drivers=2, restart_backoff=1.0, start_timeout=30)


def job(max_attempts: int = 3, **records: Any) -> JobSnapshot:
    handle = Handle(
        uri="file:///s/x",
        size=1,
        sha256="a" * 64,
        created=T,
        writer="w",
        summary={"max_attempts": max_attempts, "name": "n"},
        version=0,
    )
    return JobSnapshot(job_id="j", handle=records.pop("handle", handle), **records)


def status(
    state: str = STARTING,
    attempt: int = 1,
    failures: int = 0,
    lost: int = 0,
    updated: str = T,
    **kw: Any,
) -> JobStatus:
    return JobStatus(
        version=4,
        state=state,
        attempt=attempt,
        failures=failures,
        lost=lost,
        updated=parse_time(updated),
        **kw,
    )


def ended(action: Any) -> Restart:
    """The restart an action records: itself, or the one a Start records at once."""
    if isinstance(action, Start) and action.ended is not None:
        return action.ended
    assert isinstance(action, Restart), action
    return action


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


ALIVE = Local(member_alive=True)


def running(attempt: int = 1, pid: int = 100) -> RunningInfo:
    return RunningInfo(version=0, attempt=attempt, host="h", pid=pid, started=parse_time(T))


def outcome(result: str, attempt: int = 1, error: str | None = None) -> Outcome:
    return Outcome(version=0, attempt=attempt, outcome=result, finished=parse_time(T), error=error)


def decided(snapshot: JobSnapshot, local: Local | None = None) -> Any:
    return decide(snapshot, local or Local(), SETTINGS, NOW)


def test_new_job_is_initialized_then_started() -> None:
    assert isinstance(decided(job()), Initialize)
    action = decided(job(status=status(PENDING, attempt=0)))
    assert isinstance(action, Start) and action.attempt == 1


def test_live_driver_is_adopted() -> None:
    assert isinstance(decided(job(status=status(), running=running())), Adopt)


def test_success_finishes() -> None:
    action = decided(job(status=status(), outcome=outcome(SUCCEEDED)))
    assert isinstance(action, Finish) and action.outcome == SUCCEEDED


def test_failure_restarts_with_exponential_backoff() -> None:
    first = decided(job(status=status(failures=0), outcome=outcome(FAILED, error="boom")))
    assert isinstance(first, Restart)
    assert first.failures == 1 and first.error == "boom"
    # the daemon's --restart-backoff (1 s) doubling, shortened by up to 20 % of jitter
    assert NOW + timedelta(seconds=0.8) <= first.not_before <= NOW + timedelta(seconds=1)
    second = decided(job(status=status(attempt=2, failures=1), outcome=outcome(FAILED, attempt=2)))
    assert isinstance(second, Restart) and second.not_before is not None
    assert NOW + timedelta(seconds=1.6) <= second.not_before <= NOW + timedelta(seconds=2)


def test_failure_with_no_attempts_left_is_final() -> None:
    action = decided(
        job(max_attempts=2, status=status(attempt=2, failures=1), outcome=outcome(FAILED, 2, "x"))
    )
    assert isinstance(action, Finish) and action.outcome == FAILED and action.error == "x"


def test_backoff_is_waited_out_then_next_attempt_starts() -> None:
    later = NOW + timedelta(seconds=5)
    waiting = decided(job(status=status(RESTARTING, attempt=1, failures=1, not_before=later)))
    assert isinstance(waiting, Wait) and waiting.until == NOW + timedelta(seconds=5)
    past = NOW - timedelta(seconds=1)
    start = decided(job(status=status(RESTARTING, attempt=1, failures=1, not_before=past)))
    assert isinstance(start, Start) and start.attempt == 2


def test_outcome_of_an_older_attempt_is_not_taken_for_the_current_one() -> None:
    starting = status(attempt=2, updated=ago(1))
    action = decided(job(status=starting, outcome=outcome(SUCCEEDED, attempt=1)), ALIVE)
    assert isinstance(action, Wait)


def test_a_placed_attempt_gets_time_to_start_then_is_lost() -> None:
    young = decided(job(status=status(updated=ago(5), daemon_id="m1")), ALIVE)
    assert isinstance(young, Wait) and "starting on m1" in young.reason
    # Past the launch deadline its member is asked to end it (SIGKILL of its group at once),
    # and the attempt counts as lost once its exit is recorded: known dead before moving on.
    old = decided(job(status=status(updated=ago(31), daemon_id="m1")), ALIVE)
    assert isinstance(old, EndAttempt) and old.why == STUCK and old.grace == 0
    assert "left no outcome" in old.detail
    request = EndRequest(
        version=0, attempt=1, reason=STUCK, requested=parse_time(ago(1)), grace_ms=0
    )
    killed = Local(member_alive=True, exited="killed by signal 9")
    lost = ended(decided(job(status=status(updated=ago(31), daemon_id="m1"), end=request), killed))
    assert lost.lost == 1 and lost.failures == 0


def test_an_attempt_whose_member_is_gone_or_whose_driver_exited_is_lost() -> None:
    start = decided(job(status=status(updated=ago(1), daemon_id="m1")))
    assert isinstance(start, Start) and start.attempt == 2, "a first lost attempt: at once"
    gone = ended(start)
    assert "m1" in (gone.error or "") and "gone" in (gone.error or "")
    exited = ended(
        decided(
            job(status=status(updated=ago(1), daemon_id="m1")),
            Local(member_alive=True, exited="killed by signal 9"),
        )
    )
    assert "killed by signal 9" in (exited.error or "")


def test_broken_definition_goes_to_quarantine() -> None:
    action = decided(job(status=status(), outcome=outcome(BROKEN, error="IncompatiblePayload")))
    assert isinstance(action, QuarantineJob) and "Incompatible" in action.reason
    garbage = decided(job(handle=None, errors={"handle": "/x: not a valid handle"}))
    assert isinstance(garbage, QuarantineJob)


@pytest.mark.parametrize("state", [PENDING, RESTARTING])
def test_cancel_of_a_job_without_driver_finishes_it(state: str) -> None:
    cancel = CancelRequest(version=0, requested=parse_time(T))
    action = decided(job(status=status(state), cancel=cancel))
    assert isinstance(action, Finish) and action.outcome == CANCELLED


def test_cancelled_attempt_and_failed_attempt_under_cancel_both_end_cancelled() -> None:
    cancel = CancelRequest(version=0, requested=parse_time(T))
    assert decided(job(status=status(), outcome=outcome(CANCELLED))).outcome == CANCELLED
    failed = decided(job(status=status(), outcome=outcome(FAILED), cancel=cancel))
    assert isinstance(failed, Finish) and failed.outcome == CANCELLED


def test_result_means_cleanup_or_nothing_never_a_new_attempt() -> None:
    dirty = JobResult(
        version=0, job_id="j", state=DIRTY, outcome=SUCCEEDED, attempts=1, finished=parse_time(T)
    )
    assert isinstance(decided(job(status=status(PENDING), result=dirty)), CleanUp)
    assert isinstance(decided(job(status=status(), result=dirty, running=running())), Wait)
    clean = JobResult(
        version=1, job_id="j", state=CLEAN, outcome=SUCCEEDED, attempts=1, finished=parse_time(T)
    )
    assert isinstance(decided(job(status=status(PENDING), result=clean)), Nothing)


def test_quarantined_or_removed_jobs_are_left_alone() -> None:
    entry = QuarantineEntry(version=0, job_id="j", reason="r", since=parse_time(T))
    assert isinstance(decided(job(quarantine=entry, status=status(PENDING))), Nothing)
    assert isinstance(decided(job(marked=True, status=status(PENDING))), Nothing)


def test_a_quarantined_jobs_slot_is_released_once_its_driver_is_gone() -> None:
    """Issue 50: quarantined while its driver runs, the job keeps its slot counted; released
    by the look that finds the driver gone."""
    entry = QuarantineEntry(version=0, job_id="j", reason="r", since=parse_time(T))
    placed = Local(member_alive=True, assigned=True)
    still = decide(job(quarantine=entry, status=status(), running=running()), placed, SETTINGS, NOW)
    assert isinstance(still, Nothing)
    gone = decide(job(quarantine=entry, status=status()), placed, SETTINGS, NOW)
    assert isinstance(gone, ReleaseSlot)
    assert isinstance(decide(job(quarantine=entry, status=status()), ALIVE, SETTINGS, NOW), Nothing)


def test_a_job_with_a_record_of_a_newer_protocol_is_left_alone() -> None:
    """Issue 45: not garbage, never quarantined: a newer daemon acts on it."""
    newer = job(errors={"handle": "written at fleet protocol 9"}, newer=frozenset({"handle"}))
    action = decided(newer)
    assert isinstance(action, Nothing) and "needs a newer daemon" in action.reason
    assert newer.state == "NEEDS_UPGRADE"


def test_corrupt_status_goes_to_quarantine() -> None:
    action = decided(job(errors={"status": "/s: not a valid JobStatus record"}))
    assert isinstance(action, QuarantineJob)


def test_lost_attempts_are_counted_apart_from_the_jobs_own_failures() -> None:
    lost = decided(job(max_attempts=1, status=status(failures=0)))
    counted = ended(lost)  # "a vanished driver does not spend the job's one attempt"
    assert (counted.failures, counted.lost) == (0, 1)
    failed = decided(job(status=status(failures=0, lost=3), outcome=outcome(FAILED)))
    assert isinstance(failed, Restart) and (failed.failures, failed.lost) == (1, 3)


def test_too_many_lost_attempts_fail_the_job() -> None:
    handle_summary = {"max_attempts": 3, "max_lost": 2, "name": "n"}
    snapshot = job(status=status(attempt=2, lost=1))
    snapshot = JobSnapshot(
        job_id="j",
        handle=Handle(
            uri="file:///s/x",
            size=1,
            sha256="a" * 64,
            created=T,
            writer="w",
            summary=handle_summary,
            version=0,
        ),
        status=snapshot.status,
    )
    action = decided(snapshot)
    assert isinstance(action, Finish) and action.outcome == FAILED
    assert "2 of 2" in action.reason


def test_an_unreadable_running_node_is_a_live_driver_never_a_dead_one() -> None:
    action = decided(
        job(status=status(), running_session=42, errors={"running": "/r: not a valid record"})
    )
    assert isinstance(action, Wait) and "unreadable" in action.reason


def test_a_running_node_no_driver_wrote_is_quarantined() -> None:
    planted = decided(job(status=status(), running=running(), running_session=0))
    assert isinstance(planted, QuarantineJob) and "not ephemeral" in planted.reason


def test_unreadable_result_quarantines_a_current_job_and_is_left_alone_otherwise() -> None:
    current = decided(job(status=status(PENDING), errors={"result": "/r: garbage"}))
    assert isinstance(current, QuarantineJob) and "garbage" in current.reason
    gone = decided(job(handle=None, status=status(PENDING), errors={"result": "/r: garbage"}))
    assert isinstance(gone, Nothing)


def test_an_unreadable_cancel_request_still_cancels() -> None:
    action = decided(job(status=status(PENDING), errors={"cancel": "/c: garbage"}))
    assert isinstance(action, Finish) and action.outcome == CANCELLED
