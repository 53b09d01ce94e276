"""The one vocabulary of zkstore: job states, result states, artifact scopes and states, control
key states and driver exit codes, as enumerations (each member is its stored string or code).

A job's state, as ``jobs list`` and the API show it, is derived from all of its records by
:attr:`zkstore.jobs.snapshot.JobSnapshot.state`::

    SUBMITTED     in currentJobs, no status yet (no leader has seen it)
    PENDING       status written by the leader; waiting for a driver slot or its first start
    STARTING      an attempt is assigned; its driver is starting (no ``running`` node yet)
    RUNNING       a driver holds the job's ``running`` node
    PAUSED        ... and its job is blocked at a pause point (``zkstore control pause``), as
                  the driver's control acknowledgement says
    ENDED         an attempt ended (its outcome is recorded); the leader has not acted on it
    RESTARTING    the last attempt failed; the next one starts after a backoff
    CLEANING      the result is recorded (DIRTY); the job's data is being removed
    SUCCEEDED / FAILED / CANCELLED   the result, once cleanup is done (CLEAN)
    QUARANTINED   the job cannot run as it is (unreadable definition or records)
    STOPPING      a stop was asked (``zkstore jobs stop``); its attempt is being ended
    STOPPED       the job was stopped and holds no slot: not finished (no result), its
                  checkpoints kept; ``zkstore jobs resume`` starts its next attempt
    NEEDS_UPGRADE a record of the job was written at a newer fleet protocol than this reader
                  speaks: left alone (never quarantined), until a newer daemon acts on it
                  (shown only: never written)

How the leader ended an attempt (the ``end`` request, and ``status.ended`` afterwards):

    TIMED_OUT     it ran longer than ``--timeout``, or was placed and not running after
                  ``--start-timeout``: it counts as a failure of the job
    STUCK         it neither checkpointed nor called ``ctx.heartbeat()`` for
                  ``--progress-timeout``: it counts as lost (restarted from its checkpoint)
    STOPPED       it was ended for a stop: it counts as neither

The leader records only PENDING, STARTING, RESTARTING and STOPPED in ``status``; a driver
records the outcome of its attempt (one of the three outcomes, or BROKEN: it could not load
the definition); the result store records DIRTY then CLEAN with the job's final outcome.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

__all__ = [
    "ATTEMPT_OUTCOMES",
    "BROKEN",
    "CANCELLED",
    "CLEAN",
    "CLEANING",
    "DIRTY",
    "ENDED",
    "END_REASONS",
    "FAILED",
    "NEEDS_UPGRADE",
    "OUTCOMES",
    "PAUSED",
    "PENDING",
    "QUARANTINED",
    "RESTARTING",
    "RUNNING",
    "STARTING",
    "STATUS_STATES",
    "STOPPED",
    "STOPPING",
    "STUCK",
    "SUBMITTED",
    "SUCCEEDED",
    "TIMED_OUT",
    "ArtifactScope",
    "ArtifactState",
    "DriverExit",
    "JobState",
    "KeyState",
    "ResultState",
]


class JobState(StrEnum):
    """A job's state (derived by :attr:`~zkstore.jobs.snapshot.JobSnapshot.state`), the states
    the leader writes in ``status``, and the outcomes of attempts and jobs."""

    SUBMITTED = "SUBMITTED"
    PENDING = "PENDING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    ENDED = "ENDED"
    RESTARTING = "RESTARTING"
    CLEANING = "CLEANING"
    QUARANTINED = "QUARANTINED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    BROKEN = "BROKEN"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    TIMED_OUT = "TIMED_OUT"
    STUCK = "STUCK"
    NEEDS_UPGRADE = "NEEDS_UPGRADE"


class ResultState(StrEnum):
    """A result's cleanup state: DIRTY (its cleanup is unfinished, indexed under
    ``R/cleanup``), then CLEAN."""

    DIRTY = "DIRTY"
    CLEAN = "CLEAN"


class ArtifactScope(StrEnum):
    """Whose an artifact is: one attempt's (released when it ends) or the job's."""

    ATTEMPT = "attempt"
    JOB = "job"


class ArtifactState(StrEnum):
    """An artifact's record: registered (the job writes its data), finished, being released."""

    IN_PROGRESS = "in-progress"
    FINISHED = "finished"
    RELEASING = "releasing"


class KeyState(StrEnum):
    """What became of one control key, as ``control get`` shows it (lower case: these are not
    job states)."""

    APPLIED = "applied"
    PENDING = "pending"
    REJECTED = "rejected"
    NEEDS_RESTART = "needs-restart"


class DriverExit(IntEnum):
    """How a driver process exits: what its member records and the leader reads. Not the exit
    codes of the command line (:class:`zkstore.errors.ExitCode`): a driver exit 4 is a cancelled
    attempt, a command's exit 4 is "no such job"."""

    SUCCEEDED = 0
    FAILED = 1
    #: another attempt holds ``running``, or this attempt was superseded
    REFUSED = 3
    CANCELLED = 4
    #: the definition cannot be loaded: quarantine material
    BROKEN = 5
    #: the session was suspended past the safe bound: stopped without an outcome
    SUSPENDED = 6


SUBMITTED = JobState.SUBMITTED
PENDING = JobState.PENDING
STARTING = JobState.STARTING
RUNNING = JobState.RUNNING
PAUSED = JobState.PAUSED
ENDED = JobState.ENDED
RESTARTING = JobState.RESTARTING
CLEANING = JobState.CLEANING
QUARANTINED = JobState.QUARANTINED

SUCCEEDED = JobState.SUCCEEDED
FAILED = JobState.FAILED
CANCELLED = JobState.CANCELLED
BROKEN = JobState.BROKEN

STOPPING = JobState.STOPPING
STOPPED = JobState.STOPPED
TIMED_OUT = JobState.TIMED_OUT
STUCK = JobState.STUCK
NEEDS_UPGRADE = JobState.NEEDS_UPGRADE

#: What the leader writes in a job's ``status``. STOPPED is read as garbage (the job
#: quarantined) by daemons older than it: upgrade every daemon before the first stop.
STATUS_STATES = (PENDING, STARTING, RESTARTING, STOPPED)
#: Why the leader ended an attempt (the ``end`` request's reason, ``status.ended``).
END_REASONS = (TIMED_OUT, STUCK, STOPPED)
#: How a job ends, in its result.
OUTCOMES = (SUCCEEDED, FAILED, CANCELLED)
#: How an attempt ends, in its ``outcome`` record.
ATTEMPT_OUTCOMES = (*OUTCOMES, BROKEN)

#: The result's cleanup state.
DIRTY = ResultState.DIRTY
CLEAN = ResultState.CLEAN
