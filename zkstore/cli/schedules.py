"""Schedule commands: ``zkstore schedules list|show|pause|resume|delete`` (``create`` is the
runtime's: it builds a job definition as ``submit`` does, :mod:`recovery.cli.schedules`).

They read and write the schedule's records only (:mod:`zkstore.schedules.store`); the leader
fires the windows. ``show`` lists the recent windows: fired (the run), skipped (why) or missed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click

from zkstore.cli.base import Connection, UsageFailure, cli, connection_options
from zkstore.cli.jobs import open_cluster
from zkstore.cli.output import emit, format_option
from zkstore.cluster import Cluster
from zkstore.errors import HandleNotFound
from zkstore.schedules import view
from zkstore.schedules.store import ScheduleStore

LIST_JSON_HELP = """\b
JSON: a list of {name, when, cron, every, timezone, concurrency, catchup,
start_at, end_at, after_schedule, paused, next, last, last_run, last_state,
fired, skipped, missed, created, error}."""


@contextlib.contextmanager
def open_schedules(connection: Connection) -> Iterator[tuple[Cluster, ScheduleStore]]:
    with open_cluster(connection) as cluster:
        yield cluster, ScheduleStore.for_config(connection.config, cluster.zk)


@cli.group()
def schedules() -> None:
    """Jobs run at every window of a cron expression or an interval, each window once."""


@schedules.command("list", epilog=LIST_JSON_HELP)
@connection_options
@format_option
def list_schedules(connection: Connection, fmt: str) -> None:
    """List the schedules: when each fires next, its last run and that run's state."""
    with open_schedules(connection) as (cluster, store):
        rows = view.listing(store, cluster.layout)
    emit(rows, fmt, columns=view.COLUMNS, empty="no schedules")


@schedules.command("show")
@click.argument("name")
@connection_options
@format_option
def show_schedule(name: str, connection: Connection, fmt: str) -> None:
    """The schedule, its next window and its recent windows (run, skipped and why, missed).
    Exits 1 if its records cannot be read (``error`` says why)."""
    with open_schedules(connection) as (cluster, store):
        found = view.showing(store, cluster.layout, name)
    if fmt == "json":
        emit(found, fmt)
    if found["error"]:
        click.echo(f"zkstore: schedule {name} cannot be read: {found['error']}", err=True)
        raise click.exceptions.Exit(1)
    if fmt == "json":
        return
    head = {k: v for k, v in found.items() if k not in ("history", "job", "error")}
    if head.get("behind") is not None:
        head["behind"] = f"{head['behind']:,} windows behind"
    emit(head, fmt)
    click.echo("")
    emit(
        [_history_row(entry) for entry in found["history"]],
        fmt,
        columns=("window", "outcome", "job", "reason"),
        empty="no window decided yet",
    )


def _history_row(entry: dict[str, Any]) -> dict[str, Any]:
    window = entry["window"]
    if entry.get("count", 1) > 1:
        window = f"{window} .. {entry.get('through')} ({entry['count']:,} windows)"
    return {**entry, "window": window}


def _set_paused(name: str, connection: Connection, paused: bool) -> None:
    with open_schedules(connection) as (_, store):
        spec = store.set_paused(name, paused)
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
    with open_schedules(connection) as (_, store):
        store.spec(name)  # HandleNotFound (exit 4) before anything else
        if dry_run:
            click.echo(f"would delete schedule {name} (its runs are left alone)")
            return
        if not yes:
            raise UsageFailure(f"deleting schedule {name} needs --yes")
        if not store.delete(name):
            raise HandleNotFound(f"no schedule {name!r}")
    click.echo(f"schedule {name} deleted")
