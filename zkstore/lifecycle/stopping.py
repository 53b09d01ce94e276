"""The leader's decision for a job that is asked to stop, is stopping, or is stopped. Pure.

The records (see :mod:`zkstore.lifecycle.lifecycle_records`): the user's wish is the ``stop`` node
(its presence; ``jobs resume`` deletes it); the leader writes the ``end`` request that its member
carries out, and records STOPPED in the job's status; the member records the driver's exit. Each
step is one write, and :func:`stop_step` decides from what exists, never from what happened
before, so that a new leader (or a restarted daemon) at any point goes on from the records::

    stop requested, driver running
        checkpoint asked and not answered, before the deadline  -> AwaitCheckpoint(until)
        else                                                   -> EndAttempt (write ``end``)
    ``end`` written for this attempt, driver not known dead    -> AwaitEnd
    no driver (never placed, or known dead)                    -> RecordStopped
    STOPPED, stop still requested                              -> StayStopped
    STOPPED, stop request gone (resumed)                       -> ResumeJob
    no stop request, not STOPPED                               -> NotStopping (usual decide)

A stop does not override what ends a job on its own: an attempt that SUCCEEDED, a cancel, a
definition that cannot load (quarantine) are decided as without a stop (NotStopping), and the
job's cleanup removes the stop node with its other records. An attempt that ends FAILED or lost
while a stop is under way is recorded as STOPPED (its error kept): the user asked for the job to
stop, and a failure on the way there is not a reason to start another attempt.

RecordStopped is written with a check that no ``running`` node exists and a new status version:
a driver that was about to start is fenced out (its ``running`` transaction checks the status
version it was placed with), and the job holds no slot from then on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from zkstore.lifecycle.lifecycle_records import EndRequest, StopRequest
from zkstore.lifecycle.lifecycle_states import STOPPED
from zkstore.records.job_states import BROKEN, CANCELLED, PENDING, RESTARTING, STARTING, SUCCEEDED

__all__ = [
    "DEFAULT_GRACE",
    "AwaitCheckpoint",
    "AwaitEnd",
    "EndAttempt",
    "NotStopping",
    "RecordStopped",
    "ResumeJob",
    "StayStopped",
    "StopStep",
    "StopView",
    "stop_step",
]

#: Between SIGTERM and SIGKILL, unless the daemon says otherwise.
DEFAULT_GRACE = 30.0


@dataclass(frozen=True)
class StopView:
    """What the leader sees of a job, as far as stopping goes.

    ``state`` is the job's status state (PENDING, STARTING, RESTARTING or STOPPED);
    ``attempt`` the attempt in it. ``driver_present``: a ``running`` node exists (readable or
    not). ``known_dead``: no process of the attempt can be alive (its member recorded the exit,
    or it was never launched, or the bounds of :func:`recovery.decide._exiting` passed).
    ``outcome``: what the attempt's driver recorded, if it ended by itself. ``checkpoint_token``:
    the control request the newest checkpoint answered (its summary's ``control_checkpoint``).
    """

    state: str
    attempt: int
    stop: StopRequest | None = None
    end: EndRequest | None = None
    driver_present: bool = False
    known_dead: bool = False
    outcome: str | None = None
    cancel_requested: bool = False
    checkpoint_token: str | None = None


@dataclass(frozen=True)
class StopStep:
    """Base of the steps; ``reason`` is for the log and the status."""

    reason: str = ""


@dataclass(frozen=True)
class NotStopping(StopStep):
    """Nothing to do with stopping: the usual decision applies."""


@dataclass(frozen=True)
class AwaitCheckpoint(StopStep):
    """Wait for the asked checkpoint until ``until`` (watch the job's checkpoints)."""

    until: datetime | None = None


@dataclass(frozen=True)
class EndAttempt(StopStep):
    """Write the ``end`` request for ``attempt`` (reason STOPPED); its member ends the driver."""

    attempt: int = 0
    detail: str = ""


@dataclass(frozen=True)
class AwaitEnd(StopStep):
    """The ``end`` request is written; wait until the driver is known dead."""


@dataclass(frozen=True)
class RecordStopped(StopStep):
    """Record STOPPED (status, no assignment, ``end`` removed, a STOPPED notification), checked
    against a ``running`` node; ``error`` is what the attempt left, if it failed on the way."""

    error: str | None = None


@dataclass(frozen=True)
class StayStopped(StopStep):
    """STOPPED, and still to be: nothing to do until ``jobs resume`` or ``jobs cancel``."""


@dataclass(frozen=True)
class ResumeJob(StopStep):
    """STOPPED, and the stop request is gone: start the next attempt (from the newest
    checkpoint, with a fresh count of failures and lost attempts)."""


def stop_step(view: StopView, now: datetime) -> StopStep:
    """The next step of ``view``'s stop. Never raises for any combination of records."""
    stop = view.stop
    if view.state == STOPPED:
        if view.cancel_requested:
            return NotStopping(reason="cancel requested while stopped")
        if stop is None:
            return ResumeJob(reason="resume requested")
        return StayStopped(reason="stopped")
    if stop is None:
        return NotStopping()
    if view.cancel_requested:
        return NotStopping(reason="cancel requested while stopping: the cancel wins")
    if view.outcome in (SUCCEEDED, CANCELLED, BROKEN):
        return NotStopping(reason=f"the attempt ended {view.outcome} before it could be stopped")
    if view.state in (PENDING, RESTARTING):
        if view.driver_present:  # a stray ``running`` node: nothing is recorded under it
            return AwaitEnd(reason="a running node exists: waiting for it to go")
        return RecordStopped(reason="stop requested; no attempt was running")
    if view.state != STARTING:
        return NotStopping(reason=f"a status of {view.state!r:.40} is not the leader's to stop")
    return _ending(view, stop, now)


def _ending(view: StopView, stop: StopRequest, now: datetime) -> StopStep:
    """A stop of a placed attempt (STARTING): checkpoint, end, wait, or record STOPPED."""
    ending = view.end is not None and view.end.attempt == view.attempt
    if view.driver_present:
        if ending:
            return AwaitEnd(reason=f"ending attempt {view.attempt} for the stop")
        return _checkpoint_or_end(view, stop, now)
    if view.known_dead:
        error = None if view.outcome is None else f"attempt {view.attempt} ended {view.outcome}"
        return RecordStopped(reason=f"attempt {view.attempt} is over", error=error)
    if ending:
        return AwaitEnd(reason=f"ending attempt {view.attempt} for the stop")
    if view.outcome is not None:
        return AwaitEnd(
            reason=f"attempt {view.attempt} ended {view.outcome}; waiting for its driver to exit"
        )
    # Placed, not running, not known dead: its driver may be starting. End the launch (the
    # member kills it and records the exit) rather than race it.
    return EndAttempt(
        attempt=view.attempt,
        detail="stopped before its driver started",
        reason=f"stop requested while attempt {view.attempt} starts",
    )


def _checkpoint_or_end(view: StopView, stop: StopRequest, now: datetime) -> StopStep:
    if stop.checkpoint and stop.token is not None:
        if view.checkpoint_token == stop.token:
            return EndAttempt(
                attempt=view.attempt,
                detail="stopped after the checkpoint it was asked for",
                reason="the asked checkpoint is written",
            )
        deadline = _deadline(stop)
        if deadline is not None and now < deadline:
            return AwaitCheckpoint(until=deadline, reason="waiting for the asked checkpoint")
        return EndAttempt(
            attempt=view.attempt,
            detail=f"stopped without the checkpoint it was asked for (none within "
            f"{stop.timeout_ms / 1000:g} s); it resumes from its newest one",
            reason="the asked checkpoint did not come in time",
        )
    return EndAttempt(attempt=view.attempt, detail="stopped", reason="stop requested")


def _deadline(stop: StopRequest) -> datetime | None:
    try:
        return stop.requested + timedelta(milliseconds=stop.timeout_ms)
    except OverflowError:
        return None
