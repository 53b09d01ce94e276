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

The lifecycle (:mod:`recovery.leader.lifecycle_inputs`): a job asked to stop goes through
:func:`zkstore.lifecycle.stopping.stop_step` (checkpoint, end its attempt, STOPPED; resumed when
the stop node goes); an attempt over its ``--timeout``, ``--start-timeout`` or
``--progress-timeout`` is ended (an ``end`` request its member carries out: SIGTERM, grace,
SIGKILL of the group) and counted once its driver is known dead: TIMED_OUT as a failure, STUCK
as lost. The next attempt is paced by the job's retry policy, failures and lost attempts each
with their own streak, both reset by a run of ``--retry-reset-after``.

Records that exist but cannot be read are never taken for absent: an unreadable ``running``
node is a live driver (the node's going away is what says a driver died), an unreadable cancel
node still asks the job to stop, an unreadable handle, status or result quarantines the job.

Why one module: one pure function over every state a job can be in, read top to bottom:
the order of its branches is the precedence of the lifecycle (a stop before a limit, a limit
before a restart), which a split by state would hide.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from recovery.leader.lifecycle_inputs import (
    attempt_times,
    job_lifecycle,
    started_at,
    stop_view,
    streak,
)
from recovery.settings import DaemonSettings
from zkstore.jobs.definition import DEFAULT_MAX_LOST_ATTEMPTS
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.stops import EndRequest
from zkstore.lifecycle import stopping
from zkstore.lifecycle.attempt_limits import Expired, Limits, judge
from zkstore.lifecycle.lifecycle_states import COUNTED_AS, FAILURE, LOST
from zkstore.lifecycle.retry_backoff import AttemptEnd, after_end
from zkstore.records.job_states import (
    BROKEN,
    CANCELLED,
    DIRTY,
    FAILED,
    RESTARTING,
    STARTING,
    STOPPED,
    STUCK,
    SUCCEEDED,
)

__all__ = [
    "CANCEL_END_GRACE",
    "CANCEL_MARGIN",
    "END_BOUND",
    "STOP_POLL",
    "Action",
    "Adopt",
    "CleanUp",
    "EndAttempt",
    "Finish",
    "Initialize",
    "Local",
    "NoSlot",
    "Nothing",
    "QuarantineJob",
    "RecordStopped",
    "ReleaseSlot",
    "Restart",
    "Start",
    "Wait",
    "decide",
]

#: How often the leader looks again at a job whose stop waits for a checkpoint or for its
#: driver to be known dead (it watches neither the checkpoints nor the outcome's driver).
STOP_POLL = 1.0
#: How long past the daemon's ``--cancel-grace`` a cancelled attempt's driver may still hold
#: ``running`` before the leader ends it (its own forced end comes at the grace: this is the
#: margin for it to land), and the grace between SIGTERM and SIGKILL then (the job had its grace
#: already).
CANCEL_MARGIN = 2.0
CANCEL_END_GRACE = 1.0
#: Beyond its grace and the launch deadline, how long an ``end`` request may wait for its
#: member to record the driver's exit before the job moves on regardless (the member keeps
#: killing what it knows; one that does not know the launch never records it).
END_BOUND = 60.0


@dataclass(frozen=True)
class Local:
    """What the leader knows beyond the job's records: the member its attempt is placed on."""

    member_alive: bool = False
    #: how the attempt's driver process ended, as its member recorded it (None: not ended)
    exited: str | None = None
    #: the job's assignment still counts against its member's driver slots
    assigned: bool = False


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
    #: a stopped job resumed: its counts of failures and lost attempts start afresh
    resume: bool = False
    #: a new job's first placement, decided on the status it is to be created with: the
    #: placement creates the status (and the job's node, ``make_dir``), one write, not two
    new: bool = False
    make_dir: bool = False


@dataclass(frozen=True)
class Adopt(Action):
    """A driver holds ``running``: watch it and wait (and look again at ``until``, when one of
    its limits would pass)."""

    until: datetime | None = None


@dataclass(frozen=True)
class EndAttempt(Action):
    """Write the ``end`` request of ``attempt`` (``why``: TIMED_OUT, STUCK or STOPPED; ``detail``
    names the limit): its member ends the driver, and the job moves on once it is known dead."""

    attempt: int = 0
    why: str = STOPPED
    detail: str = ""
    #: seconds between SIGTERM and SIGKILL (None: the daemon's ``--end-grace``)
    grace: float | None = None


@dataclass(frozen=True)
class RecordStopped(Action):
    """Record STOPPED (no slot held, the ``end`` request removed), checked against a ``running``
    node; ``error`` is what the attempt left if it failed on the way."""

    error: str | None = None


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
    #: the pacing's streaks after this end
    streak_failures: int = 0
    streak_lost: int = 0
    #: how the leader ended the attempt (TIMED_OUT, STUCK), if it did
    ended: str | None = None


@dataclass(frozen=True)
class Finish(Action):
    """Record the result (DIRTY), then clean up."""

    outcome: str = SUCCEEDED
    error: str | None = None
    #: how the leader ended the last attempt (TIMED_OUT, STUCK), if it did
    ended: str | None = None


@dataclass(frozen=True)
class CleanUp(Action):
    """The result is recorded: remove every other trace of the job, then mark it CLEAN."""


@dataclass(frozen=True)
class QuarantineJob(Action):
    """The job cannot be run: move it to quarantine with the reason. Its assignment (a driver
    slot) is released with it, unless a driver of it still runs: then that driver's slot stays
    counted until it is gone (:class:`ReleaseSlot`)."""


@dataclass(frozen=True)
class ReleaseSlot(Action):
    """A quarantined job's driver is gone: release the driver slot it held."""


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
    stop = _stopping(job, local, settings, now)
    if stop is not None:
        return stop
    if job.driver_present and job.running is None:
        return Wait(
            reason="its running node is unreadable: the driver is taken to be alive until the "
            "node goes away"
        )
    if job.running is not None:
        return _running(job, settings, now)
    if status.state == STARTING:
        return _starting(job, local, settings, now)
    if job.cancel_requested:
        return Finish(outcome=CANCELLED, error="cancelled", reason="cancel requested")
    if status.state == RESTARTING and status.not_before is not None:
        not_before = status.not_before
        if now < not_before:
            return Wait(until=not_before, reason="restart backoff")
    return Start(attempt=status.attempt + 1, reason=f"{status.state.lower()} job")


def _settled(
    job: JobSnapshot, local: Local, settings: DaemonSettings, now: datetime
) -> Action | None:
    """The action for a job that is finished, quarantined, gone or unreadable; else None."""
    if job.newer:  # a newer protocol's record: not garbage, and not ours to act on
        records = ", ".join(sorted(job.newer))
        return Nothing(reason=f"needs a newer daemon (its {records} written at a newer protocol)")
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
            and outcome.finished >= job.result.finished
        ):
            # Its last driver ended after the result was recorded (a quarantined job cancelled
            # or purged while it ran): its cleanup waits until that driver is known gone.
            exiting = _exiting(job, local, settings, now, placed=False)
            if exiting is not None:
                return exiting
        return CleanUp(reason=f"result {job.result.outcome} recorded, cleanup unfinished")
    if job.quarantined:
        if local.assigned and not job.driver_present:
            return ReleaseSlot(reason="quarantined, and its last driver is gone")
        return Nothing(reason="quarantined")
    for record in ("result", "handle", "status"):
        if record in job.errors:
            if not job.in_current_jobs:
                return Nothing(reason=f"not in currentJobs; its {record} is unreadable")
            return QuarantineJob(reason=job.errors[record])
    if job.handle is None or job.marked:
        return Nothing(reason="not in currentJobs")
    return None


