"""``zkstore jobs logs``: a job's driver logs, read from storage on any host.

The daemon that ran an attempt shipped its output to storage as it ran (see
:mod:`zkstore.jobs.logs`); this reads it back from wherever the command runs, in order, whole or
its last lines, and with ``--follow`` as it grows, moving on to each next attempt.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from zkstore.cli.base import Connection, connection_options
from zkstore.cli.jobs import jobs, open_cluster

if TYPE_CHECKING:
    from zkstore.cluster import Cluster


def job_attempt(cluster: Cluster, job_id: str) -> tuple[int, bool] | None:
    """The job's current attempt and whether it has ended (a result, or quarantine: it will not
    run again by itself); None if the job has no trace in ZooKeeper."""
    from zkstore.jobs.snapshot import read_snapshots

    snapshot = read_snapshots(cluster.zk, cluster.layout, [job_id]).get(job_id)
    if snapshot is None:
        return None
    ended = snapshot.result is not None or snapshot.quarantined
    return snapshot.attempt or 0, ended


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

    Logs are kept after the job ends for the daemons' --keep-logs (default 7 days).
    """
    from zkstore.errors import HandleNotFound
    from zkstore.jobs.logs import AttemptLog, JobLogs, LogFollower
    from zkstore.layout import validate_job_id

    validate_job_id(job_id)
    out = sys.stdout.buffer
    with open_cluster(connection) as cluster:
        logs = JobLogs(cluster.storage, cluster.storage_layout, job_id)
        follower = LogFollower(logs, lambda: job_attempt(cluster, job_id))
        first = follower.start(attempt)
        log = logs.attempts().get(first, AttemptLog(first))
        if attempt is not None and not log.chunks and not follow:
            raise HandleNotFound(f"no logs of attempt {attempt} of {job_id}")
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
                current = number
                click.echo(f"--- {job_id}: attempt {number} ---", err=True)
            out.write(data)
            out.flush()
