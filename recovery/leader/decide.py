"""What the leader should do next for one job: a pure function of what it can see.

Inputs are the job's snapshot from ZooKeeper and what the leader knows of the fleet (whether the
member its attempt was placed on is up, and how that member saw its driver end). The output is
one action; the leader applies it with fenced writes (placing a Start on a member) and looks
again. Keeping this pure keeps the lifecycle in one place
and testable branch by branch::

    SUBMITTED -> PENDING -> STARTING(attempt n) -> outcome of n
        SUCCEEDED / CANCELLED           -> result DIRTY -> cleanup -> CLEAN
        FAILED, failures < max_attempts -> RESTARTING (backoff) -> STARTING(n+1)
        FAILED, failures = max_attempts -> result DIRTY/FAILED -> cleanup -> CLEAN
        no outcome (lost), lost < max   -> RESTARTING (backoff) -> STARTING(n+1)
        no outcome, lost = max_lost     -> result DIRTY/FAILED -> cleanup -> CLEAN
        BROKEN (cannot load definition) -> quarantine

A job's own failures (its code raised, its script exited non-zero: the driver recorded FAILED)
and lost attempts (the driver vanished without an outcome: its host or session was lost, it
was killed, it stopped itself during a ZooKeeper outage) are counted apart, each with its own
limit, so that infrastructure trouble does not spend the job's attempts.

Records that exist but cannot be read are never taken for absent: an unreadable ``running``
node is a live driver (the node's going away is what says a driver died), an unreadable cancel
node still asks the job to stop, an unreadable handle, status or result quarantines the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from recovery.settings import DaemonSettings
from zkstore.jobs.definition import DEFAULT_MAX_LOST_ATTEMPTS
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.states import BROKEN, CANCELLED, DIRTY, FAILED, RESTARTING, STARTING, SUCCEEDED
from zkstore.strict import parse_time


@dataclass(frozen=True)
class Local:
    """What the leader knows beyond the job's records: the member its attempt is placed on."""

    member_alive: bool = False
    #: how the attempt's driver process ended, as its member recorded it (None: not ended)
    exited: str | None = None


@dataclass(frozen=True)
class Action:
    """Base of the actions; ``reason`` is for the log."""

    reason: str = ""


@dataclass(frozen=True)
class Nothing(Action):
    """Nothing to do for this job now."""


@dataclass(frozen=True)
class Initialize(Action):
    """Create the job's status (PENDING), then decide again."""


@dataclass(frozen=True)
class Start(Action):
    """Place ``attempt`` on a member (the leader picks ``daemon_id``), which launches its driver.

    ``ended`` is set when the previous attempt just ended and the next one starts at once (a
    first lost attempt): its counts are recorded by the same write that starts the next.
    """

    attempt: int = 1
    daemon_id: str | None = None
    ended: Restart | None = None


@dataclass(frozen=True)
class Adopt(Action):
    """A driver holds ``running``: watch it and wait."""


@dataclass(frozen=True)
class Wait(Action):
    """Look again at ``until`` (wall clock), or on the next event if None."""

    until: datetime | None = None


@dataclass(frozen=True)
class NoSlot(Wait):
    """No member can take the attempt now (every slot in use, no member with the labels the job
    requires): look again when the fleet changes or a slot frees up."""


@dataclass(frozen=True)
class Restart(Action):
    """Record a failed or lost attempt; the next starts at ``not_before``."""

    failures: int = 0
    lost: int = 0
    not_before: datetime | None = None
    error: str | None = None


@dataclass(frozen=True)
class Finish(Action):
    """Record the result (DIRTY), then clean up."""

    outcome: str = SUCCEEDED
    error: str | None = None


@dataclass(frozen=True)
class CleanUp(Action):
    """The result is recorded: remove every other trace of the job, then mark it CLEAN."""


@dataclass(frozen=True)
class QuarantineJob(Action):
    """The job cannot be run: move it to quarantine with the reason."""


def decide(job: JobSnapshot, local: Local, settings: DaemonSettings, now: datetime) -> Action:
    """The next action for ``job``. Never raises for any combination of records."""
    settled = _settled(job, local, settings, now)
    if settled is not None:
        return settled
    status = job.status
    if status is None:
        return Initialize(reason="new job")
    if job.driver_present and job.running_session == 0:
        return QuarantineJob(reason="its running node is not ephemeral: no driver wrote it")
    if job.driver_present and job.running is None:
        return Wait(
            reason="its running node is unreadable: the driver is taken to be alive until the "
            "node goes away"
        )
    if job.running is not None:
        return Adopt(reason=f"driver of attempt {job.running.attempt} is alive")
    if status.state == STARTING:
        return _starting(job, local, settings, now)
    if job.cancel_requested:
        return Finish(outcome=CANCELLED, error="cancelled", reason="cancel requested")
    if status.state == RESTARTING and status.not_before is not None:
        not_before = parse_time(status.not_before)
        if now < not_before:
            return Wait(until=not_before, reason="restart backoff")
    return Start(attempt=status.attempt + 1, reason=f"{status.state.lower()} job")


