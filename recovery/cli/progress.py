"""What ``jobs wait`` and ``submit --wait`` tell someone following a job: honest lines, once.

Pure: :func:`follow_lines` turns the next snapshot of a job (and what was said so far, a
:class:`Followed`) into the lines to print now. It is fed every snapshot the follower sees, in
order, and may miss some (a watch fires once for several changes); what it says holds anyway,
because it reads the job's counters rather than its transitions:

- an attempt that was lost says so, and why (the leader's words: "driver of attempt 1 on host-a
  killed by signal 9 and left no outcome"), and that a lost attempt does not count against
  ``--max-attempts``; one that failed says so too, with its error's headline and the count;
- a driver that vanished is told as such while the leader has not acted yet ("its driver is gone
  without an outcome"), never as the job going back to STARTING the same attempt;
- a state line is printed only when what it says changed: no duplicate RUNNING line when only
  the Spark application (one line of its own, once) or the control acknowledgement changed;
- the end is left to the caller's closing line (the result's outcome and attempts).

:func:`interrupted_lines` is what Ctrl-C prints: the job goes on, and how to follow it again.
Lines carry no job id prefix: the caller adds it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from zkstore.jobs.definition import DEFAULT_MAX_LOST_ATTEMPTS
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.records.job_states import (
    CLEANING,
    ENDED,
    PAUSED,
    PENDING,
    QUARANTINED,
    RESTARTING,
    RUNNING,
    STARTING,
    SUBMITTED,
)
from zkstore.service.job_view import headline

__all__ = ["Followed", "follow_lines", "interrupted_lines", "start", "state_line"]


@dataclass(frozen=True)
class Followed:
    """What has been said about the job so far."""

    line: str | None = None
    #: the attempt whose driver was last seen running, and whether its vanishing was told
    running: int | None = None
    gone: int | None = None
    failures: int = 0
    lost: int = 0
    spark: str | None = None


def start(job: JobSnapshot) -> tuple[list[str], Followed]:
    """The first lines about a job someone starts following (``jobs wait`` of a job that has
    run for a while): its state, and a summary of its earlier attempts' ends, told once (the
    counters start from there: only what happens from now on gets a line of its own)."""
    status = job.status
    seen = Followed()
    lines = []
    if status is not None and (status.failures or status.lost):
        lines.append(
            f"earlier attempts: {status.failures} failed, {status.lost} lost"
            + (f"; the last: {why}" if (why := headline(status.last_error)) else "")
        )
        seen = replace(seen, failures=status.failures, lost=status.lost)
    more, seen = follow_lines(seen, job)
    return lines + more, seen


def follow_lines(seen: Followed, job: JobSnapshot) -> tuple[list[str], Followed]:
    """The lines to print for ``job`` after ``seen``, and what has been said then."""
    lines: list[str] = []
    status = job.status
    if status is not None:
        lines += _ended_attempts(seen, job)
        seen = replace(seen, failures=status.failures, lost=status.lost)
    if job.running is not None:
        seen = replace(seen, running=job.running.attempt)
    gone = _driver_gone(seen, job)
    if gone is not None:
        lines.append(gone)
        seen = replace(seen, gone=seen.running, line=gone)
    elif job.result is None and not _still_gone(seen, job):
        line = state_line(job)
        if line is not None and line != seen.line:
            lines.append(line)
            seen = replace(seen, line=line)
    spark = job.spark
    if (
        spark is not None
        and job.running is not None
        and spark.attempt == job.running.attempt
        and spark.app_id != seen.spark
    ):
        lines.append(
            f"attempt {spark.attempt}: Spark application {spark.app_id}"
            + (f", UI {spark.ui}" if spark.ui else "")
        )
        seen = replace(seen, spark=spark.app_id)
    return lines, seen


def _ended_attempts(seen: Followed, job: JobSnapshot) -> list[str]:
    """A line per attempt the leader counted as lost or failed since ``seen``."""
    status = job.status
    assert status is not None
    lines = []
    # The attempt that ended: the current one while the job waits to restart, else the one
    # before the attempt the same write placed.
    attempt = status.attempt if status.state == RESTARTING else status.attempt - 1
    why = headline(status.last_error)
    if status.lost > seen.lost:
        allowed = job.summary_int("max_lost") or DEFAULT_MAX_LOST_ATTEMPTS
        lines.append(
            f"attempt {attempt} was lost: {why or 'its driver ended without an outcome'} "
            f"(lost attempts do not count against --max-attempts: {status.lost} of {allowed} "
            "allowed)"
        )
    if status.failures > seen.failures:
        limit = job.summary_int("max_attempts") or 1
        lines.append(
            f"attempt {attempt} failed: {why or 'no error recorded'} ({status.failures} of "
            f"{limit} attempts used)"
        )
    return lines


def _driver_gone(seen: Followed, job: JobSnapshot) -> str | None:
    """The driver of the attempt last seen running is gone and nothing says how (yet)."""
    status = job.status
    if (
        seen.running is None
        or seen.gone == seen.running
        or job.driver_present
        or job.result is not None
        or status is None
        or status.state != STARTING
        or status.attempt != seen.running
        or job.attempt_outcome is not None
    ):
        return None
    where = f" on {status.daemon_id}" if status.daemon_id else ""
    end = job.end
    if end is not None and end.attempt == seen.running:
        detail = f": {end.detail}" if end.detail else ""
        return (
            f"attempt {seen.running}: its driver{where} was ended by the leader "
            f"({end.reason}{detail})"
        )
    return (
        f"attempt {seen.running}: its driver{where} is gone without an outcome; waiting for "
        "the leader to record how it ended"
    )


def _still_gone(seen: Followed, job: JobSnapshot) -> bool:
    """The attempt whose driver was told gone is still the one in ``status``: nothing new."""
    status = job.status
    return (
        seen.gone is not None
        and status is not None
        and status.state == STARTING
        and status.attempt == seen.gone
        and not job.driver_present
    )


def state_line(job: JobSnapshot) -> str | None:
    """The job's state in words, as ``jobs wait`` prints it (None: nothing worth a line)."""
    state, status, running = job.state, job.status, job.running
    attempt = f"attempt {job.attempt}" if job.attempt else "attempt ?"
    if state in (RUNNING, PAUSED) and running is not None:
        line = f"{state} {attempt} on {running.host} pid {running.pid}"
        if state == PAUSED:
            line += f" (paused at a pause point: zkstore control resume {job.job_id})"
        return line
    if state == STARTING and status is not None:
        where = f" on {status.daemon_id}" if status.daemon_id else ""
        return f"STARTING {attempt}{where}"
    if state == PENDING:
        reason = status.reason if status is not None and status.reason else None
        return f"PENDING: {reason or 'waiting for its first start'}"
    if state == RESTARTING and status is not None:
        when = _clock(status.not_before)
        return f"RESTARTING: attempt {status.attempt + 1}" + (f" at {when}" if when else "")
    if state == QUARANTINED:
        reason = job.quarantine.reason if job.quarantine is not None else None
        return f"QUARANTINED: {headline(reason) or 'its records cannot be read'}"
    if state == SUBMITTED:
        return "SUBMITTED: no leader has seen it yet"
    if state in (ENDED, CLEANING):
        return None  # an attempt's end is told by the counters; the job's end by the caller
    return state


def _clock(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%H:%M:%S UTC")


def interrupted_lines(job_id: str, prog: str = "zkstore") -> list[str]:
    """What Ctrl-C on ``jobs wait`` or ``submit --wait`` prints (then exit 130): the job is
    not stopped, and how to follow it again."""
    return [
        f"interrupted: only this command stopped; job {job_id} goes on in the cluster",
        f"follow it again: {prog} jobs wait {job_id}",
        f"its log: {prog} jobs logs {job_id} --follow",
        f"stop it: {prog} jobs cancel {job_id}",
    ]