def _stopping(
    job: JobSnapshot, local: Local, settings: DaemonSettings, now: datetime
) -> Action | None:
    """The action of a job asked to stop, stopping or stopped; None: the usual decision."""
    assert job.status is not None
    if job.status.state != STOPPED and not job.stop_requested:
        return None
    step = stopping.stop_step(
        stop_view(job, known_dead=_known_dead(job, local, settings, now)), now
    )
    poll = now + timedelta(seconds=STOP_POLL)
    if isinstance(step, stopping.AwaitCheckpoint):
        until = poll if step.until is None else min(step.until, poll)
        return Wait(until=until, reason=step.reason)
    if isinstance(step, stopping.EndAttempt):
        return EndAttempt(attempt=step.attempt, why=STOPPED, detail=step.detail, reason=step.reason)
    if isinstance(step, stopping.AwaitEnd):
        return Wait(until=poll, reason=step.reason)
    if isinstance(step, stopping.RecordStopped):
        return RecordStopped(error=step.error, reason=step.reason)
    if isinstance(step, stopping.StayStopped):
        return Nothing(reason=step.reason)
    if isinstance(step, stopping.ResumeJob):
        return Start(attempt=job.status.attempt + 1, resume=True, reason="resumed")
    return None


def _known_dead(job: JobSnapshot, local: Local, settings: DaemonSettings, now: datetime) -> bool:
    """No process of the attempt in ``status`` can be alive (or none can be told of: its
    member is gone, and the next status version fences it out)."""
    if job.driver_present:
        return False
    if local.exited is not None or not local.member_alive:
        return True
    outcome, status = job.outcome, job.status
    if outcome is not None and status is not None and outcome.attempt == status.attempt:
        return _exiting(job, local, settings, now) is None
    return False


