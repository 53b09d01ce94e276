"""``zkstore control``: change a running job without stopping it, and see what it made of it.

The desired values are versioned (a compare-and-set with ``--expect-version``); the job's driver
acknowledges each version it sees, key by key (applied, rejected with a reason, needs a
restart), and ``--wait`` waits for that. Every change is recorded in the job's history.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import click

from recovery.cli.base import Connection, cli, connection_options
from recovery.cli.jobs.job_commands import open_cluster
from recovery.cli.output import emit, format_option
from recovery.cli.types import Duration
from zkstore.config import split_pair
from zkstore.errors import ConfigError, ControlRejected
from zkstore.jobs.control import (
    REJECTED,
    ControlAck,
    ControlChange,
    ControlView,
    gaps,
)
from zkstore.jobs.control.control_view import value_text
from zkstore.layout import validate_job_id
from zkstore.records.strict import time_text
from zkstore.service.control_service import ControlService, Done, applied, command

__all__ = [
    "DEFAULT_WAIT",
    "change_options",
    "changes_text",
    "control",
    "control_checkpoint",
    "control_get",
    "control_history",
    "control_log_level",
    "control_pause",
    "control_resume",
    "control_set",
    "parse_control_values",
]

DEFAULT_WAIT = 60.0


@cli.group()
def control() -> None:
    """Change a running job (ctx.config in the job) and see what it applied.

    \b
    get JOB                desired and applied version, each key's state
    set JOB KEY=VALUE...   change values (--expect-version N, --wait)
    pause|resume JOB       block the job at its next checkpoint / let it go on
    log-level JOB LEVEL    the driver's Python logging and Spark's log level
    checkpoint JOB         ask the job for a checkpoint at its next opportunity
    history JOB            who changed what, when
    """


def parse_control_values(pairs: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs into control values: flat keys (dots are just characters), values
    that are JSON scalars when they parse as one (numbers, true, false, null, "quoted"), strings
    otherwise. JSON objects and arrays are refused: control values are flat."""
    values: dict[str, Any] = {}
    for pair in pairs:
        key, raw = split_pair(pair, "control value")
        try:
            value = json.loads(raw, parse_constant=_not_json)
        except ValueError:
            value = raw
        if isinstance(value, dict | list):
            raise ConfigError(
                f"control value {pair!r}: a JSON {'object' if isinstance(value, dict) else 'array'}"
                " is not a scalar; quote it as a string or set one key per value"
            )
        values[key] = value
    return values


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# -- get -----------------------------------------------------------------------------------------


@control.command("get")
@click.argument("job_id")
@connection_options
@format_option
def control_get(job_id: str, connection: Connection, fmt: str) -> None:
    """Show the desired values and what the job applied: the desired version, the version the
    job acknowledged (and by which attempt), and each key's state: applied, pending (not
    acknowledged yet: the live attempt is about to, or the next attempt will), rejected (with
    the job's reason; it runs on with the value it had), needs-restart (the next attempt takes
    it). Also: paused or not, the log level, a checkpoint request and the checkpoint that
    answered it, the keys the job declared.

    \b
    JSON: {job_id, version, values (desired), applied {version, attempt, updated, live,
    values} or null, keys [{key, state, desired, effective, reason}], pending [keys],
    rejected {key: reason}, needs_restart [keys], pause_requested, paused, paused_since,
    log_level, checkpoint_request {token, answered} or null, checkpoint {id,
    control_version} or null, declared {key: {type, restart}} or null, record_errors}.

    Exits 4 if there is no such job.
    """
    with open_cluster(connection) as cluster:
        view = ControlService(cluster).view(job_id)
    if fmt == "json":
        emit(view.as_dict(), fmt)
        return
    emit(_summary_lines(view), fmt)
    rows = [
        {
            "key": k.key,
            "desired": value_text(k.desired) if k.in_desired else None,
            "in effect": value_text(k.effective) if k.in_effect else None,
            "state": k.state + (f": {k.reason}" if k.reason else ""),
        }
        for k in view.keys
    ]
    click.echo()
    emit(rows, fmt, columns=["key", "desired", "in effect", "state"], empty="no control values")
    for record, error in sorted(view.errors.items()):
        click.echo(f"unreadable {record}: {error}")


