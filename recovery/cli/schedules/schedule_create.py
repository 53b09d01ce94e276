"""``zkstore schedules create``: a job definition built as ``submit`` builds it (the same job
options and run options: one option stack, :mod:`recovery.cli.joboptions` and
:func:`recovery.cli.lifecycle_options.lifecycle_options`), stored once as a schedule
(:mod:`zkstore.schedules.schedule_service`); the leader runs it at every window. The group and
the other verbs: :mod:`recovery.cli.schedules.schedule_commands`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from recovery.cli.base import Connection, store_timeout_connection_options
from recovery.cli.joboptions import job_options, split_job_options
from recovery.cli.lifecycle_options import lifecycle_options, lifecycle_summary
from recovery.cli.schedules.schedule_commands import (
    WHEN_KEYS,
    interval_note,
    new_spec,
    schedules,
    when_options,
)
from zkstore.schedules.runs import validate_name

__all__ = ["create_schedule"]


@schedules.command("create", context_settings={"ignore_unknown_options": False})
@click.argument("schedule_name", metavar="NAME")
@click.argument("target", metavar="FILE.py[:FUNCTION]")
@click.argument("args", nargs=-1, metavar="[-- ARGS...]")
@store_timeout_connection_options
@when_options(update=False)
@job_options
@lifecycle_options
def create_schedule(
    schedule_name: str,
    target: str,
    args: tuple[str, ...],
    connection: Connection,
    **options: Any,
) -> None:
    """Run FILE.py[:FUNCTION] at every window of --cron or --every, each window once.

    Each window's run is a job named NAME-<window, UTC> (NAME-20261124T020000Z), with the
    job options and run options given here, as submit takes them (--timeout is each run's
    time limit; --notify, the retry pacing); `schedules show NAME` lists them, the recent
    windows and how many it is behind. Prints NAME and the next window. Windows closer than
    the cluster's minimum (the leader's --schedule-min-interval, default 10s: `zkstore
    cluster settings` shows it) are refused, as is a --notify the leader would drop, a
    --start-at more than --catchup-max windows back with --catchup all, and an
    --after-schedule whose windows are not this schedule's.
    """
    from recovery.client.api import Client
    from zkstore.schedules import schedule_service
    from zkstore.schedules.schedule_store import ScheduleStore
    from zkstore.schedules.schedule_view import next_window

    name = validate_name(schedule_name)
    when = {key: options.pop(key) for key in WHEN_KEYS}
    job, lifecycle = split_job_options(options)
    now = datetime.now(UTC)
    spec = new_spec(name, now, **when)
    with Client(connection.config) as client:
        client.policy.check_schedule(spec, now)  # the leader's minimum, not this environment's
        store = ScheduleStore.for_config(connection.config, client.cluster.zk)
        if spec.after_schedule is not None:
            schedule_service.check_chain(spec, store)
        definition = client.definition_for_file(
            target,
            list(args),
            job_id=name,
            warn=lambda message: click.echo(f"zkstore: warning: {message}", err=True),
            lifecycle=lifecycle_summary(lifecycle),
            **job,
        )
        client.check_definition(definition)
        created = schedule_service.create(store, spec, definition)
    click.echo(name)
    note = interval_note(created.spec, when["every"], aligned=when["start_at"] is None)
    if note is not None:
        click.echo(note, err=True)
    upcoming = next_window(created.spec, datetime.now(UTC))
    if upcoming is not None:
        click.echo(f"next window: {upcoming}", err=True)
