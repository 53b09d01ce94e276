"""Job commands of the store: ``zkstore jobs list|show|cancel`` and ``checkpoints list``.

They read handles, records and summaries only: no payload is ever read or unpickled.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from zkstore.cli.artifacts import (
    artifact_lines,
    artifact_root_option,
    describe_artifacts,
    with_roots,
)
from zkstore.cli.base import Connection, UsageFailure, cli, connection_options
from zkstore.cli.output import duration, emit, format_option
from zkstore.cluster import Cluster, triage
from zkstore.errors import CorruptRecord, JobNotFound
from zkstore.jobs.resources import COUNTS, ResourceReports
from zkstore.jobs.snapshot import JobSnapshot, read_listing, read_snapshots
from zkstore.layout import validate_job_id
from zkstore.strict import parse_time

JOB_JSON_HELP = """\b
JSON: a list of objects with job_id, name, state, kind, entry, files,
attempt, max_attempts, submitted, driver {host, pid, attempt, started} or null,
spark {app_id, ui, master, attempt} or null (the running attempt's application),
log (where the current or last attempt's log is), error (the job's error:
of its result, of its last failed attempt, or why it is quarantined),
daemon (the daemon the current attempt is placed on), waiting (why a job that does not
run waits), last_error, failures, lost, max_lost_attempts, next_attempt_at,
attempt_outcome {attempt, outcome, error} or null (an attempt that ended, not yet
acted on), cancel {requested, by, reason}
or null, result {outcome, state, attempts, finished, error} or null,
quarantine {reason, since} or null, record_errors."""


def age(timestamp: str | None) -> str | None:
    """``3m12s``-style age of a zkstore timestamp."""
    if not timestamp:
        return None
    return duration((datetime.now(UTC) - parse_time(timestamp)).total_seconds())


def headline(error: str | None) -> str | None:
    """The one line that says what went wrong: a traceback's last line, else the first line."""
    if not error:
        return None
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    if not lines:
        return None
    return lines[-1] if lines[0].startswith("Traceback") else lines[0]


def _error(job: JobSnapshot) -> str | None:
    """The job's error as a user wants it: its result's, else its last failed attempt's (an
    attempt that just ended, or the one the leader recorded), else why it is quarantined."""
    if job.result is not None:
        return job.result.error if job.result.outcome != "SUCCEEDED" else None
    ended = job.attempt_outcome
    if ended is not None and ended.error:
        return ended.error
    if job.status is not None and job.status.last_error:
        return job.status.last_error
    return job.quarantine.reason if job.quarantine is not None else None


def describe(job: JobSnapshot) -> dict[str, Any]:
    """One job as a JSON-able dict (the documented shape of ``jobs list --format json``)."""
    status, running, spark, ended = job.status, job.running, job.spark, job.attempt_outcome
    cancel = (
        {"requested": job.cancel.requested, "by": job.cancel.by, "reason": job.cancel.reason}
        if job.cancel is not None
        else (job.result.cancel if job.result is not None else None)
    )
    return {
        "job_id": job.job_id,
        "name": job.name,
        "state": job.state,
        "kind": job.summary_text("kind"),
        "entry": job.summary_text("entry"),
        "files": job.summary_text("files"),
        "attempt": job.attempt,
        "max_attempts": job.summary_int("max_attempts"),
        "submitted": job.summary_time("submitted"),
        "driver": None
        if running is None
        else {
            "host": running.host,
            "pid": running.pid,
            "attempt": running.attempt,
            "started": running.started,
        },
        "spark": None
        if spark is None or running is None or spark.attempt != running.attempt
        else {
            "app_id": spark.app_id,
            "ui": spark.ui,
            "master": spark.master,
            "attempt": spark.attempt,
        },
        "log": job.log,
        "error": _error(job),
        "daemon": status.member if status is not None else None,
        "waiting": status.reason if status is not None else None,
        "failures": status.failures if status is not None else None,
        "lost": status.lost if status is not None else None,
        "max_lost_attempts": job.summary_int("max_lost"),
        "last_error": status.last_error if status is not None else None,
        "next_attempt_at": status.not_before if status is not None else None,
        "attempt_outcome": None
        if ended is None
        else {"attempt": ended.attempt, "outcome": ended.outcome, "error": ended.error},
        "cancel_requested": job.cancel.requested if job.cancel is not None else None,
        "cancel": cancel,
        "result": None
        if job.result is None
        else {
            "outcome": job.result.outcome,
            "state": job.result.state,
            "attempts": job.result.attempts,
            "finished": job.result.finished,
            "error": job.result.error,
        },
        "quarantine": None
        if job.quarantine is None
        else {"reason": job.quarantine.reason, "since": job.quarantine.since},
        "record_errors": job.errors or None,
    }


def job_details(cluster: Cluster, job_id: str) -> dict[str, Any]:
    """Everything ``jobs show --format json`` prints (the HTTP API serves the same):
    :func:`describe` plus the job's artifacts, kept outputs, checkpoints, control values and
    resource counts (artifact sizes: under the cluster's artifact roots only). Raises
    :class:`JobNotFound` for a job without any trace."""
    snapshot = find_job(cluster, job_id)
    item = describe(snapshot)
    item["artifacts"] = describe_artifacts(cluster, job_id, item)
    item["outputs"] = snapshot.result.outputs if snapshot.result is not None else None
    item["checkpoints"] = [
        {"id": cid, "created": h.created, "size": h.size, "uri": h.uri}
        for cid, h in cluster.checkpoints(job_id).all()
    ]
    try:
        item["control"], _ = cluster.state.control(job_id)
    except CorruptRecord as exc:
        item["control"] = None
        item["record_errors"] = {**(item["record_errors"] or {}), "control": str(exc)}
    item["resources"] = resource_counts(cluster, job_id, item)
    return item


def _row(item: dict[str, Any]) -> dict[str, Any]:
    driver = item["driver"]
    return {
        "job": item["job_id"],
        "name": item["name"],
        "state": item["state"],
        "attempt": item["attempt"],
        "max": item["max_attempts"],
        "age": age(item["submitted"]),
        "daemon": item["daemon"],
        "driver": f"{driver['host']}:{driver['pid']}" if driver else None,
        "error": headline(item["error"]) or item["waiting"],
    }


def open_cluster(connection: Connection) -> Cluster:
    return Cluster.open(connection.config)


def find_job(cluster: Cluster, job_id: str) -> JobSnapshot:
    """The job's snapshot; :class:`JobNotFound` (exit 4) if the store has no trace of it."""
    snapshot = read_snapshots(cluster.zk, cluster.layout, [validate_job_id(job_id)]).get(job_id)
    if snapshot is None:
        raise JobNotFound(f"no job {job_id!r} in this cluster")
    return snapshot


@cli.group()
def jobs() -> None:
    """List, inspect and cancel jobs (reads handles and records, never payloads)."""


@jobs.command("list")
@connection_options
@format_option
@click.option("--all", "show_all", is_flag=True, help="include finished (CLEAN) jobs")
def list_jobs(connection: Connection, fmt: str, show_all: bool) -> None:
    """List the jobs of the cluster with their state.

    States: SUBMITTED, PENDING, STARTING, RUNNING, PAUSED (blocked at a pause point by
    zkstore control pause), RESTARTING (waiting for the next attempt),
    CLEANING (finished, cleanup in progress), QUARANTINED, and the outcomes SUCCEEDED, FAILED,
    CANCELLED (shown with --all).
    """
    with open_cluster(connection) as cluster:
        listing = read_listing(cluster.zk, cluster.layout, results=show_all)
        snapshots = read_snapshots(
            cluster.zk, cluster.layout, listing.job_ids(), listing=listing
        ).values()
    items = [
        describe(s) for s in snapshots if show_all or s.result is None or s.result.state != "CLEAN"
    ]
    emit(
        items,
        fmt,
        columns=["job", "name", "state", "attempt", "max", "age", "daemon", "driver", "error"],
        rows=[_row(i) for i in items],
        empty="no jobs",
    )


list_jobs.help = (list_jobs.help or "") + "\n\n" + JOB_JSON_HELP


@jobs.command("show")
@click.argument("job_id")
@connection_options
@format_option
@artifact_root_option
def show_job(
    job_id: str, connection: Connection, fmt: str, artifact_roots: tuple[str, ...]
) -> None:
    """Everything the store says about one job, with its checkpoints.

    JSON: the object of ``jobs list`` plus checkpoints, control, and resources {attempt,
    updated, final, counts {NAME: {opens, closes, failed_opens, uses}}} or null: the counts of
    the job's executor-side resources (ctx.resource) as the driver of that attempt last saw them;
    artifacts [{name, scope, attempt, state, keep, uri, registered, finished, size}] (size in
    bytes, null when unknown: only asked under the storage root and --artifact-root URLs), and
    outputs {NAME: URI} or null: what a SUCCEEDED job kept.
    """
    with Cluster.open(with_roots(connection.config, artifact_roots)) as cluster:
        item = job_details(cluster, job_id)
    if fmt == "json":
        emit(item, fmt)
        return
    always = {"job_id", "name", "state", "kind", "entry", "submitted", "attempt", "max_attempts"}
    lines = {**_show_lines(item), **resource_lines(item["resources"]), **artifact_lines(item)}
    emit({k: v for k, v in lines.items() if k in always or v is not None}, fmt)
    if item["error"]:
        click.echo("error:")
        for line in item["error"].splitlines():
            click.echo(f"  {line}")


def _show_lines(item: dict[str, Any]) -> dict[str, Any]:
    """``jobs show`` for people: one line per field (the error follows as a block); fields
    that do not apply now are left out, except the ones that say what the job is."""
    driver, spark, cancel = item["driver"], item["spark"], item["cancel"]
    result, quarantine, ended = item["result"], item["quarantine"], item["attempt_outcome"]
    return {
        "job_id": item["job_id"],
        "name": item["name"],
        "state": item["state"],
        "kind": item["kind"],
        "entry": item["entry"],
        "files": item["files"],
        "submitted": item["submitted"],
        "attempt": item["attempt"],
        "max_attempts": item["max_attempts"],
        "failures": item["failures"],
        "driver": None
        if driver is None
        else "{host} pid {pid}, attempt {attempt}, since {started}".format(**driver),
        "spark": None
        if spark is None
        else f"{spark['app_id']} on {spark['master']}, UI {spark['ui'] or 'off'}",
        "log": item["log"],
        "ended": None
        if ended is None
        else f"attempt {ended['attempt']} {ended['outcome']}, the leader has not acted on it yet",
        "next_attempt_at": item["next_attempt_at"],
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


def resource_counts(cluster: Cluster, job_id: str, item: dict[str, Any]) -> dict[str, Any] | None:
    """The driver's last resource report: {attempt, updated, final, counts {name: {...}}}."""
    try:
        report = ResourceReports(cluster.zk, cluster.layout, job_id).read()
    except CorruptRecord as exc:
        item["record_errors"] = {**(item["record_errors"] or {}), "resources": str(exc)}
        return None
    if report is None:
        return None
    return {
        "attempt": report.attempt,
        "updated": report.updated,
        "final": report.final,
        "counts": report.resources,
    }


def resource_lines(resources: dict[str, Any] | None) -> dict[str, str]:
    """One table line per resource: ``resource db: 2 opens, 2 closes, ... (attempt 1)``."""
    if not resources:
        return {}
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
    with open_cluster(connection) as cluster:
        quarantined = find_job(cluster, job_id).quarantined
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
        click.echo(f"cancel of {job_id} requested at {request.requested}")


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
    with open_cluster(connection) as cluster:
        done = triage.forget(cluster, job_id, dry_run=dry_run)
    click.echo(done.detail)


@cli.group()
def checkpoints() -> None:
    """Inspect checkpoints."""


@checkpoints.command("list")
@click.argument("job_id")
@connection_options
@format_option
def list_checkpoints(job_id: str, connection: Connection, fmt: str) -> None:
    """List a job's checkpoints, oldest first (from handles; metadata is not read).

    JSON: a list of {id, created, size, uri, version}. Exits 4 if there is no such job.
    """
    with open_cluster(connection) as cluster:
        find_job(cluster, job_id)
        found = cluster.checkpoints(job_id).all()
    items: list[dict[str, Any]] = [
        {"id": cid, "created": h.created, "size": h.size, "uri": h.uri, "version": h.version}
        for cid, h in found
    ]
    rows = [{**i, "age": age(h.created)} for i, (_, h) in zip(items, found, strict=True)]
    emit(
        items,
        fmt,
        columns=["id", "age", "size", "uri"],
        rows=rows,
        empty=f"no checkpoints for {job_id}",
    )
