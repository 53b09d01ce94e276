"""``zkstore schedules create``: a job definition built as ``submit`` builds it (the same job
options), stored once as a schedule (:mod:`zkstore.schedules.store`); the leader runs it at every
window. The other schedule commands are the store's (:mod:`zkstore.cli.schedules`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from recovery.cli.joboptions import job_options, job_settings
from recovery.client.client import Client
from zkstore.cli.base import Connection, connection_options
from zkstore.cli.schedules import schedules
from zkstore.errors import ConfigError
from zkstore.schedules.limits import check_bounds, min_interval_from_env
from zkstore.schedules.records import (
    ALLOW,
    CONCURRENCY,
    DEFAULT_CATCHUP_MAX,
    LATEST,
    MAX_CATCHUP_MAX,
    ScheduleSpec,
    parse_catchup,
)
from zkstore.schedules.runs import validate_name
from zkstore.schedules.store import ScheduleStore
from zkstore.schedules.timing import (
    format_time,
    parse_cron,
    parse_every,
    parse_moment,
    parse_timezone,
)
from zkstore.schedules.view import next_window
from zkstore.strict import utc_now


@schedules.command("create", context_settings={"ignore_unknown_options": False})
@click.argument("schedule_name", metavar="NAME")
@click.argument("target", metavar="FILE.py[:FUNCTION]")
@click.argument("args", nargs=-1, metavar="[-- ARGS...]")
@connection_options
@click.option("--cron", metavar="EXPR", help='cron expression: "0 2 * * *", @daily, ...')
@click.option("--timezone", default="UTC", show_default=True, help="the cron's wall clock")
@click.option("--every", metavar="DURATION", help="a fixed interval instead: 90s, 10m, 1h30m")
@click.option(
    "--concurrency",
    type=click.Choice(CONCURRENCY),
    default=ALLOW,
    show_default=True,
    help="a window whose previous run still lives: run both (allow), skip it (forbid), or "
    "cancel the previous run and start once it is gone (replace)",
)
@click.option(
    "--catchup",
    default=LATEST,
    show_default=True,
    help="windows that passed while no daemon led: none, latest, all, or a number of them",
)
@click.option(
    "--catchup-max",
    type=click.IntRange(1, MAX_CATCHUP_MAX),
    metavar="N",
    help=f"--catchup all runs at most the newest N late windows (the older ones are recorded "
    f"missed); a --start-at further back than N windows is refused [default "
    f"{DEFAULT_CATCHUP_MAX}]",
)
@click.option("--start-at", metavar="TIME", help="first window at or after this time")
@click.option("--end-at", metavar="TIME", help="no window at or after this time")
@click.option(
    "--after-schedule",
    metavar="NAME",
    help="each run waits for that schedule's run of the same window to succeed",
)
@job_options
def create_schedule(
    schedule_name: str,
    target: str,
    args: tuple[str, ...],
    connection: Connection,
    cron: str | None,
    timezone: str,
    every: str | None,
    concurrency: str,
    catchup: str,
    catchup_max: int | None,
    start_at: str | None,
    end_at: str | None,
    after_schedule: str | None,
    **job: Any,
) -> None:
    """Run FILE.py[:FUNCTION] at every window of --cron or --every, each window once.

    Each window's run is a job named NAME-<window, UTC> (NAME-20261124T020000Z), with the
    job options given here; `schedules show NAME` lists the recent windows and how many it
    is behind. Prints NAME and the next window. Windows closer than the cluster's minimum
    (ZKSTORE_SCHEDULE_MIN_INTERVAL, default 10s) are refused, as is a --start-at more than
    --catchup-max windows back with --catchup all.
    """
    name = validate_name(schedule_name)
    if (cron is None) == (every is None):
        raise ConfigError("give one of --cron EXPR and --every DURATION")
    zone = parse_timezone(timezone)
    if after_schedule is not None and validate_name(after_schedule) == name:
        raise ConfigError("--after-schedule names the schedule itself")
    spec = ScheduleSpec(
        version=None,
        name=name,
        created=utc_now(),
        cron=None if cron is None else parse_cron(cron),
        every=None if every is None else parse_every(every),
        timezone=timezone,
        concurrency=concurrency,
        catchup=parse_catchup(catchup),
        start_at=None if start_at is None else format_time(parse_moment(start_at, zone)),
        end_at=None if end_at is None else format_time(parse_moment(end_at, zone)),
        after_schedule=after_schedule,
        catchup_max=catchup_max,
    )
    check_bounds(spec, datetime.now(UTC), min_interval_from_env())
    with Client(connection.config) as client:
        definition = client.definition_for_file(
            target,
            list(args),
            job_id=name,
            warn=lambda message: click.echo(f"zkstore: warning: {message}", err=True),
            **job_settings(**job),
        )
        store = ScheduleStore.for_config(connection.config, client.cluster.zk)
        created = store.create(spec, definition)
    click.echo(name)
    upcoming = next_window(created.spec, datetime.now(UTC))
    if upcoming is not None:
        click.echo(f"next window: {upcoming}", err=True)
