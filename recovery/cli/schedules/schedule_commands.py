"""Schedule commands: ``zkstore schedules list|show|update|pause|resume|delete`` (``create`` is
the runtime's: it builds a job definition as ``submit`` does,
:mod:`recovery.cli.schedules.schedule_create`; the options of when a schedule fires are here,
:func:`when_options`, for both).

They read and write the schedule's records only (:mod:`zkstore.schedules.schedule_store`); the
leader fires the windows. ``show`` lists the recent windows: fired (the run), skipped (why) or
missed, and the schedule's changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from recovery.cli.base import (
    Connection,
    UsageFailure,
    cli,
    connection_options,
    store_timeout_connection_options,
)
from recovery.cli.jobs.job_commands import open_cluster, open_zookeeper, run_option_lines
from recovery.cli.lifecycle_options import (
    OFF_WORDS,
    attempt_options,
    lifecycle_options,
    lifecycle_summary,
)
from recovery.cli.output import emit, format_option
from zkstore.errors import ConfigError
from zkstore.records.strict import optional_second_text, utc_moment
from zkstore.schedules.runs import validate_name
from zkstore.schedules.schedule_records import (
    CONCURRENCY,
    DEFAULT_CATCHUP_MAX,
    MAX_CATCHUP_MAX,
    ScheduleSpec,
    parse_catchup,
)
from zkstore.schedules.timing import (
    aligned_start,
    parse_cron,
    parse_every,
    parse_moment,
    parse_timezone,
)

if TYPE_CHECKING:
    from zkstore.cluster import Cluster
    from zkstore.layout import Layout
    from zkstore.schedules.schedule_store import ScheduleStore

# The stores are imported inside each command: loading this module, as ``schedules --help``
# and a usage error do, costs click and the parsers of a schedule's options only (no
# ZooKeeper client, no storage).

__all__ = [
    "LIST_JSON_HELP",
    "WHEN_KEYS",
    "changed_spec",
    "delete_schedule",
    "interval_note",
    "list_schedules",
    "new_spec",
    "open_schedules",
    "pause_schedule",
    "read_schedules",
    "resume_schedule",
    "schedules",
    "show_schedule",
    "update_schedule",
    "when_options",
]

F = TypeVar("F", bound=Callable[..., Any])

LIST_JSON_HELP = """\b
JSON: a list of {name, when, cron, every, timezone, concurrency, catchup,
start_at, end_at, after_schedule, paused, next, last, last_run, last_state,
fired, skipped, missed, created, error}."""


@contextlib.contextmanager
def open_schedules(connection: Connection) -> Iterator[tuple[Cluster, ScheduleStore]]:
    from zkstore.schedules.schedule_store import ScheduleStore

    with open_cluster(connection) as cluster:
        yield cluster, ScheduleStore.for_config(connection.config, cluster.zk)


@contextlib.contextmanager
def read_schedules(connection: Connection) -> Iterator[tuple[ScheduleStore, Layout]]:
    """The schedules' store over a ZooKeeper session, for the commands that read records only
    (``list``, ``show``): no storage is built until a definition is read, none is here (fsspec
    is not imported) and no base path is created."""
    from zkstore.schedules.schedule_store import ScheduleStore

    with open_zookeeper(connection) as (zk, layout):
        yield ScheduleStore.for_config(connection.config, zk), layout


@cli.group()
def schedules() -> None:
    """Jobs run at every window of a cron expression or an interval, each window once."""


#: The keyword names :func:`when_options` gives a command.
WHEN_KEYS = (
    "cron",
    "timezone",
    "every",
    "concurrency",
    "catchup",
    "catchup_max",
    "start_at",
    "end_at",
    "after_schedule",
)


def when_options(*, update: bool) -> Callable[[F], F]:
    """When a schedule fires and its policies: ``--cron``, ``--timezone``, ``--every``,
    ``--concurrency``, ``--catchup``, ``--catchup-max``, ``--start-at``, ``--end-at``,
    ``--after-schedule``. For ``create`` with their defaults; for ``update`` all None (not
    given: unchanged), ``--end-at`` and ``--after-schedule`` also taking ``off``."""
    off = "|off" if update else ""

    def defaulted(flag: str, default: str, **keywords: Any) -> Callable[[F], F]:
        """An option with create's default; update's is None (unchanged)."""
        return click.option(
            flag, default=None if update else default, show_default=not update, **keywords
        )

    options = [
        click.option("--cron", metavar="EXPR", help='cron expression: "0 2 * * *", @daily, ...'),
        defaulted("--timezone", "UTC", help="the cron's wall clock"),
        click.option(
            "--every",
            metavar="DURATION",
            help="a fixed interval instead: 90s, 10m, 1h30m, 1d (a plain number is seconds); "
            "without --start-at, windows fall at multiples of it since 1970-01-01T00:00:00Z "
            "(--every 15m: :00, :15, :30, :45)",
        ),
        defaulted(
            "--concurrency",
            CONCURRENCY[0],
            type=click.Choice(CONCURRENCY),
            help="a window whose previous run still lives: run both (allow), skip it "
            "(forbid), or cancel the previous run and start once it is gone (replace)",
        ),
        defaulted(
            "--catchup",
            "latest",
            help="windows that passed while no daemon led: none, latest, all, or a number of them",
        ),
        click.option(
            "--catchup-max",
            type=click.IntRange(1, MAX_CATCHUP_MAX),
            metavar="N",
            help=f"--catchup all runs at most the newest N late windows (the older ones are "
            f"recorded missed); a --start-at further back than N windows is refused [default "
            f"{DEFAULT_CATCHUP_MAX}]",
        ),
        click.option("--start-at", metavar="TIME", help="first window at or after this time"),
        click.option("--end-at", metavar=f"TIME{off}", help="no window at or after this time"),
        click.option(
            "--after-schedule",
            metavar=f"NAME{off}",
            help="each run waits for that schedule's run of the same window to succeed",
        ),
    ]

    def decorate(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


def new_spec(name: str, now: datetime, **when: Any) -> ScheduleSpec:
    """The spec of a new schedule from :func:`when_options` (create's); :class:`ConfigError`
    for options that do not go together. An ``--every`` without ``--start-at`` starts at the
    first multiple of the interval after ``now`` (:func:`aligned_start`)."""
    cron, every = when["cron"], when["every"]
    if (cron is None) == (every is None):
        raise ConfigError("give one of --cron EXPR and --every DURATION")
    zone = parse_timezone(when["timezone"])
    after = when["after_schedule"]
    if after is not None and validate_name(after) == name:
        raise ConfigError("--after-schedule names the schedule itself")
    interval = None if every is None else parse_every(every)
    start = when["start_at"]
    return ScheduleSpec(
        version=None,
        name=name,
        created=utc_moment(),
        cron=None if cron is None else parse_cron(cron),
        every=interval,
        timezone=when["timezone"],
        concurrency=when["concurrency"],
        catchup=parse_catchup(when["catchup"]),
        start_at=parse_moment(start, zone)
        if start is not None
        else (None if interval is None else aligned_start(interval, now)),
        end_at=None if when["end_at"] is None else parse_moment(when["end_at"], zone),
        after_schedule=after,
        catchup_max=when["catchup_max"],
    )


def changed_spec(spec: ScheduleSpec, now: datetime, **when: Any) -> ScheduleSpec:
    """``spec`` with the :func:`when_options` given to ``update`` (None: unchanged). A new
    ``--every`` without ``--start-at`` is aligned from ``now`` on, as at create; ``off``
    removes ``--end-at`` and ``--after-schedule``."""
    changes: dict[str, Any] = {}
    cron, every = when["cron"], when["every"]
    if cron is not None and every is not None:
        raise ConfigError("give one of --cron EXPR and --every DURATION")
    if cron is not None:
        changes.update(cron=parse_cron(cron), every=None)
    if every is not None:
        changes.update(every=parse_every(every), cron=None)
        if when["start_at"] is None:
            changes["start_at"] = aligned_start(changes["every"], now)
    timezone = when["timezone"] or spec.timezone
    zone = parse_timezone(timezone)
    changes["timezone"] = timezone
    for key in ("concurrency", "catchup_max"):
        if when[key] is not None:
            changes[key] = when[key]
    if when["catchup"] is not None:
        changes["catchup"] = parse_catchup(when["catchup"])
    if when["start_at"] is not None:
        changes["start_at"] = parse_moment(when["start_at"], zone)
    end, after = when["end_at"], when["after_schedule"]
    if end is not None:
        off = end.strip().lower() in OFF_WORDS
        changes["end_at"] = None if off else parse_moment(end, zone)
    if after is not None:
        off = after.strip().lower() in OFF_WORDS
        if not off and validate_name(after) == spec.name:
            raise ConfigError("--after-schedule names the schedule itself")
        changes["after_schedule"] = None if off else after
    return replace(spec, **changes)


def interval_note(spec: ScheduleSpec, given: str | None, *, aligned: bool) -> str | None:
    """What ``create`` and ``update`` say of an ``--every`` schedule's windows (``given``: the
    ``--every`` as typed; ``aligned``: no ``--start-at`` was given)."""
    if spec.every is None or given is None:
        return None
    unit = " (a plain number is seconds)" if given.strip().isdigit() else ""
    where = (
        f"at multiples of {spec.every} s since 1970-01-01T00:00:00Z"
        if aligned
        else f"from --start-at {optional_second_text(spec.start_at)}"
    )
    return f"windows every {spec.every} s{unit}, {where}"


@schedules.command("list", epilog=LIST_JSON_HELP)
@connection_options
@format_option
def list_schedules(connection: Connection, fmt: str) -> None:
    """List the schedules: when each fires next, its last run and that run's state."""
    from zkstore.schedules import schedule_view as view

    with read_schedules(connection) as (store, layout):
        rows = view.listing(store, layout)
    emit(rows, fmt, columns=view.COLUMNS, empty="no schedules")


