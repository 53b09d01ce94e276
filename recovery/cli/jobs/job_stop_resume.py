"""``zkstore jobs stop`` and ``zkstore jobs resume``: a last-state upgrade from the command line.

``stop`` writes the stop request (:class:`zkstore.lifecycle.stopstore.StopStore`), then follows
the job until the leader recorded STOPPED: with ``--checkpoint`` the live attempt is asked for a
checkpoint first and given ``--checkpoint-timeout`` for it; then its driver is ended (SIGTERM,
the daemon's ``--end-grace``, SIGKILL of its process group). ``resume`` starts the next attempt
from the newest checkpoint, with new code (``--definition FILE.py[:FUNCTION]``) and options if
given, and says which checkpoint that is. Both are thin: what they write and when is the store's.

The client and the store are imported inside the commands: naming them on the ``jobs`` group
costs ``zkstore jobs --help`` nothing (issue 27).

A ``stop`` interrupted while it follows the job (Ctrl-C, a lost terminal) changes nothing: the
request is written, the leader carries it out; ``zkstore jobs stop JOB`` again follows it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import click

from recovery.cli.base import Connection, store_timeout_connection_options
from recovery.cli.jobs.job_commands import jobs
from recovery.cli.lifecycle_options import (
    attempt_options,
    lifecycle_options,
    lifecycle_summary,
    stop_options,
)
from zkstore.errors import JobFinished, WaitTimeout
from zkstore.records.job_states import STOPPED
from zkstore.records.strict import time_text

__all__ = ["END_MARGIN", "POLL", "resume_job", "stop_job"]

#: What ``stop`` allows beyond the checkpoint's wait: the daemon's grace between SIGTERM and
#: SIGKILL (30 s by default) and the leader's and member's reaction, with room for a busy host.
END_MARGIN = 90.0
#: How often ``stop`` looks at the job while it follows it.
POLL = 0.2


@jobs.command("stop")
@click.argument("job_id")
@store_timeout_connection_options
@stop_options
@click.option("--reason", help="why, for the record (zkstore jobs show)")
@click.option("--no-wait", is_flag=True, help="write the request and return at once")
def stop_job(
    job_id: str,
    connection: Connection,
    checkpoint: bool,
    checkpoint_timeout: float,
    reason: str | None,
    no_wait: bool,
) -> None:
    """Stop a job without finishing it: it keeps its checkpoints and holds no driver slot.

    With --checkpoint, the running attempt is asked for a checkpoint first (ctx.checkpoint
    answers it) and given --checkpoint-timeout for it; then its driver is ended (SIGTERM, then
    SIGKILL of its process group after the daemon's --end-grace). The job is STOPPED until
    `zkstore jobs resume` starts it again from its newest checkpoint, with new code if you give it.
    Exit 0 once STOPPED, 7 if that took longer than expected (the stop goes on).
    """
    from recovery.client.api import Client
    from zkstore.jobs.snapshot import read_snapshot
    from zkstore.lifecycle.stopstore import StopStore

    with Client(connection.config) as client:
        cluster = client.cluster
        request, made = StopStore(cluster).ask(
            job_id, checkpoint=checkpoint, timeout=checkpoint_timeout, reason=reason
        )
        if not made:
            asked = " (with a checkpoint)" if request.checkpoint else ""
            # when ZooKeeper made it, as the leader counts its deadline (not its writer's date)
            when = read_snapshot(cluster.zk, cluster.layout, job_id).stop_asked
            click.echo(
                f"{job_id}: a stop was requested already, at "
                f"{time_text(when or request.requested)} by {request.by or '?'}{asked}: "
                "waiting for it",
                err=True,
            )
        else:
            asked = (
                f"; a checkpoint is asked for (up to {request.timeout_ms / 1000:g} s)"
                if request.checkpoint
                else ""
            )
            click.echo(f"{job_id}: stop requested by {request.by or '?'}{asked}", err=True)
        if no_wait:
            return
        deadline = time.monotonic() + request.timeout_ms / 1000 + END_MARGIN
        while True:
            snapshot = read_snapshot(cluster.zk, cluster.layout, job_id)
            if snapshot.result is not None:
                raise JobFinished(
                    f"job {job_id} finished ({snapshot.result.outcome}) before it could stop"
                )
            if snapshot.status is not None and snapshot.status.state == STOPPED:
                break
            if time.monotonic() > deadline:
                raise WaitTimeout(
                    f"job {job_id} is not STOPPED yet ({snapshot.state}); the stop goes on: "
                    f"zkstore jobs show {job_id}"
                )
            time.sleep(POLL)
        newest = cluster.checkpoints(job_id).newest_handle()
        where = "from the start (it has no checkpoint)"
        if newest is not None:
            number = newest.summary.get("checkpoint_id")
            where = f"from checkpoint {number} (taken {time_text(newest.created)})"
        click.echo(f"{job_id}: STOPPED at attempt {snapshot.status.attempt}; it resumes {where}")


@jobs.command("resume")
@click.argument("job_id")
@click.argument("args", nargs=-1, metavar="[-- ARGS...]")
@store_timeout_connection_options
@click.option(
    "--definition",
    "target",
    metavar="FILE.py[:FUNCTION]",
    help="run this code from now on (a last-state upgrade); without -- ARGS the job keeps its "
    "arguments",
)
@click.option(
    "--conf",
    "conf_pairs",
    multiple=True,
    metavar="PROP=VALUE",
    help="Spark property for the new code (with --definition); repeatable",
)
@attempt_options
@lifecycle_options
def resume_job(
    job_id: str,
    args: tuple[str, ...],
    connection: Connection,
    target: str | None,
    conf_pairs: tuple[str, ...],
    max_attempts: int | None,
    max_lost_attempts: int | None,
    **lifecycle: Any,
) -> None:
    """Start a STOPPED job's next attempt from its newest checkpoint.

    With --definition FILE.py[:FUNCTION] the job runs that code from now on (its id, name,
    checkpoints and, unless -- ARGS are given, arguments kept: a function job submitted
    before fleet protocol 2 must be given them again); the lifecycle options
    (--timeout, --retry-delay, --notify ...; off removes a limit) and --max-attempts change what
    the job had. Prints which checkpoint it resumes from.
    """
    given = lifecycle_summary(
        {k: v for k, v in lifecycle.items() if v is not None}, connection.config.lowered_minimums
    )
    removed = {k for k, v in lifecycle.items() if v is not None and k not in given}
    from recovery.client.api import Client
    from recovery.shared.sparkconf import parse_spark_conf
    from zkstore.lifecycle.redefine import redefined
    from zkstore.lifecycle.stopstore import StopStore

    with Client(connection.config) as client:
        store = StopStore(client.cluster)
        definition, summary = None, None
        changes = target is not None or given or removed or max_attempts or max_lost_attempts
        if changes:
            # The same code resumed again is a no-op, as a plain resume again is: it is looked
            # at below; anything else is refused before the definition is read.
            again = target is not None and store.resumed_already(job_id)
            if not again:
                store.check_resumable(job_id)
            current = client.cluster.jobs.recover(job_id, lock=False).state
            new = None
            if target is not None:
                conf = parse_spark_conf(conf_pairs) if conf_pairs else None
                new = client.file_definition(
                    target, list(args) if args else None, current=current, conf=conf
                )
            definition = redefined(
                current, new, max_attempts=max_attempts, max_lost_attempts=max_lost_attempts
            )
            kept = dict(getattr(current, "lifecycle", None) or {})
            options = {k: v for k, v in {**kept, **given}.items() if k not in removed}
            definition = dataclasses.replace(definition, lifecycle=options)
            client.check_definition(definition)
            if target is not None:
                stored = client.cluster.jobs.handles.get_handle(job_id).summary
                summary = client.redefinition_summary(
                    definition, target, list(args) if args else None, after=_after_text(stored)
                )
                if again and _same_again(stored, {**definition.summary(), **summary}):
                    click.echo(
                        f"job {job_id} was resumed already with this code and these options: "
                        "nothing to do"
                    )
                    return
                if again:
                    store.check_resumable(job_id)  # resumed already with other code: exit 5
        resumed = store.resume(
            job_id, definition=definition, summary=summary, new_code=target is not None
        )
        click.echo(resumed.describe())


def _after_text(stored: Mapping[str, Any]) -> str | None:
    """The dependencies a job's handle names (``JOB:STATE,...``; None: none), whichever form
    its run options take there (its fingerprint counts them)."""
    from zkstore.jobs.dependencies import format_after
    from zkstore.jobs.runspec import RunSpec

    try:
        return format_after(RunSpec.from_summary(stored).after) or None
    except ValueError:
        return None


def _same_again(stored: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a job's current definition (its handle's ``stored`` summary) is the one ``new``
    describes: the same source, arguments and options (a digest of the source, not of the
    pickle, which differs between processes)."""
    from zkstore.jobs.resubmit import differences
    from zkstore.jobs.runoptions import LIFECYCLE_KEYS

    return not differences(stored, new, also=LIFECYCLE_KEYS)
