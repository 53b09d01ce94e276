"""Quarantine commands: ``zkstore quarantine list|show|release|purge``.

A quarantined job does not run: its definition (or a record of it) could not be read or
verified. Its handle is kept in the entry, so its payload stays referenced for you to look at;
``release`` puts it back once it verifies, ``purge`` ends it (see :mod:`zkstore.cluster.triage`).
``list`` and ``show`` never unpickle anything; ``release`` unpickles the definition to check it
(as a driver would), without running any of the job's code.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import click

from recovery.cli.base import Connection, UsageFailure, cli, connection_options
from recovery.cli.jobs.job_commands import open_cluster
from recovery.cli.output import emit, format_option
from zkstore.errors import JobNotFound, PayloadError
from zkstore.jobs.snapshot import read_snapshot
from zkstore.records.result_records import QuarantineEntry
from zkstore.records.strict import time_text
from zkstore.service.job_view import age, headline

if TYPE_CHECKING:  # the commands import the cluster's stores when they run (not for --help)
    from zkstore.cluster import Cluster
    from zkstore.cluster.triage import Done

ENTRY_JSON_HELP = """\b
JSON: job_id, name, reason, since, kind, entry, submitted,
payload {uri, size, sha256, created, signed} or null (the kept handle),
raw (what the handle node held, when it was not a valid handle) and error
(why the entry itself is unreadable) or null."""


def describe_entry(entry: QuarantineEntry) -> dict[str, Any]:
    """One quarantine entry as a JSON-able dict (the shape of ``quarantine list``)."""
    from zkstore.cluster.triage import kept_handle

    handle = kept_handle(entry)
    summary = dict(handle.summary) if handle is not None else {}
    return {
        "job_id": entry.job_id,
        "name": summary.get("name"),
        "reason": entry.reason,
        "since": time_text(entry.since),
        "kind": summary.get("kind"),
        "entry": summary.get("entry"),
        "submitted": summary.get("submitted"),
        "payload": None
        if handle is None
        else {
            "uri": handle.uri,
            "size": handle.size,
            "sha256": handle.sha256,
            "created": time_text(handle.created),
            "signed": handle.hmac is not None,
        },
        "raw": entry.raw,
        "error": None,
    }


def _unreadable(job_id: str, why: str) -> dict[str, Any]:
    keys = ("name", "reason", "since", "kind", "entry", "submitted", "payload", "raw")
    return {"job_id": job_id, **dict.fromkeys(keys), "error": why}


@cli.group()
def quarantine() -> None:
    """Jobs that cannot run as they are: look at them, release or purge them."""


@quarantine.command("list")
@connection_options
@format_option
def list_quarantine(connection: Connection, fmt: str) -> None:
    """List the quarantined jobs with the reason each was quarantined."""
    with open_cluster(connection) as cluster:
        entries, unreadable = cluster.quarantine.all()
    items = [describe_entry(e) for e in entries]
    items += [_unreadable(job_id, why) for job_id, why in sorted(unreadable.items())]
    since = [e.since for e in entries] + [None] * len(unreadable)
    rows = [
        {
            "job": i["job_id"],
            "name": i["name"],
            "age": age(moment),
            "reason": headline(i["reason"] or i["error"]),
        }
        for i, moment in zip(items, since, strict=True)
    ]
    emit(
        items,
        fmt,
        columns=["job", "name", "age", "reason"],
        rows=rows,
        empty="no jobs in quarantine",
    )


list_quarantine.help = inspect.cleandoc(list_quarantine.help or "") + "\n\n" + ENTRY_JSON_HELP


@quarantine.command("show")
@click.argument("job_id")
@connection_options
@format_option
def show_quarantine(job_id: str, connection: Connection, fmt: str) -> None:
    """One quarantined job: why, its kept handle, and whether its payload verifies now (size,
    sha256, signature, under the job's prefix: read, never unpickled).

    JSON: the object of ``quarantine list`` plus state, attempt, failures, driver_running and
    check {verifies, problem}. Exits 4 if the job is not in quarantine.
    """
    with open_cluster(connection) as cluster:
        job = read_snapshot(cluster.zk, cluster.layout, job_id)
        if not job.quarantined:
            raise JobNotFound(f"job {job_id} is not in quarantine ({job.state})")
        item = (
            describe_entry(job.quarantine)
            if job.quarantine is not None
            else _unreadable(job_id, job.errors.get("quarantine", "unreadable"))
        )
        problem = _payload_problem(cluster, job_id, job.quarantine)
    item.update(
        state=job.state,
        attempt=job.status.attempt if job.status is not None else None,
        failures=job.status.failures if job.status is not None else None,
        driver_running=job.driver_present,
        check={"verifies": problem is None, "problem": problem},
    )
    if fmt == "json":
        emit(item, fmt)
        return
    payload = item["payload"]
    lines = {
        "job_id": item["job_id"],
        "name": item["name"],
        "since": item["since"],
        "kind": item["kind"],
        "entry": item["entry"],
        "attempt": item["attempt"],
        "payload": None if payload is None else f"{payload['uri']} ({payload['size']} bytes)",
        "verifies": "yes (release would put it back)" if problem is None else f"no: {problem}",
        "driver": "still running" if job.driver_present else None,
        "raw handle": item["raw"],
        "entry error": item["error"],
    }
    emit({k: v for k, v in lines.items() if v is not None}, fmt)
    click.echo("reason:")
    for line in (item["reason"] or "-").splitlines():
        click.echo(f"  {line}")


def _payload_problem(cluster: Cluster, job_id: str, entry: QuarantineEntry | None) -> str | None:
    """Why the kept handle's payload does not verify now, or None if it does."""
    from zkstore.cluster.triage import kept_handle

    handle = kept_handle(entry)
    if handle is None:
        return "no valid handle was kept"
    try:
        cluster.storage.read(cluster.jobs.handles.payload_ref(job_id, handle))
    except PayloadError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _report(done: Done, fmt: str) -> None:
    if fmt == "json":
        emit(done.as_dict(), fmt)
    else:
        click.echo(done.detail)


@quarantine.command("release")
@click.argument("job_id")
@connection_options
@format_option
@click.option("--dry-run", is_flag=True, help="verify the definition; change nothing")
def release(job_id: str, connection: Connection, fmt: str, dry_run: bool) -> None:
    """Put a quarantined job back to run, once its definition verifies again.

    The definition is checked as a driver would load it (under the job's own storage prefix,
    size, sha256, signature, Python version, unpickled to this job's definition; none of its
    code runs). Then one transaction puts its handle back into currentJobs, deletes the
    quarantine entry and leaves the job PENDING: the leader starts its next attempt.

    Exits 5 with the reason if it still does not verify (it stays quarantined), or while a
    driver of it still runs; 0 if it was released (or was not quarantined any more).
    JSON: {job_id, action, changed, detail}.
    """
    with open_cluster(connection) as cluster:
        from zkstore.cluster import triage

        done = triage.release(cluster, job_id, dry_run=dry_run)
    _report(done, fmt)


@quarantine.command("purge")
@click.argument("job_id")
@connection_options
@format_option
@click.option("--dry-run", is_flag=True, help="show what would be done; change nothing")
@click.option("--yes", is_flag=True, help="really do it")
def purge(job_id: str, connection: Connection, fmt: str, dry_run: bool, yes: bool) -> None:
    """End a quarantined job for good: record its result (FAILED, with the quarantine reason)
    and remove its data (payload, records, checkpoints). Needs --yes or --dry-run.

    Run again after an interruption, it finishes the removal. The id stays taken for the
    result's retention period (or until `jobs forget`). Exits 5 for a job that is not
    quarantined but current (cancel it instead). JSON: {job_id, action, changed, detail}.
    """
    if dry_run == yes:
        raise UsageFailure("say --dry-run to look, or --yes to purge")
    with open_cluster(connection) as cluster:
        from zkstore.cluster import triage

        done = triage.purge(cluster, job_id, dry_run=dry_run)
    _report(done, fmt)