@schedules.command("show")
@click.argument("name")
@connection_options
@format_option
def show_schedule(name: str, connection: Connection, fmt: str) -> None:
    """The schedule, its next window and its recent windows (run, skipped and why, missed).
    Exits 1 if its records cannot be read (``error`` says why)."""
    from zkstore.schedules import schedule_view as view

    with read_schedules(connection) as (store, layout):
        found = view.showing(store, layout, name)
    if fmt == "json":
        emit(found, fmt)
    if found["error"]:
        click.echo(f"zkstore: schedule {name} cannot be read: {found['error']}", err=True)
        raise click.exceptions.Exit(1)
    if fmt == "json":
        return
    for condition in found.get("conditions") or []:  # first: what the leader does not do
        what = "CANNOT FIRE" if condition["type"] == "CannotFire" else condition["type"]
        click.echo(
            f"{name}: {what} ({condition['reason']}, since {condition['since']}): "
            f"{condition['message']}"
        )
    hidden = ("history", "job", "error", "lifecycle", "changes", "conditions")
    head = {k: v for k, v in found.items() if k not in hidden}
    if head.get("behind") is not None:
        head["behind"] = f"{head['behind']:,} windows behind"
    job = found["job"] or {}
    head["runs"] = f"max_attempts {job.get('max_attempts')}, max_lost {job.get('max_lost')}"
    head.update(run_option_lines(found["lifecycle"] or {}))
    emit(head, fmt)
    click.echo("")
    emit(
        [_history_row(entry) for entry in found["history"]],
        fmt,
        columns=("window", "outcome", "job", "reason"),
        empty="no window decided yet",
    )
    if found["changes"]:
        click.echo("")
        emit(found["changes"], fmt, columns=("at", "by", "what"))


