"""The one vocabulary of job states, for the records, the leader and people alike.

A job's state, as ``jobs list`` and the API show it, is derived from all of its records by
:attr:`zkstore.jobs.snapshot.JobSnapshot.state`::

    SUBMITTED     in currentJobs, no status yet (no leader has seen it)
    PENDING       status written by the leader; waiting for a driver slot or its first start
    STARTING      an attempt is assigned; its driver is starting (no ``running`` node yet)
    RUNNING       a driver holds the job's ``running`` node
    PAUSED        ... and its job is blocked at a pause point (``zkstore control pause``), as
                  the driver's control acknowledgement says
    RESTARTING    the last attempt failed; the next one starts after a backoff
    CLEANING      the result is recorded (DIRTY); the job's data is being removed
    SUCCEEDED / FAILED / CANCELLED   the result, once cleanup is done (CLEAN)
    QUARANTINED   the job cannot run as it is (unreadable definition or records)

The leader records only PENDING, STARTING and RESTARTING in ``status``; a driver records the
outcome of its attempt (one of the three outcomes, or BROKEN: it could not load the definition);
the result store records DIRTY then CLEAN with the job's final outcome.
"""

from __future__ import annotations

SUBMITTED = "SUBMITTED"
PENDING = "PENDING"
STARTING = "STARTING"
RUNNING = "RUNNING"
PAUSED = "PAUSED"
RESTARTING = "RESTARTING"
CLEANING = "CLEANING"
QUARANTINED = "QUARANTINED"

SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
CANCELLED = "CANCELLED"
BROKEN = "BROKEN"

#: What the leader writes in a job's ``status``.
STATUS_STATES = (PENDING, STARTING, RESTARTING)
#: How a job ends, in its result.
OUTCOMES = (SUCCEEDED, FAILED, CANCELLED)
#: How an attempt ends, in its ``outcome`` record.
ATTEMPT_OUTCOMES = (*OUTCOMES, BROKEN)

#: The result's cleanup state.
DIRTY = "DIRTY"
CLEAN = "CLEAN"
