"""``zkstore jobs wait``: follow a job to its end, as ``submit --wait`` does (:func:`follow`).

Imported with the ``jobs`` group; the client is imported inside the command, so that a usage
error costs click and this module only.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

import click

from recovery.cli.base import Connection, connection_options, wait_timeout_option
from recovery.cli.jobs.job_commands import jobs

if TYPE_CHECKING:
    from recovery.cli.progress import Followed
    from recovery.client.api import Client
    from zkstore.jobs.snapshot import JobSnapshot
    from zkstore.records.fleet_records import LeaderInfo

__all__ = ["Progress", "follow", "wait_job"]


@jobs.command("wait")
@click.argument("job_id")
@connection_options
@wait_timeout_option
def wait_job(job_id: str, connection: Connection, wait_timeout: float | None) -> None:
    """Follow a job to its end (again, e.g. after Ctrl-C on submit --wait).

    Prints its state as it changes and exits with its outcome, as submit --wait does:
    0 SUCCEEDED, 1 FAILED, 3 CANCELLED, 4 no such job, 5 quarantined, 7 --wait-timeout reached.
    """
    from recovery.client.api import Client
    from zkstore.layout import validate_job_id

    validate_job_id(job_id)
    with Client(connection.config) as client:
        follow(client, job_id, wait_timeout)


def follow(client: Client, job_id: str, timeout: float | None) -> None:
    """Print the job's progress until it ends; exit with its outcome (raises the errors of
    :meth:`Client.wait`, which the command line turns into their exit codes). Ctrl-C stops this
    command only: it says so, and how to follow the job again (exit 130)."""
    from recovery.cli.progress import interrupted_lines
    from zkstore.errors import JobDidNotSucceed, JobEndedCancelled
    from zkstore.records.job_states import CANCELLED, SUCCEEDED
    from zkstore.service.job_view import headline

    progress = Progress(job_id)
    previous = _exit_on_interrupt(job_id)
    try:
        result = client.wait(
            job_id, timeout=timeout, on_change=progress.changed, on_leader=progress.leader
        )
    except KeyboardInterrupt:  # in-process (no handler of ours): the same lines, exit 130
        for line in interrupted_lines(job_id):
            click.echo(line, err=True)
        raise click.exceptions.Exit(130) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    message = f"{job_id}: {result.outcome} after {result.attempts} attempt(s)"
    if result.error and result.outcome != CANCELLED:
        message += f": {headline(result.error)}"
    if result.outcome == CANCELLED:
        raise JobEndedCancelled(message)
    if result.outcome != SUCCEEDED:
        raise JobDidNotSucceed(message)
    click.echo(message, err=True)


def _exit_on_interrupt(job_id: str) -> Any:
    """In the console script's main thread: Ctrl-C prints what it stopped (only this command)
    and how to follow the job again, then exits 130 at once, without unwinding through the
    ZooKeeper client (a session left open expires by itself: a follower holds nothing in it).
    Returns the handler it replaced, None where it installed none."""
    from recovery.cli.progress import interrupted_lines

    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupted(signum: int, frame: object) -> None:
        for line in interrupted_lines(job_id):
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        os._exit(130)

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None  # somebody else's (a test runner's): leave it
    return signal.signal(signal.SIGINT, interrupted)


class Progress:
    """What ``--wait`` prints on stderr (:mod:`recovery.cli.progress`): a line when what it says
    changes (never the same state twice), each attempt lost or failed with why, the Spark
    application once, and when no leader is up."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.leader_missing = False
        self.seen: Followed | None = None

    def say(self, message: str) -> None:
        click.echo(f"{self.job_id}: {message}", err=True)

    def changed(self, snapshot: JobSnapshot) -> None:
        from recovery.cli.progress import follow_lines, start

        if self.seen is None:
            lines, self.seen = start(snapshot)
        else:
            lines, self.seen = follow_lines(self.seen, snapshot)
        for line in lines:
            self.say(line)

    def leader(self, info: LeaderInfo | None) -> None:
        if info is None:
            self.leader_missing = True
            self.say("no leader is up: the job waits until a daemon leads (zkstore daemon)")
        elif self.leader_missing:
            self.leader_missing = False
            self.say(f"daemon {info.daemon_id} on {info.host} leads now")