@schedules.command("update")
@click.argument("name")
@store_timeout_connection_options
@when_options(update=True)
@attempt_options
@lifecycle_options
def update_schedule(
    name: str,
    connection: Connection,
    max_attempts: int | None,
    max_lost_attempts: int | None,
    **options: Any,
) -> None:
    """Change a schedule: when it fires, its policies, and the options of its runs (the
    lifecycle options of submit: --timeout, --notify, the retry pacing; off removes one;
    --max-attempts, --max-lost-attempts). Only what is given changes.

    One version-checked write of the schedule, recording when, by whom and what changed
    (schedules show lists it). Windows already decided stay as they were; a window being
    fired meanwhile is fired before the change or planned again after it, never with a mix.
    A new --every without --start-at aligns its windows to the new interval from now on.
    The code stays: for new code, delete the schedule and create it again.
    """
    from zkstore.jobs.job_state_store import who
    from zkstore.policy import ClusterPolicy
    from zkstore.schedules.update import run_options, update

    when = {key: options.pop(key) for key in WHEN_KEYS}
    given = lifecycle_summary({k: v for k, v in options.items() if v is not None})
    removed = frozenset(k for k, v in options.items() if v is not None and k not in given)
    now = datetime.now(UTC)

    policy: list[ClusterPolicy] = []  # the leader's, read once connected

    def spec_change(spec: ScheduleSpec) -> ScheduleSpec:
        changed = changed_spec(spec, now, **when)
        if changed != spec:
            policy[0].check_schedule(changed, now)
        return changed

    run_change = None
    if given or removed or max_attempts is not None or max_lost_attempts is not None:

        def run_change(definition: Any) -> Any:
            return run_options(
                definition,
                given,
                removed,
                max_attempts=max_attempts,
                max_lost_attempts=max_lost_attempts,
            )

    with open_schedules(connection) as (cluster, store):
        policy.append(ClusterPolicy.read(cluster.zk, cluster.layout, connection.config))
        policy[0].check_notify(str(given.get("notify") or "") or None)
        progress = given.get("progress_timeout")
        if isinstance(progress, int | float) and not isinstance(progress, bool):
            policy[0].check_progress_timeout(float(progress))
        spec, what = update(store, validate_name(name), spec_change, run_change, by=who())
    if what is None:
        click.echo(f"schedule {name}: nothing changed")
        return
    click.echo(f"schedule {name} updated: {what}")
    note = interval_note(spec, when["every"], aligned=when["start_at"] is None)
    from zkstore.schedules.schedule_view import next_window

    upcoming = next_window(spec, datetime.now(UTC))
    if note is not None:
        click.echo(note, err=True)
    if upcoming is not None:
        click.echo(f"next window: {upcoming}", err=True)