def _running(job: JobSnapshot, settings: DaemonSettings, now: datetime) -> Action:
    """A driver holds ``running``: adopt it, or end it if it is over one of its limits."""
    assert job.running is not None and job.status is not None
    attempt = job.running.attempt
    reason = f"driver of attempt {attempt} is alive"
    if job.cancel_requested and job.status.state == STARTING and attempt == job.status.attempt:
        return _cancelled_running(job, attempt, settings, now)
    limits = job_lifecycle(job, settings).limits
    if job.status.state != STARTING or attempt != job.status.attempt or limits == Limits():
        return Adopt(reason=reason)
    if _ending_request(job) is not None:
        return Adopt(reason=f"driver of attempt {attempt} is being ended")
    verdict = _judged(job, limits, now)
    if isinstance(verdict, Expired):
        return EndAttempt(
            attempt=attempt, why=verdict.outcome, detail=verdict.reason, reason=verdict.reason
        )
    return Adopt(until=verdict, reason=reason)


def _cancelled_running(
    job: JobSnapshot, attempt: int, settings: DaemonSettings, now: datetime
) -> Action:
    """A cancelled attempt whose driver still holds ``running``: its driver stops it within
    ``--cancel-grace``; past that and :data:`CANCEL_MARGIN`, the leader ends it (its member
    sends SIGTERM, then SIGKILL to its process group), whatever its job code did with the
    driver's cancel handling. A cancel that cannot be read is ended at once."""
    if _ending_request(job) is not None:
        return Adopt(reason=f"driver of attempt {attempt} is being ended (cancelled)")
    due = now
    asked = job.cancel_asked
    if asked is not None:
        # From when ZooKeeper made the request (what its writer says is its own to say: a
        # clock ahead, or a date planted by the job, would postpone this end for as long)
        due = min(asked, now) + timedelta(seconds=settings.cancel_grace + CANCEL_MARGIN)
    if now < due:
        return Adopt(until=due, reason=f"driver of attempt {attempt} is stopping (cancelled)")
    detail = f"cancelled, and still running {settings.cancel_grace:g} s after"
    grace = min(settings.end_grace, CANCEL_END_GRACE)
    return EndAttempt(attempt=attempt, why=STOPPED, detail=detail, grace=grace, reason=detail)


def _judged(job: JobSnapshot, limits: Limits, now: datetime) -> Expired | datetime | None:
    """The attempt's limit that passed, or when to look again (None: no limit applies)."""
    times = attempt_times(job)
    if times is None:
        return None
    verdict = judge(times, limits, now)
    return verdict if isinstance(verdict, Expired) else verdict.next_check


def _ending_request(job: JobSnapshot) -> EndRequest | None:
    """The leader's ``end`` request of the attempt in ``status``, if it wrote one."""
    end, status = job.end, job.status
    if end is not None and status is not None and end.attempt == status.attempt:
        return end
    return None