def _settled(
    job: JobSnapshot, local: Local, settings: DaemonSettings, now: datetime
) -> Action | None:
    """The action for a job that is finished, quarantined, gone or unreadable; else None."""
    if job.result is not None:
        if job.result.state != DIRTY:
            return Nothing(reason="finished")
        if job.driver_present:
            return Wait(reason="result recorded; waiting for the last driver to go away")
        outcome, status = job.outcome, job.status
        if (
            outcome is not None
            and status is not None
            and outcome.attempt == status.attempt
            and parse_time(outcome.finished) >= parse_time(job.result.finished)
        ):
            # Its last driver ended after the result was recorded (a quarantined job cancelled
            # or purged while it ran): its cleanup waits until that driver is known gone.
            exiting = _exiting(job, local, settings, now, placed=False)
            if exiting is not None:
                return exiting
        return CleanUp(reason=f"result {job.result.outcome} recorded, cleanup unfinished")
    if job.quarantined:
        return Nothing(reason="quarantined")
    for record in ("result", "handle", "status"):
        if record in job.errors:
            if not job.in_current_jobs:
                return Nothing(reason=f"not in currentJobs; its {record} is unreadable")
            return QuarantineJob(reason=job.errors[record])
    if job.handle is None or job.marked:
        return Nothing(reason="not in currentJobs")
    return None


def _starting(job: JobSnapshot, local: Local, settings: DaemonSettings, now: datetime) -> Action:
    """An attempt was placed and no driver holds ``running``: starting, or over?"""
    assert job.status is not None
    attempt, member = job.status.attempt, job.status.daemon_id or "?"
    outcome = job.outcome
    if outcome is not None and outcome.attempt == attempt:
        exiting = _exiting(job, local, settings, now)
        return exiting or _ended(job, outcome.outcome, outcome.error, settings, now)
    if local.exited is not None:
        error = f"driver of attempt {attempt} on {member} {local.exited}"
    elif not local.member_alive:
        error = f"daemon {member}, where attempt {attempt} was placed, is gone"
    elif (now - parse_time(job.status.updated)).total_seconds() < settings.start_timeout:
        return Wait(reason=f"driver of attempt {attempt} is starting on {member}")
    else:
        error = f"driver of attempt {attempt} did not start on {member} within "
        error += f"{settings.start_timeout:g} s"
    return _ended(job, FAILED, error + " and left no outcome", settings, now, lost=True)


def _exiting(
    job: JobSnapshot,
    local: Local,
    settings: DaemonSettings,
    now: datetime,
    *,
    placed: bool = True,
) -> Wait | None:
    """A Wait while the driver that recorded the attempt's outcome may still be alive; None once
    it is known gone.

    The driver releases ``running`` with its outcome, then closes its session and exits: until
    then, acting on the attempt's end (releasing its artifacts, placing the next attempt) would
    act on a live driver's work. It is known gone once its member recorded the process's exit
    (reaped, or seen through a pidfd). Bounds, for a member that cannot say: with its member
    down (or the job placed nowhere any more), one session timeout after the outcome (a process
    that released its node that long ago has closed its session, or lost it); with its member
    up, the launch deadline (a driver still there a minute after its outcome is stuck).
    ``placed`` False: the attempt's assignment is gone (its job was quarantined), so no member
    will say.
    """
    assert job.outcome is not None and job.status is not None
    if local.exited is not None:
        return None
    witness = placed and local.member_alive
    bound = settings.start_timeout if witness else settings.store.session_timeout
    until = parse_time(job.outcome.finished) + timedelta(seconds=bound)
    if now >= until:
        return None
    return Wait(
        until=until,
        reason=f"attempt {job.status.attempt} recorded {job.outcome.outcome}; waiting for its "
        "driver to exit",
    )


def _ended(
    job: JobSnapshot,
    outcome: str,
    error: str | None,
    settings: DaemonSettings,
    now: datetime,
    *,
    lost: bool = False,
) -> Action:
    """The attempt recorded in ``status`` is over with ``outcome`` (``lost``: without one)."""
    assert job.status is not None
    if outcome == SUCCEEDED:
        return Finish(outcome=SUCCEEDED, reason="attempt succeeded")
    if outcome == CANCELLED:
        return Finish(outcome=CANCELLED, error=error or "cancelled", reason="attempt cancelled")
    if outcome == BROKEN:
        return QuarantineJob(reason=error or "driver could not load the definition")
    if job.cancel_requested:
        return Finish(outcome=CANCELLED, error=error, reason="failed while cancel was requested")
    status = job.status
    failures, lost_count = status.failures + (not lost), status.lost + lost
    used, limit, what = (
        (lost_count, job.summary_int("max_lost") or DEFAULT_MAX_LOST_ATTEMPTS, "lost")
        if lost
        else (failures, job.summary_int("max_attempts") or 1, "failed")
    )
    if used >= limit:
        return Finish(
            outcome=FAILED,
            error=error,
            reason=f"attempt {status.attempt} {what}; {used} of {limit} such attempts used",
        )
    # A first lost attempt (a host lost, a driver killed) is placed again at once; a job that
    # keeps failing or keeps getting lost backs off.
    delay = 0.0 if lost and lost_count == 1 else settings.backoff(failures + lost_count - lost)
    restart = Restart(
        failures=failures,
        lost=lost_count,
        not_before=now + timedelta(seconds=delay),
        error=error,
        reason=f"attempt {status.attempt} {what} ({used} of {limit}); retrying in {delay:g} s",
    )
    if delay > 0:
        return restart
    reason = f"attempt {status.attempt} {what} ({used} of {limit}); placing the next at once"
    return Start(attempt=status.attempt + 1, ended=restart, reason=reason)
