"""Job commands of the store: ``zkstore jobs list|show|cancel``, ``checkpoints list``, ``control``.

They read handles, records and summaries only: no payload is ever read or unpickled.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from zkstore.cli.base import Connection, cli, connection_options
from zkstore.cli.output import duration, emit, format_option
from zkstore.cluster import Cluster
from zkstore.config import parse_storage_options
from zkstore.errors import ConfigError, HandleNotFound
from zkstore.jobs.snapshot import JobSnapshot, read_listing, read_snapshots
from zkstore.layout import validate_job_id
from zkstore.strict import parse_time

JOB_JSON_HELP = """\b
JSON: a list of objects with job_id, name, state, kind, entry, attempt,
max_attempts, submitted, driver {host, pid, attempt, started} or null,
last_error, result {outcome, state, attempts, finished, error} or null,
quarantine {reason, since} or null."""


def age(timestamp: str | None) -> str | None:
    """``3m12s``-style age of a zkstore timestamp."""
    if not timestamp:
        return None
    return duration((datetime.now(UTC) - parse_time(timestamp)).total_seconds())


def describe(job: JobSnapshot) -> dict[str, Any]:
    """One job as a JSON-able dict (the documented shape of ``jobs list --format json``)."""
    status = job.status
    return {
        "job_id": job.job_id,
        "name": job.name,
        "state": job.state,
        "kind": job.summary_text("kind"),
        "entry": job.summary_text("entry"),
        "attempt": job.attempt,
        "max_attempts": job.summary_int("max_attempts"),
        "submitted": job.summary_time("submitted"),
        "driver": None
        if job.running is None
        else {
            "host": job.running.host,
            "pid": job.running.pid,
            "attempt": job.running.attempt,
            "started": job.running.started,
        },
        "failures": status.failures if status is not None else None,
        "lost": status.lost if status is not None else None,
        "max_lost_attempts": job.summary_int("max_lost"),
        "last_error": status.last_error if status is not None else None,
        "next_attempt_at": status.not_before if status is not None else None,
        "cancel_requested": job.cancel.requested if job.cancel is not None else None,
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
    :func:`describe` plus the job's checkpoints and control values. Raises
    :class:`HandleNotFound` for a job without any trace."""
    validate_job_id(job_id)
    snapshot = read_snapshots(cluster.zk, cluster.layout, [job_id]).get(job_id)
    if snapshot is None:
        raise HandleNotFound(f"no job {job_id!r} in this cluster")
    item = describe(snapshot)
    item["checkpoints"] = [
        {"id": cid, "created": h.created, "size": h.size, "uri": h.uri}
        for cid, h in cluster.checkpoints(job_id).all()
    ]
    control, _ = cluster.state.control(job_id)
    item["control"] = control
    return item


def _row(item: dict[str, Any]) -> dict[str, Any]:
    driver = item["driver"]
    error = (
        item["last_error"]
        or (item["result"] or {}).get("error")
        or (item["quarantine"] or {}).get("reason")
    )
    return {
        "job": item["job_id"],
        "name": item["name"],
        "state": item["state"],
        "attempt": item["attempt"],
        "max": item["max_attempts"],
        "age": age(item["submitted"]),
        "driver": f"{driver['host']}:{driver['pid']}" if driver else None,
        "error": (error.splitlines()[-1][:60] if error else None),
    }


def open_cluster(connection: Connection) -> Cluster:
    return Cluster.open(connection.config)


@cli.group()
def jobs() -> None:
    """List, inspect and cancel jobs (reads handles and records, never payloads)."""


@jobs.command("list")
@connection_options
@format_option
@click.option("--all", "show_all", is_flag=True, help="include finished (CLEAN) jobs")
def list_jobs(connection: Connection, fmt: str, show_all: bool) -> None:
    """List the jobs of the cluster with their state.

    States: SUBMITTED, PENDING, STARTING, RUNNING, RESTARTING (waiting for the next attempt),
    CLEANING (finished, cleanup in progress), QUARANTINED, and the outcomes SUCCEEDED, FAILED,
    CANCELLED (shown with --all).
    """
    with open_cluster(connection) as cluster:
        listing = read_listing(cluster.zk, cluster.layout)
        snapshots = read_snapshots(
            cluster.zk, cluster.layout, listing.job_ids(), listing=listing
        ).values()
    items = [
        describe(s) for s in snapshots if show_all or s.result is None or s.result.state != "CLEAN"
    ]
    emit(
        items,
        fmt,
        columns=["job", "name", "state", "attempt", "max", "age", "driver", "error"],
        rows=[_row(i) for i in items],
        empty="no jobs",
    )


