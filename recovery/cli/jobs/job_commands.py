"""``zkstore jobs list | show | cancel | forget`` and the ``jobs`` group the other verbs join.

They read handles, records and summaries only: no payload is ever read or unpickled.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from recovery.cli.artifact_options import (
    artifact_lines,
    artifact_root_option,
    with_roots,
)
from recovery.cli.base import Connection, UsageFailure, cli, connection_options
from recovery.cli.output import emit, format_option
from zkstore.records.strict import time_text

if TYPE_CHECKING:
    from datetime import datetime

    from zkstore.cluster import Cluster
    from zkstore.layout import Layout
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "JOB_JSON_HELP",
    "WAITING_STATES",
    "attempt_lines",
    "cancel_job",
    "forget_job",
    "jobs",
    "list_jobs",
    "open_cluster",
    "open_zookeeper",
    "resource_lines",
    "run_option_lines",
    "show_job",
]

# The store is imported inside each command (issue 27): loading this module, as a usage error
# in any ``jobs`` command does, costs click and the output helpers only.

JOB_JSON_HELP = """\b
JSON: a list of objects with job_id, name, state, kind, entry, files,
args (the arguments, as a shell or Python would write them), conf (the Spark
properties, secrets redacted), modules (what was shipped automatically from
the job's directory), require (the labels a daemon must have),
attempt, max_attempts, submitted, driver {host, pid, attempt, started} or null,
spark {app_id, ui, master, attempt, jvm} or null (the running attempt's application;
jvm: its driver JVM, warm or cold, and why),
log (where the current or last attempt's log is), error (the job's error:
of its result, of its last failed attempt, or why it is quarantined),
daemon (the daemon the current attempt is placed on), waiting (why a job that does not
run waits), last_error, failures, lost, max_lost_attempts, next_attempt_at,
attempt_outcome {attempt, outcome, error} or null (an attempt that ended, not yet
acted on), cancel {requested, by, reason}
or null, result {outcome, state, attempts, finished, error} or null,
quarantine {reason, since} or null, lifecycle {timeout, start_timeout,
progress_timeout, retry_*, notify (redacted), last_ended} or null (what the job
was submitted with, in seconds), stop {requested, by, reason, checkpoint,
checkpoint_timeout_s} or null, ending {attempt, reason, requested, grace_s,
detail} or null (the attempt the leader is ending), record_errors, definition (the
SHA-256 of the job's current definition), schedule {name, window} or null (the
schedule and window a scheduled run was fired for)."""


def _row(item: dict[str, Any], submitted: datetime | None) -> dict[str, Any]:
    from zkstore.service.job_view import age, headline

    driver = item["driver"]
    return {
        "job": item["job_id"],
        "name": item["name"],
        "state": item["state"],
        "attempt": item["attempt"],
        "max": item["max_attempts"],
        "age": age(submitted),
        "daemon": item["daemon"],
        "driver": f"{driver['host']}:{driver['pid']}" if driver else None,
        "error": headline(item["error"]) or item["waiting"],
    }


def open_cluster(connection: Connection) -> Cluster:
    from zkstore.cluster import Cluster

    return Cluster.open(connection.config)


@contextmanager
def open_zookeeper(connection: Connection) -> Iterator[tuple[ZooKeeper, Layout]]:
    """A ZooKeeper session and the cluster's layout, for commands that read records only: no
    storage is built (fsspec is not imported) and no base path is created."""
    from zkstore.layout import Layout
    from zkstore.zookeeper.zk import ZooKeeper

    config = connection.config
    zk = ZooKeeper.from_config(config).start()
    try:
        yield zk, Layout(config.base_path)
    finally:
        zk.stop()


@cli.group()
def jobs() -> None:
    """List, inspect, follow and cancel jobs (reads handles and records, never payloads)."""


@jobs.command("list")
@connection_options
@format_option
@click.option("--all", "show_all", is_flag=True, help="include finished (CLEAN) jobs")
def list_jobs(connection: Connection, fmt: str, show_all: bool) -> None:
    """List the jobs of the cluster with their state.

    States: SUBMITTED, PENDING, STARTING, RUNNING, PAUSED (blocked at a pause point by
    zkstore control pause), ENDED (its attempt's outcome recorded, not yet acted on by the
    leader), RESTARTING (waiting for the next attempt), CLEANING (finished, cleanup in
    progress), QUARANTINED, STOPPING and STOPPED (zkstore jobs stop), NEEDS_UPGRADE (a
    record written by a newer zkstore: left alone until a newer daemon acts on it), and the
    outcomes SUCCEEDED, FAILED, CANCELLED (shown with --all).
    """
    from zkstore.jobs.snapshot import read_listing, read_snapshots
    from zkstore.service.job_view import describe

    with open_zookeeper(connection) as (zk, layout):
        listing = read_listing(zk, layout, results=show_all)
        snapshots = read_snapshots(zk, layout, listing.job_ids(), listing=listing).values()
        results = None if show_all or fmt == "json" else zk.exists(layout.results)
    listed = [s for s in snapshots if show_all or s.result is None or s.result.state != "CLEAN"]
    items = [describe(s) for s in listed]
    emit(
        items,
        fmt,
        columns=["job", "name", "state", "attempt", "max", "age", "daemon", "driver", "error"],
        rows=[_row(i, s.submitted_at) for i, s in zip(items, listed, strict=True)],
        empty="no jobs",
    )
    if results is not None:
        # A finished job has only its result left: the count of results is one stat away, the
        # results listed (the parent that grows with every job) are not needed to count them.
        shown = sum(1 for s in snapshots if s.result is not None and s.result.state != "CLEAN")
        hidden = results.numChildren - shown
        if hidden > 0:
            click.echo(f"{hidden} finished job(s) not shown: zkstore jobs list --all shows them")


list_jobs.help = inspect.cleandoc(list_jobs.help or "") + "\n\n" + JOB_JSON_HELP


@jobs.command("show")
@click.argument("job_id")
@connection_options
@format_option
@artifact_root_option
def show_job(
    job_id: str, connection: Connection, fmt: str, artifact_roots: tuple[str, ...]
) -> None:
    """Everything the store says about one job, with its checkpoints.

    JSON: the object of ``jobs list`` plus attempts [{attempt, daemon, placed, outcome,
    ended, note, definition, target, jvm, new_definition}] (each attempt as the leader told it:
    the SHA-256 of the definition it was placed with and what that runs, and whether that
    changed since the attempt before; jvm: the driver JVM the attempt had, as its driver
    reported it when it ended: "warm: warm driver ID (pid ...)", "cold: WHY" or "none: ...",
    absent for an attempt lost before it reported), checkpoints, control, and resources {attempt,
    updated, final, counts {NAME: {opens, closes, failed_opens, uses}}} or null: the counts of
    the job's executor-side resources (ctx.resource) as the driver of that attempt last saw them;
    artifacts [{name, scope, attempt, state, keep, uri, registered, finished, size}] (size in
    bytes, null when unknown: only asked under the storage root and --artifact-root URLs), and
    outputs {NAME: URI} or null: what a SUCCEEDED job kept; conditions [{type, reason,
    message, since}]: what the leader does not do for the job and why (a notification it
    dropped, no daemon able to run it), cleared when it no longer holds.
    """
    from zkstore.cluster import Cluster
    from zkstore.service.job_view import job_details

    with Cluster.open(with_roots(connection.config, artifact_roots)) as cluster:
        item = job_details(cluster, job_id)
    if fmt == "json":
        emit(item, fmt)
        return
    always = {"job_id", "name", "state", "kind", "entry", "submitted", "attempt", "max_attempts"}
    lines = {**_show_lines(item), **resource_lines(item["resources"]), **artifact_lines(item)}
    emit({k: v for k, v in lines.items() if k in always or v is not None}, fmt)
    if item["attempts"]:
        click.echo("attempts:")
        for line in attempt_lines(item["attempts"]):
            click.echo(f"  {line}")
    if item["conditions"]:
        click.echo("conditions (what the leader does not do for it):")
        for condition in item["conditions"]:
            click.echo(
                f"  {condition['type']} ({condition['reason']}) since {condition['since']}: "
                f"{condition['message']}"
            )
    if item["error"]:
        click.echo("error:")
        for line in item["error"].splitlines():
            click.echo(f"  {line}")


def attempt_lines(attempts: list[dict[str, Any]]) -> list[str]:
    """One line per attempt: ``2 SUCCEEDED on d2, placed 2026-...Z, ended 2026-...Z,
    definition 8e1d0c2a91b4 from /home/ann/etl/v2/etl.py:main, new since the attempt before``
    (an attempt placed before the leader recorded where its code came from names what it runs:
    ``(etl.py:main)``), the driver JVM it had (``; driver JVM cold: ...``), then its note."""
    lines = []
    for entry in attempts:
        line = f"{entry['attempt']} {entry['outcome']} on {entry['daemon']}"
        line += f", placed {entry['placed']}"
        if entry.get("ended"):
            line += f", ended {entry['ended']}"
        if entry.get("definition"):
            line += f", definition {entry['definition'][:12]}"
            target = entry.get("target")
            if target:
                line += f" from {target}" if target.startswith(("/", "...")) else f" ({target})"
            if entry["new_definition"]:
                line += ", new since the attempt before"
        if entry.get("jvm"):
            line += f"; driver JVM {entry['jvm']}"
        if entry.get("note"):
            line += f": {entry['note']}"
        lines.append(line)
    return lines


#: States in which a job waits for something (its ``waiting`` reason is shown).
WAITING_STATES = frozenset({"SUBMITTED", "PENDING", "RESTARTING", "STARTING"})


def _show_lines(item: dict[str, Any]) -> dict[str, Any]:
    """``jobs show`` for people: one line per field (the error follows as a block); fields
    that do not apply now are left out, except the ones that say what the job is."""
    from zkstore.service.job_view import attempts_text

    driver, spark, cancel = item["driver"], item["spark"], item["cancel"]
    result, quarantine, ended = item["result"], item["quarantine"], item["attempt_outcome"]
    waiting = item["waiting"] if item["state"] in WAITING_STATES else None
    return {
        "job_id": item["job_id"],
        "name": item["name"],
        "state": item["state"],
        "kind": item["kind"],
        "entry": item["entry"],
        "arguments": item["args"],
        "conf": item["conf"],
        "files": item["files"],
        "modules": None
        if item["modules"] is None
        else f"{item['modules']} (shipped automatically from the job's directory)",
        "require": item["require"],
        "submitted": item["submitted"],
        "schedule": None
        if item["schedule"] is None
        else f"run of {item['schedule']['name']} for its window {item['schedule']['window']}",
        "definition": item["definition"],
        "waiting": waiting,
        "attempt": attempts_text(item),
        "max_attempts": item["max_attempts"],
        "max_lost_attempts": item["max_lost_attempts"],
        "daemon": item["daemon"],
        "driver": None
        if driver is None
        else "{host} pid {pid}, attempt {attempt}, since {started}".format(**driver),
        "spark": None
        if spark is None
        else f"{spark['app_id']} on {spark['master']}, UI {spark['ui'] or 'off'}"
        + (f"; driver JVM {spark['jvm']}" if spark.get("jvm") else ""),
        "log": item["log"],
        "ended": None
        if ended is None
        else f"attempt {ended['attempt']} {ended['outcome']}, the leader has not acted on it yet",
        "next_attempt_at": item["next_attempt_at"],
        **_lifecycle_lines(item),
        "cancel": None
        if cancel is None
        else f"requested {cancel['requested']} by {cancel.get('by') or '?'}"
        + (f": {cancel['reason']}" if cancel.get("reason") else ""),
        "result": None
        if result is None
        else "{outcome} ({state}) after {attempts} attempt(s) at {finished}".format(**result),
        "quarantine": None
        if quarantine is None
        else f"{quarantine['reason']} (since {quarantine['since']})",
        "checkpoints": ", ".join(str(c["id"]) for c in item["checkpoints"]) or None,
        "control": json.dumps(item["control"]) if item["control"] else None,
    }


def run_option_lines(lifecycle: dict[str, Any]) -> dict[str, Any]:
    """The lines of a job's (or a schedule's runs') options of how it runs: ``limits``,
    ``retry`` and ``notify`` (redacted already)."""
    from zkstore.jobs.shown import LIMIT_KEYS

    limits = [
        f"--{key.replace('_', '-')} {lifecycle[key]:g}s" for key in LIMIT_KEYS if key in lifecycle
    ]
    retry = [
        f"--{key.replace('_', '-')} {lifecycle[key]:g}{'' if key == 'retry_jitter' else 's'}"
        for key in sorted(lifecycle)
        if "retry" in key
    ]
    return {
        "limits": ", ".join(limits) or None,
        "retry": ", ".join(retry) or None,
        "notify": lifecycle.get("notify"),
    }


def _lifecycle_lines(item: dict[str, Any]) -> dict[str, Any]:
    """The lifecycle's lines of ``jobs show``: the limits and retry options, the notify URL
    (redacted), a stop under way, an attempt being ended."""
    lifecycle, stop, ending = item.get("lifecycle") or {}, item.get("stop"), item.get("ending")
    return {
        **run_option_lines(lifecycle),
        "last_ended": lifecycle.get("last_ended"),
        "stop": None
        if stop is None
        else f"requested {stop['requested']} by {stop.get('by') or '?'}"
        + (
            f", after a checkpoint (waiting up to {stop['checkpoint_timeout_s']:g} s)"
            if stop["checkpoint"]
            else ""
        ),
        "ending": None
        if ending is None
        else f"attempt {ending['attempt']} {ending['reason']}: {ending.get('detail') or ''} "
        f"(SIGKILL after {ending['grace_s']:g} s)",
    }


def resource_lines(resources: dict[str, Any] | None) -> dict[str, str]:
    """One table line per resource: ``resource db: 2 opens, 2 closes, ... (attempt 1)``."""
    if not resources:
        return {}
    from zkstore.jobs.resources import COUNTS

    suffix = f"(attempt {resources['attempt']}{', final' if resources['final'] else ''})"
    return {
        f"resource {name}": ", ".join(f"{counts[c]} {c.replace('_', ' ')}" for c in COUNTS)
        + f" {suffix}"
        for name, counts in sorted(resources["counts"].items())
    }


@jobs.command("cancel")
@click.argument("job_id")
@click.option("--reason", help="why, recorded with the request")
@connection_options
def cancel_job(job_id: str, reason: str | None, connection: Connection) -> None:
    """Ask a job to stop: its driver stops, its result is recorded as CANCELLED.

    A quarantined job (it does not run) ends at once as CANCELLED: its result is recorded and
    its data removed, as `quarantine purge` does. Exits 4 if there is no such job, 5 if it
    already finished.
    """
    from zkstore.cluster import triage
    from zkstore.jobs.snapshot import read_snapshot

    with open_cluster(connection) as cluster:
        quarantined = read_snapshot(cluster.zk, cluster.layout, job_id).quarantined
        request = triage.cancel(cluster, job_id, reason=reason)
        driver = quarantined and cluster.zk.exists(cluster.layout.running(job_id)) is not None
    if driver:
        click.echo(
            f"{job_id} was quarantined: ended as CANCELLED; its driver, still running, is asked "
            "to stop, and its data is removed once it has"
        )
    elif quarantined:
        click.echo(f"{job_id} was quarantined: ended as CANCELLED, its data removed")
    else:
        click.echo(f"cancel of {job_id} requested at {time_text(request.requested)}")


@jobs.command("forget")
@click.argument("job_id")
@click.option("--dry-run", is_flag=True, help="show what would be done; change nothing")
@click.option("--yes", is_flag=True, help="really do it")
@connection_options
def forget_job(job_id: str, dry_run: bool, yes: bool, connection: Connection) -> None:
    """Delete a finished job's result, so that its id may be submitted again (the rerun of a
    failed daily job, say). Needs --yes or --dry-run.

    A finished id is refused at submission while its result is kept (the daemon's
    --keep-results); this ends that early. Exits 4 if there is no such job, 5 while the job is
    current, quarantined (release or purge it) or still being cleaned up.
    """
    if dry_run == yes:
        raise UsageFailure("say --dry-run to look, or --yes to forget the job")
    from zkstore.cluster import triage

    with open_cluster(connection) as cluster:
        done = triage.forget(cluster, job_id, dry_run=dry_run)
    click.echo(done.detail)