def _ended_by_leader(
    job: JobSnapshot, end: EndRequest, local: Local, settings: DaemonSettings, now: datetime
) -> Action:
    """The leader ended the attempt: wait until its driver is known dead, then count it as
    the end's reason says (TIMED_OUT a failure, STUCK lost, STOPPED neither)."""
    assert job.status is not None
    attempt = job.status.attempt
    if local.exited is None and local.member_alive:
        # Its member carries the end out and records the exit; a member that does not know
        # the launch (its records lost) never will: after a bound, the job moves on.
        bound = end.requested + timedelta(
            seconds=end.grace_ms / 1000 + END_BOUND + settings.start_timeout
        )
        if now < bound:
            return Wait(
                until=bound,
                reason=f"attempt {attempt} is being ended ({end.reason}); waiting until its "
                "driver is known dead",
            )
    outcome = job.outcome
    if outcome is not None and outcome.attempt == attempt and outcome.outcome == SUCCEEDED:
        return _ended(job, SUCCEEDED, None, settings, now)
    detail = f"{end.reason}: {end.detail}" if end.detail else end.reason
    if job.cancel_requested:  # ended for its cancel (or while one was asked): it is over
        return Finish(outcome=CANCELLED, error=detail, reason="ended while cancel was requested")
    counted = COUNTED_AS.get(end.reason, LOST)
    if counted not in (FAILURE, LOST):  # a stop that was resumed before it was recorded
        ended = Restart(
            failures=job.status.failures,
            lost=job.status.lost,
            error=detail,
            streak_failures=streak(job).failures,
            streak_lost=streak(job).lost,
        )
        return Start(attempt=attempt + 1, ended=ended, reason=f"attempt {attempt} was stopped")
    return _ended(job, FAILED, detail, settings, now, lost=counted == LOST, ended=end.reason)


def _starting(job: JobSnapshot, local: Local, settings: DaemonSettings, now: datetime) -> Action:
    """An attempt was placed and no driver holds ``running``: starting, or over?"""
    assert job.status is not None
    attempt, member = job.status.attempt, job.status.daemon_id or "?"
    end = _ending_request(job)
    if end is not None:
        return _ended_by_leader(job, end, local, settings, now)
    outcome = job.outcome
    if outcome is not None and outcome.attempt == attempt:
        exiting = _exiting(job, local, settings, now)
        return exiting or _ended(job, outcome.outcome, outcome.error, settings, now)
    if local.exited is not None:
        error = f"driver of attempt {attempt} on {member} {local.exited}"
    elif not local.member_alive:
        error = f"daemon {member}, where attempt {attempt} was placed, is gone"
    elif (now - job.status.updated).total_seconds() < settings.start_timeout:
        reason = f"driver of attempt {attempt} is starting on {member}"
        limits = job_lifecycle(job, settings).limits
        if limits.start_timeout is None:
            return Wait(reason=reason)
        verdict = _judged(job, limits, now)
        if isinstance(verdict, Expired):
            return EndAttempt(
                attempt=attempt, why=verdict.outcome, detail=verdict.reason, reason=verdict.reason
            )
        return Wait(until=verdict, reason=reason)
    else:
        # Its member is up and saw no exit: the driver may live on without its session (a
        # SIGSTOPped process, one whose session expired) or never have started. Ended (SIGKILL
        # of its group at once: it cannot do anything useful) and known dead before the job
        # moves on; counted as lost.
        detail = f"driver of attempt {attempt} on {member} left no outcome and holds no running "
        detail += f"node {settings.start_timeout:g} s after its placement"
        return EndAttempt(attempt=attempt, why=STUCK, detail=detail, grace=0.0, reason=detail)
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
    until = job.outcome.finished + timedelta(seconds=bound)
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
    ended: str | None = None,
) -> Action:
    """The attempt recorded in ``status`` is over with ``outcome`` (``lost``: without one;
    ``ended``: the leader ended it, TIMED_OUT or STUCK)."""
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
            ended=ended,
            reason=f"attempt {status.attempt} {what}; {used} of {limit} such attempts used",
        )
    # The job's retry policy: a first lost attempt (a host lost, a driver killed) is placed
    # again at once; a job that keeps failing or keeps getting lost backs off, each kind with
    # its own streak, both reset by a stable run.
    policy = job_lifecycle(job, settings).retry
    end = AttemptEnd(
        attempt=status.attempt,
        kind=LOST if lost else FAILURE,
        ended=now,
        started=started_at(job) if job.outcome and job.outcome.attempt == status.attempt else None,
    )
    due = after_end(end, streak(job), policy, job.job_id)
    delay = due.delay
    restart = Restart(
        failures=failures,
        lost=lost_count,
        not_before=due.at,
        error=error,
        streak_failures=due.streak.failures,
        streak_lost=due.streak.lost,
        ended=ended,
        reason=f"attempt {status.attempt} {what} ({used} of {limit}); retrying in {delay:.3g} s",
    )
    if delay > 0:
        return restart
    reason = f"attempt {status.attempt} {what} ({used} of {limit}); placing the next at once"
    return Start(attempt=status.attempt + 1, ended=restart, reason=reason)
