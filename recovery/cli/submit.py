"""``zkstore submit``: send a job; with ``--wait``, follow it to its end
(:func:`recovery.cli.jobs.job_wait.follow`, shared with ``zkstore jobs wait``).

Imported only when it is used; the submit side (the client, the shipping of modules) is
imported inside the command, so that a usage error costs click and this module only.
"""

from __future__ import annotations

from typing import Any

import click

from recovery.cli.base import (
    Connection,
    cli,
    store_timeout_connection_options,
    wait_timeout_option,
)
from recovery.cli.joboptions import job_options, split_job_options
from recovery.cli.lifecycle_options import lifecycle_options, lifecycle_summary


@cli.command(context_settings={"ignore_unknown_options": False})
@click.argument("target", metavar="FILE.py[:FUNCTION]")
@click.argument("args", nargs=-1, metavar="[-- ARGS...]")
@store_timeout_connection_options
@click.option("--job-id", help="job id [default: <file stem>-<random>]")
@job_options
@click.option(
    "--after",
    multiple=True,
    metavar="JOB[:STATE]",
    help="start only once JOB ended in STATE (SUCCEEDED [default], FAILED, CANCELLED or ENDED: "
    "any); the job fails if JOB ends otherwise; repeatable",
)
@click.option(
    "--idempotency-key",
    metavar="KEY",
    help="derive the job id from the file and KEY: a retry with the same KEY names the same job",
)
@click.option("--wait", is_flag=True, help="follow the job to its end; exit with its outcome")
@wait_timeout_option
@lifecycle_options
def submit(
    target: str,
    args: tuple[str, ...],
    connection: Connection,
    job_id: str | None,
    after: tuple[str, ...],
    idempotency_key: str | None,
    wait: bool,
    wait_timeout: float | None,
    **options: Any,
) -> None:
    """Submit a PySpark job; accepted as soon as it is durable, leader or not.

    FILE.py runs an unmodified PySpark script (restarted from scratch after a failure); a
    file whose top level only defines functions (run, main, or one taking ctx) is refused,
    naming the FILE.py:FUNCTION to give. FILE.py:FUNCTION calls FUNCTION(ctx, *ARGS) with a
    job context: ctx.spark, ctx.job_id, ctx.attempt, ctx.latest_checkpoint(),
    ctx.checkpoint(metadata), ctx.config.

    The job takes along what it needs, stored with it so that any daemon's host can run it:
    the modules FILE.py imports from its own directory, and --py-files, --files and --jars.
    It runs in a fresh working directory per attempt on the driver's host, holding those files
    under their own names; a relative path among ARGS that exists here is refused unless it
    names a shipped file (use an absolute path or a URI).

    Submitting is idempotent: a job id that exists with the same definition and options
    prints that id (exit 0); with another, exit 5 says how they differ. Retry blindly with
    --job-id or --idempotency-key.

    Prints the job id. With --wait, follows the job and exits with its outcome: 0 SUCCEEDED,
    1 FAILED, 3 CANCELLED, 5 quarantined, 7 --wait-timeout reached (the job goes on).
    """
    from recovery.cli.jobs.job_wait import follow
    from recovery.client.api import Client

    job, lifecycle = split_job_options(options)
    summary = lifecycle_summary(lifecycle, connection.config.lowered_minimums)
    with Client(connection.config) as client:
        submitted = client.submit_file(
            target,
            list(args),
            job_id=job_id,
            warn=lambda message: click.echo(f"zkstore: warning: {message}", err=True),
            lifecycle=summary,
            after=after,
            idempotency_key=idempotency_key,
            **job,
        )
        click.echo(submitted)
        if wait:
            follow(client, submitted, wait_timeout)
