"""What the leader's decision needs of a job's lifecycle, from its snapshot: pure.

- :func:`job_lifecycle`: the job's retry policy, limits and notification URL, from its run
  options (:attr:`zkstore.jobs.snapshot.JobSnapshot.run`) over the daemon's defaults
  (``--restart-backoff``/``--max-backoff`` are the default ``--retry-delay``/
  ``--retry-max-delay``; a lost attempt is placed again at once the first time, then backs
  off like a failure). An option that is not valid there is ignored (the default applies):
  the leader must decide for every job.
- :func:`stop_view`: the job as :func:`zkstore.lifecycle.stopping.stop_step` sees it.
- :func:`attempt_times`: the attempt as :func:`zkstore.lifecycle.attempt_limits.judge` sees it.
- :func:`streak`: the two counts the retry pacing carries in the status.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from recovery.settings import DaemonSettings
from zkstore.errors import ConfigError
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.stops import StopRequest
from zkstore.lifecycle.attempt_limits import AttemptTimes, least_limits
from zkstore.lifecycle.options import Lifecycle
from zkstore.lifecycle.retry_backoff import DEFAULT_RESET_AFTER, Backoff, RetryPolicy, Streak
from zkstore.lifecycle.stopping import StopView
from zkstore.records.strict import utc_moment

__all__ = [
    "DEFAULT_JITTER",
    "attempt_times",
    "daemon_policy",
    "job_lifecycle",
    "started_at",
    "stop_view",
    "streak",
]

#: The jitter of the daemon's default pacing (it only ever shortens a delay).
DEFAULT_JITTER = 0.2


def daemon_policy(settings: DaemonSettings) -> RetryPolicy:
    """The pacing of a job that sets none: the daemon's backoff for failures, and for lost
    attempts the same after a first one placed at once."""
    delay, most = settings.restart_backoff, settings.max_backoff
    return RetryPolicy(
        failures=Backoff(delay=delay, max_delay=most, jitter=DEFAULT_JITTER),
        lost=Backoff(delay=delay, max_delay=most, jitter=DEFAULT_JITTER, first_at_once=True),
        reset_after=DEFAULT_RESET_AFTER,
    )


def job_lifecycle(job: JobSnapshot, settings: DaemonSettings) -> Lifecycle:
    """The job's lifecycle: the options its run options give (parsed once, on its snapshot:
    :attr:`JobSnapshot.run`) over the daemon's defaults. An option that does not fit them
    (a delay over the maximum) is left out: the leader decides for every job."""
    lifecycle = Lifecycle(
        retry=daemon_policy(settings), limits=least_limits(settings.store.lowered_minimums)
    )
    given = job.run.lifecycle.given() if job.run is not None else {}
    for key, value in sorted(given.items()):
        try:
            lifecycle = lifecycle.with_options(**{key: value})
        except ConfigError:
            continue  # not valid here: the default applies
    return lifecycle


def streak(job: JobSnapshot) -> Streak:
    """The status's streaks (a status written before them: its counts)."""
    status = job.status
    if status is None:
        return Streak()
    failures = status.streak_failures if status.streak_failures is not None else status.failures
    lost = status.streak_lost if status.streak_lost is not None else status.lost
    return Streak(failures=failures, lost=lost)


def stop_view(job: JobSnapshot, *, known_dead: bool) -> StopView:
    """The job as the stop decision sees it (an unreadable stop node still asks for a stop,
    without a checkpoint)."""
    assert job.status is not None
    status = job.status
    stop = job.stop
    asked = job.stop_asked
    if stop is not None and asked is not None:
        # dated by ZooKeeper, not by its writer: a client's clock an hour ahead waited an hour
        # for the checkpoint it asked, one behind gave it no time at all
        stop = replace(stop, requested=asked)
    if stop is None and "stop" in job.errors:
        stop = StopRequest(version=None, requested=utc_moment(), reason="unreadable stop request")
    outcome = job.outcome
    token = None
    if job.newest_checkpoint is not None:
        value = job.newest_checkpoint.summary.get("control_checkpoint")
        token = value if isinstance(value, str) else None
    return StopView(
        state=status.state,
        attempt=status.attempt,
        stop=stop,
        end=job.end,
        driver_present=job.driver_present,
        known_dead=known_dead,
        outcome=outcome.outcome
        if outcome is not None and outcome.attempt == status.attempt
        else None,
        cancel_requested=job.cancel_requested,
        checkpoint_token=token,
    )


def attempt_times(job: JobSnapshot) -> AttemptTimes | None:
    """The times of the attempt in the status (None: unreadable)."""
    status = job.status
    if status is None:
        return None
    running, newest, beat = job.running, job.newest_checkpoint, job.heartbeat
    since = running.started if running is not None and running.attempt == status.attempt else None
    checkpoint = newest.created_at if newest is not None else None
    heartbeat = beat.at if beat is not None and beat.attempt == status.attempt else None
    if checkpoint is not None and since is not None and checkpoint < since:
        checkpoint = None  # an earlier attempt's
    return AttemptTimes(
        attempt=status.attempt,
        placed=status.updated,
        running_since=since,
        checkpoint=checkpoint,
        heartbeat=heartbeat,
    )


def started_at(job: JobSnapshot) -> datetime | None:
    """When the attempt that just ended started running, if its outcome says."""
    outcome = job.outcome
    return None if outcome is None else outcome.started