list_jobs.help = (list_jobs.help or "") + "\n\n" + JOB_JSON_HELP


@jobs.command("show")
@click.argument("job_id")
@connection_options
@format_option
def show_job(job_id: str, connection: Connection, fmt: str) -> None:
    """Everything the store says about one job, with its checkpoints."""
    with open_cluster(connection) as cluster:
        item = job_details(cluster, job_id)
    control = item["control"]
    if fmt == "json":
        emit(item, fmt)
        return
    flat = {
        k: v for k, v in item.items() if k not in {"driver", "result", "quarantine", "checkpoints"}
    }
    if item["driver"]:
        flat["driver"] = "{host} pid {pid}, attempt {attempt}, since {started}".format(
            **item["driver"]
        )
    if item["result"]:
        flat["result"] = "{outcome} ({state}) after {attempts} attempt(s) at {finished}".format(
            **item["result"]
        )
    if item["quarantine"]:
        flat["quarantine"] = f"{item['quarantine']['reason']} (since {item['quarantine']['since']})"
    flat["checkpoints"] = ", ".join(str(c["id"]) for c in item["checkpoints"]) or None
    flat["control"] = json.dumps(control) if control else None
    emit(flat, fmt)


@jobs.command("cancel")
@click.argument("job_id")
@click.option("--reason", help="why, recorded with the request")
@connection_options
def cancel_job(job_id: str, reason: str | None, connection: Connection) -> None:
    """Ask a job to stop: its driver stops, its result is recorded as CANCELLED."""
    validate_job_id(job_id)
    with open_cluster(connection) as cluster:
        snapshot = read_snapshots(cluster.zk, cluster.layout, [job_id]).get(job_id)
        if snapshot is None or not (snapshot.in_current_jobs or snapshot.result is not None):
            raise HandleNotFound(f"no job {job_id!r} in this cluster")
        if snapshot.result is not None:
            raise ConfigError(f"job {job_id} already finished ({snapshot.result.outcome})")
        request = cluster.state.request_cancel(job_id, reason=reason)
    click.echo(f"cancel of {job_id} requested at {request.requested}")


@cli.group()
def checkpoints() -> None:
    """Inspect checkpoints."""


@checkpoints.command("list")
@click.argument("job_id")
@connection_options
@format_option
def list_checkpoints(job_id: str, connection: Connection, fmt: str) -> None:
    """List a job's checkpoints, oldest first (from handles; metadata is not read).

    JSON: a list of {id, created, size, uri, version}.
    """
    validate_job_id(job_id)
    with open_cluster(connection) as cluster:
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


@cli.group()
def control() -> None:
    """Read and change a job's dynamic configuration (ctx.config in the job)."""


@control.command("get")
@click.argument("job_id")
@connection_options
def control_get(job_id: str, connection: Connection) -> None:
    """Print the job's control values as JSON."""
    validate_job_id(job_id)
    with open_cluster(connection) as cluster:
        values, version = cluster.state.control(job_id)
    click.echo(json.dumps({"values": values, "version": version}, indent=2, sort_keys=True))


@control.command("set")
@click.argument("job_id")
@click.argument("pairs", nargs=-1, required=True, metavar="KEY=VALUE...")
@click.option("--replace", is_flag=True, help="replace all values instead of merging")
@connection_options
def control_set(job_id: str, pairs: tuple[str, ...], replace: bool, connection: Connection) -> None:
    """Set control values (JSON values where they parse: rate=10, on=true, name=x).

    The update is a versioned compare-and-set: a concurrent change makes it fail, not vanish.
    """
    validate_job_id(job_id)
    updates = parse_storage_options(pairs)
    with open_cluster(connection) as cluster:
        if cluster.jobs.handles.exists(job_id) is None:
            raise HandleNotFound(f"job {job_id!r} is not running in this cluster")
        values, version = cluster.state.control(job_id)
        merged = updates if replace else {**values, **updates}
        new_version = cluster.state.set_control(job_id, merged, expected_version=version)
    click.echo(json.dumps({"values": merged, "version": new_version}, indent=2, sort_keys=True))
