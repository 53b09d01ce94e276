"""The words the lifecycle adds to the one vocabulary of :mod:`zkstore.records.job_states`.

Job states (what ``jobs list`` shows):

    STOPPING      a stop was asked (``zkstore jobs stop``); its attempt is being ended
    STOPPED       the job was stopped and holds no slot: not finished (no result), its
                  checkpoints kept; ``zkstore jobs resume`` starts its next attempt

How an attempt ended, when the leader ended it
(:class:`~zkstore.lifecycle.lifecycle_records.EndRequest`):

    TIMED_OUT     it ran longer than ``--timeout``, or was placed and not running after
                  ``--start-timeout``: it counts as a failure of the job
    STUCK         it neither checkpointed nor called ``ctx.heartbeat()`` for
                  ``--progress-timeout``: it counts as lost (restarted from its checkpoint)
    STOPPED       it was ended for a stop: it counts as neither

They are members of :class:`zkstore.records.job_states.JobState` (the one vocabulary). Adding a
*value* to a record's ``choices`` (``JobStatus.state``, ``JobResult.outcome``) makes every
daemon of an older version read that record as garbage, which quarantines the job: upgrade
every daemon before the first stop. Adding an optional *field* is safe (older readers ignore
unknown keys).
"""

from __future__ import annotations

from zkstore.records.job_states import END_REASONS, STOPPED, STOPPING, STUCK, TIMED_OUT

__all__ = [
    "COUNTED_AS",
    "END_REASONS",
    "FAILURE",
    "LOST",
    "NOT_COUNTED",
    "STOPPED",
    "STOPPING",
    "STUCK",
    "TIMED_OUT",
]

#: How an ended attempt is counted: against ``--max-attempts`` (a failure), against the lost
#: attempts' limit, or not at all.
FAILURE = "failure"
LOST = "lost"
NOT_COUNTED = "not-counted"

COUNTED_AS: dict[str, str] = {TIMED_OUT: FAILURE, STUCK: LOST, STOPPED: NOT_COUNTED}
