"""``zkstore jobs logs``: a job's driver logs, read from storage on any host.

The daemon that ran an attempt shipped its output to storage as it ran (see
:mod:`zkstore.jobs.logs`); this reads it back from wherever the command runs, in order, whole or
its last lines, and with ``--follow`` as it grows, moving on to each next attempt.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from recovery.cli.base import Connection, connection_options
from recovery.cli.jobs.job_commands import jobs, open_cluster

if TYPE_CHECKING:
    from zkstore.cluster import Cluster
    from zkstore.jobs.snapshot import JobSnapshot


__all__ = ["AttemptEnds", "attempt_of", "job_attempt", "job_logs", "job_snapshot", "not_started"]


def job_attempt(cluster: Cluster, job_id: str) -> tuple[int, bool] | None:
    """The job's current attempt and whether it has ended (a result, or quarantine: it will not
    run again by itself); None if the job has no trace in ZooKeeper."""
    return attempt_of(job_snapshot(cluster, job_id))


def attempt_of(snapshot: JobSnapshot | None) -> tuple[int, bool] | None:
    if snapshot is None:
        return None
    ended = snapshot.result is not None or snapshot.quarantined
    return snapshot.attempt or 0, ended


def job_snapshot(cluster: Cluster, job_id: str) -> JobSnapshot | None:
    from zkstore.jobs.snapshot import read_snapshots

    return read_snapshots(cluster.zk, cluster.layout, [job_id]).get(job_id)


def not_started(snapshot: JobSnapshot | None) -> str | None:
    """Why the job has no log yet (it has not started: ``PENDING: no daemon with zone=eu is
    up``), None if it has run or may have."""
    if snapshot is None or snapshot.attempt or snapshot.result is not None:
        return None
    reason = snapshot.status.reason if snapshot.status is not None else None
    if snapshot.quarantined and snapshot.quarantine is not None:
        reason = snapshot.quarantine.reason
    return snapshot.state + (f": {reason}" if reason else "")


class AttemptEnds:
    """How each attempt a follower leaves behind ended, in the leader's words: the counters of
    the job's status say whether it was lost (the infrastructure) or failed (the job).

    It is shown every snapshot the follower reads (each poll), so that an attempt's end is
    known even when the job has moved on since (its status is gone once the job is cleaned up).
    The counters are compared with those seen when following began: an attempt that had already
    ended then is told as "ended", with the leader's words.
    """

    def __init__(self, snapshot: JobSnapshot | None, first: int) -> None:
        status = snapshot.status if snapshot is not None else None
        self.failures = status.failures if status is not None else 0
        self.lost = status.lost if status is not None else 0
        self.known = status is None or _last_ended(status.attempt, status.state) < first
        self.told: dict[int, str] = {}
        self.observe(snapshot)

    def observe(self, snapshot: JobSnapshot | None) -> JobSnapshot | None:
        from zkstore.service.job_view import headline

        status = snapshot.status if snapshot is not None else None
        if status is None:
            return snapshot
        ended = _last_ended(status.attempt, status.state)
        lost, failed = status.lost > self.lost, status.failures > self.failures
        if ended >= 1 and ended not in self.told and (lost or failed or not self.known):
            how = "ended"
            if self.known and lost:
                how = "was lost (it does not count against --max-attempts)"
            elif self.known and failed:
                how = "failed"
            why = headline(status.last_error)
            self.told[ended] = f"attempt {ended} {how}" + (f": {why}" if why else "")
        self.failures, self.lost, self.known = status.failures, status.lost, True
        return snapshot

    def line(self, attempt: int) -> str:
        return self.told.get(attempt, f"attempt {attempt} ended")


def _last_ended(attempt: int, state: str) -> int:
    """The attempt the status's counters and last error last told of."""
    return attempt if state == "RESTARTING" else attempt - 1


@jobs.command("logs")
@click.argument("job_id")
@click.option("--attempt", type=click.IntRange(1), help="this attempt [default: the latest]")
@click.option("--tail", type=click.IntRange(0), metavar="N", help="only the last N lines")
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="keep printing as the output grows, attempt after attempt, until the job ends",
)
@connection_options
def job_logs(
    job_id: str, attempt: int | None, tail: int | None, follow: bool, connection: Connection
) -> None:
    """Print a job's driver logs (stdout and stderr of its attempts), from any host.

    A job that has not started has no log: without --follow that is an error (exit 4) that says
    why it waits; with --follow its first attempt's log is waited for. Following, a line on
    stderr says how each attempt ended (failed, or lost to the infrastructure) before the next.
    Logs are kept after the job ends for the daemons' --keep-logs (default 7 days).
    """
    from zkstore.errors import HandleNotFound
    from zkstore.jobs.logs import AttemptLog, JobLogs, LogFollower
    from zkstore.layout import validate_job_id

    validate_job_id(job_id)
    out = sys.stdout.buffer
    with open_cluster(connection) as cluster:
        logs = JobLogs(cluster.storage, cluster.storage_layout, job_id)
        first = LogFollower(logs, lambda: job_attempt(cluster, job_id)).start(attempt)
        log = logs.attempts().get(first, AttemptLog(first))
        snapshot = job_snapshot(cluster, job_id)
        waiting = not_started(snapshot) if not log.chunks else None
        if attempt is not None and not log.chunks and not follow:
            raise HandleNotFound(f"no logs of attempt {attempt} of {job_id}")
        if waiting is not None and not follow:
            raise HandleNotFound(f"no logs of {job_id} yet: it has not started ({waiting})")
        if waiting is not None:
            click.echo(f"--- {job_id}: not started yet ({waiting}) ---", err=True)
        ends = AttemptEnds(snapshot, first)
        follower = LogFollower(
            logs, lambda: attempt_of(ends.observe(job_snapshot(cluster, job_id)))
        )
        if tail is not None:
            out.write(logs.tail(log, tail))
        elif not follow:
            for data in logs.read(log):
                out.write(data)
        out.flush()
        if not follow:
            return
        skip = len(log.chunks) if tail is not None else 0
        current = first
        for number, data in follower.follow(first, skip=skip):
            if number != current:
                ends.observe(job_snapshot(cluster, job_id))
                click.echo(f"--- {job_id}: {ends.line(current)} ---", err=True)
                current = number
                click.echo(f"--- {job_id}: attempt {number} ---", err=True)
            out.write(data)
            out.flush()