def _history_row(entry: dict[str, Any]) -> dict[str, Any]:
    window = entry["window"]
    if entry.get("count", 1) > 1:
        window = f"{window} .. {entry.get('through')} ({entry['count']:,} windows)"
    return {**entry, "window": window}


def _set_paused(name: str, connection: Connection, paused: bool) -> None:
    from zkstore.schedules import schedule_service

    with open_schedules(connection) as (_, store):
        spec = schedule_service.set_paused(store, name, paused)
    click.echo(f"schedule {spec.name} {'paused' if paused else 'resumed'}")


@schedules.command("pause")
@click.argument("name")
@connection_options
def pause_schedule(name: str, connection: Connection) -> None:
    """Stop firing: windows until ``resume`` are recorded skipped (paused), never caught up."""
    _set_paused(name, connection, True)


@schedules.command("resume")
@click.argument("name")
@connection_options
def resume_schedule(name: str, connection: Connection) -> None:
    """Fire again from the next window on."""
    _set_paused(name, connection, False)


@schedules.command("delete")
@click.argument("name")
@connection_options
@click.option("--yes", is_flag=True, help="really delete it")
@click.option("--dry-run", is_flag=True, help="say what would be deleted, delete nothing")
def delete_schedule(name: str, connection: Connection, yes: bool, dry_run: bool) -> None:
    """Delete the schedule and its definition; its runs (current or finished) are left alone."""
    from zkstore.schedules import schedule_service

    with open_schedules(connection) as (_, store):
        store.spec(name)  # HandleNotFound (exit 4) before anything else
        if dry_run:
            click.echo(f"would delete schedule {name} (its runs are left alone)")
            return
        if not yes:
            raise UsageFailure(f"deleting schedule {name} needs --yes")
        schedule_service.delete(store, name)
    click.echo(f"schedule {name} deleted")