def _summary_lines(view: ControlView) -> dict[str, Any]:
    found = view.as_dict()
    applied, checkpoint = found["applied"], found["checkpoint"]
    request, declared = found["checkpoint_request"], found["declared"]
    paused = "no"
    if view.paused:
        paused = f"yes, since {found['paused_since']}"
    elif found["pause_requested"]:
        paused = "requested: the job pauses at its next checkpoint or pause point"
    return {
        "job": view.job_id,
        "desired version": view.desired.version,
        "applied version": None
        if applied is None
        else f"{applied['version']} by attempt {applied['attempt']}"
        + (" (live)" if applied["live"] else " (no longer running)")
        + f" at {applied['updated']}",
        "paused": paused,
        "log level": found["log_level"],
        "checkpoint request": None
        if request is None
        else f"{request['token']}: "
        + ("answered (a checkpoint was taken since)" if request["answered"] else "pending"),
        "last checkpoint": None
        if checkpoint is None
        else f"{checkpoint['id']}, taken under control version {checkpoint['control_version']}",
        "declared": None
        if declared is None
        else ", ".join(
            f"{key} ({spec['type']}{', restart' if spec['restart'] else ''})"
            for key, spec in declared.items()
        )
        or "(no keys)",
    }


# -- changes ---------------------------------------------------------------------------------


def change_options(func: Any) -> Any:
    """--expect-version, --wait, --wait-timeout, --format and the connection options."""
    for option in reversed(
        [
            click.option(
                "--expect-version",
                type=click.IntRange(0),
                metavar="N",
                help="change only if the desired values are still at version N (control get "
                "shows it): exit 5 if somebody changed them meanwhile",
            ),
            click.option(
                "--wait", is_flag=True, help="wait until the job has acknowledged the change"
            ),
            click.option(
                "--wait-timeout",
                type=Duration(),
                default=DEFAULT_WAIT,
                metavar="DURATION",
                show_default="60s",
                help="with --wait: stop waiting after this long (exit 7; the change stays)",
            ),
            connection_options,
            format_option,
        ]
    ):
        func = option(func)
    return func


def _change(
    connection: Connection,
    job_id: str,
    updates: dict[str, Any],
    options: dict[str, Any],
    *,
    remove: tuple[str, ...] = (),
    replace: bool = False,
    done: Done = applied,
    waiting_for: str = "acknowledged",
) -> None:
    """Store a change, report it, and with --wait report the job's acknowledgement of it;
    exits 1 (:class:`ControlRejected`) if the job rejected a key of it."""
    validate_job_id(job_id)
    ack = None
    with open_cluster(connection) as cluster:
        change = ControlService(cluster).change(
            job_id,
            updates,
            expect_version=options["expect_version"],
            replace=replace,
            remove=remove,
        )
        for warning in change.warnings:
            click.echo(f"zkstore: warning: {warning}", err=True)
        if options["wait"]:
            ack = cluster.control(job_id).wait(
                done(change),
                timeout=options["wait_timeout"],
                what=f"control version {change.version} not {waiting_for}",
            )
    decisions = ack.decisions() if ack is not None else {}
    mine = {k: decisions[k] for k in change.changes if k in decisions and k in change.values}
    rejected = {k: d.reason for k, d in mine.items() if d.state == REJECTED}
    if options["fmt"] == "json":
        acknowledgement = None
        if ack is not None:
            acknowledgement = {
                "attempt": ack.attempt,
                "applied_version": ack.applied_version,
                "paused": ack.paused,
                "keys": {k: d.as_dict() for k, d in mine.items()},
            }
        emit({**change.as_dict(), "acknowledgement": acknowledgement}, "json")
    else:
        click.echo(_change_line(change))
        if ack is not None:
            click.echo(_ack_line(job_id, ack, mine))
    if rejected:
        reasons = "; ".join(f"{key}: {reason}" for key, reason in sorted(rejected.items()))
        raise ControlRejected(f"job {job_id} rejected {reasons}")


def _change_line(change: ControlChange) -> str:
    if not change.changes:
        return f"{change.job_id}: nothing to change (control version {change.version})"
    was = "" if change.previous is None else f" (was {change.previous})"
    return f"{change.job_id}: control version {change.version}{was}: " + changes_text(
        change.changes
    )


def changes_text(changes: dict[str, dict[str, Any]]) -> str:
    """``rate: 10 -> 20, mode: - -> "fast"`` (``-``: the key was absent)."""
    return ", ".join(
        f"{key}: {value_text(c['old']) if 'old' in c else '-'} -> "
        f"{value_text(c['new']) if 'new' in c else '-'}"
        for key, c in changes.items()
    )


def _ack_line(job_id: str, ack: ControlAck, mine: dict[str, Any]) -> str:
    states = [
        f"{key} {d.state}" + (f" ({d.reason})" if d.reason else "") for key, d in mine.items()
    ]
    paused = ", paused" if ack.paused else ""
    return (
        f"{job_id}: acknowledged by attempt {ack.attempt} (version {ack.applied_version}{paused})"
        + (": " + ", ".join(states) if states else "")
    )


@control.command("set")
@click.argument("job_id")
@click.argument("pairs", nargs=-1, metavar="KEY=VALUE...")
@click.option("--replace", is_flag=True, help="replace the job's values instead of merging")
@click.option("--unset", multiple=True, metavar="KEY", help="remove a key (repeatable)")
@change_options
def control_set(
    job_id: str,
    pairs: tuple[str, ...],
    replace: bool,
    unset: tuple[str, ...],
    connection: Connection,
    **options: Any,
) -> None:
    """Set control values: flat keys, JSON scalar values (rate=10, on=true, off=null, x=a b;
    anything that is not a number, true, false or null is a string).

    Refused before anything is stored (exit 2): a value that is not a scalar, and, once the job
    declared its keys (ctx.declare_config), a key it does not know or a value of the wrong type.
    The change is a compare-and-set: with --expect-version N it is stored only if nobody changed
    the values since version N (exit 5 otherwise); without, it is merged into what is there.
    Each change is recorded in the job's history (control history).

    With --wait, waits until the job has acknowledged the change (a job that is not running
    acknowledges it as its next attempt starts): exit 1 if the job rejected a key of it (the
    reason is printed), 7 when --wait-timeout passes. Exits 4 if there is no such job, 5 if it
    is not current any more.
    """
    if not pairs and not unset:
        raise click.UsageError("give KEY=VALUE pairs or --unset KEY")
    _change(connection, job_id, parse_control_values(pairs), options, remove=unset, replace=replace)


@control.command("pause")
@click.argument("job_id")
@change_options
def control_pause(job_id: str, connection: Connection, **options: Any) -> None:
    """Pause a job: it blocks at its next checkpoint (or ctx.pause_point()), after the
    checkpoint is written, and its state shows PAUSED. It stays paused across a leader failover
    and across a restart of its driver (a new attempt pauses before it starts the job) until
    control resume. jobs cancel still works. With --wait, waits until the job is blocked."""
    _command(connection, job_id, "pause", options)


@control.command("resume")
@click.argument("job_id")
@change_options
def control_resume(job_id: str, connection: Connection, **options: Any) -> None:
    """Let a paused job go on. With --wait, waits until it is no longer blocked."""
    _command(connection, job_id, "resume", options)


@control.command("log-level")
@click.argument("job_id")
@click.argument("level")
@change_options
def control_log_level(job_id: str, level: str, connection: Connection, **options: Any) -> None:
    """Set the log level of the job's driver: its Python logging and Spark's log level at once
    (ALL, TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF; WARNING and CRITICAL are taken too)."""
    _command(connection, job_id, "log-level", options, level=level)


@control.command("checkpoint")
@click.argument("job_id")
@change_options
def control_checkpoint(job_id: str, connection: Connection, **options: Any) -> None:
    """Ask the job for a checkpoint at its next opportunity: ctx.checkpoint_requested is True
    until the job has written one (control get shows the checkpoint that answered)."""
    _command(connection, job_id, "checkpoint", options)


def _command(
    connection: Connection,
    job_id: str,
    name: str,
    options: dict[str, Any],
    *,
    level: str | None = None,
) -> None:
    """A built-in command of :mod:`zkstore.service.control_service`, stored and reported as a
    change."""
    builtin = command(name)
    values = builtin.values(level)
    _change(connection, job_id, values, options, done=builtin.done, waiting_for=builtin.waiting_for)


# -- history ---------------------------------------------------------------------------------


@control.command("history")
@click.argument("job_id")
@click.option("--last", type=click.IntRange(1), metavar="N", help="only the last N changes")
@connection_options
@format_option
def control_history(job_id: str, last: int | None, connection: Connection, fmt: str) -> None:
    """Who changed the job's control values, when, from what to what, at which version: the
    last 100 changes, kept in the job's storage and removed with it.

    \b
    JSON: {entries [{version, previous, by, when, changes {key: {old, new}}}],
    missing_versions [versions with no entry: the writer died before recording it],
    unreadable {uri: why}}. Exits 4 if there is no such job.
    """
    with open_cluster(connection) as cluster:
        service = ControlService(cluster)
        if fmt == "json":
            emit(service.history(job_id, last=last), fmt)
            return
        entries, errors = service.entries(job_id, last=last)
    missing = gaps(entries)
    rows: list[dict[str, Any]] = [
        {
            "version": e.version,
            "when": time_text(e.when),
            "by": e.by,
            "changes": changes_text(e.changes),
        }
        for e in entries
    ]
    rows += [{"version": v, "changes": "(no entry)"} for v in missing]
    rows.sort(key=lambda row: int(row["version"]))
    emit(rows, fmt, columns=["version", "when", "by", "changes"], empty="no changes recorded")
    for uri, error in sorted(errors.items()):
        click.echo(f"unreadable {uri}: {error}")
