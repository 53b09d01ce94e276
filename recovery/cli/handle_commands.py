"""Operator commands: ``zkstore handles list|verify|lingering|cleanup``.

They tell the truth about the store and clean up exactly what is garbage: nothing is ever
unpickled, every deletion is re-checked against ZooKeeper right before it is made, and nothing
younger than ``--min-age`` is touched.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import click

from recovery.cli.artifact_options import artifact_root_option, with_roots
from recovery.cli.base import (
    Connection,
    OperationFailed,
    UsageFailure,
    cli,
    connection_options,
    progress,
)
from recovery.cli.output import emit, format_option
from recovery.cli.types import Duration
from zkstore.admin.inventory import HandleRecord, Problem, read_inventory, verify
from zkstore.admin.lingering import KINDS, Cleaner, CleanupResult, find_lingering
from zkstore.errors import PayloadError
from zkstore.layout import is_checkpoint_node_name
from zkstore.payloads.store import MAX_PUBLISH_DELAY
from zkstore.records.strict import time_text
from zkstore.schedules.schedule_store import ScheduleStore

if TYPE_CHECKING:  # the commands import the cluster's stores when they run (not for --help)
    from zkstore.cluster import Cluster

SAFE_MIN_AGE = 2 * MAX_PUBLISH_DELAY


def _refuse_young_while_daemons_run(cluster: Cluster, min_age: float) -> None:
    """A payload is published at most :data:`MAX_PUBLISH_DELAY` after it was written (by a
    client, or by a leader firing a schedule): while daemons run, removing one younger than
    twice that could take a payload a writer is about to publish. Refused then; without a
    daemon up, a warning."""
    members = cluster.zk.children_many([cluster.layout.members])[0] or []
    if members:
        shown = ", ".join(sorted(members)[:5])
        raise UsageFailure(
            f"--min-age {min_age:g}s is below {SAFE_MIN_AGE:g}s while daemons are up ({shown}): "
            "a payload a writer is about to publish could be taken (payloads are published "
            f"within {MAX_PUBLISH_DELAY:g} s of being written); give --min-age "
            f"{SAFE_MIN_AGE:g}s or more, or --writers-stopped once none submits or fires"
        )
    click.echo(
        f"warning: --min-age {min_age:g}s is below {SAFE_MIN_AGE:g}s: a payload written by a "
        "client stalled that long could be removed before its handle is published",
        err=True,
    )


def human_age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def human_size(size: int | None) -> str | None:
    if size is None:
        return None
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    return None


min_age_option = click.option(
    "--min-age",
    type=Duration(),
    default="10m",
    show_default=True,
    help="only what is older than this is lingering (payloads are published within "
    f"{MAX_PUBLISH_DELAY:g} s of being written; stay well above that)",
)


@cli.group()
def handles() -> None:
    """Inspect and verify handles; find and clean up lingering state."""


def _record(record: HandleRecord, cluster: Cluster, now: float) -> dict[str, Any]:
    handle = record.handle
    return {
        "path": record.path,
        "kind": record.kind,
        "job": record.job_id,
        "name": record.name,
        "version": record.version,
        "marked_for_deletion": record.marked,
        "uri": handle.uri if handle else None,
        "size": handle.size if handle else None,
        "sha256": handle.sha256 if handle else None,
        "signed": handle.hmac is not None if handle else None,
        "created": time_text(handle.created) if handle else None,
        "age_seconds": round(now - record.mtime, 1) if record.mtime else None,
        "locks": list(record.locks or ()),
        "error": record.error,
    }


@handles.command("list")
@connection_options
@format_option
def list_handles(connection: Connection, fmt: str) -> None:
    """Every handle under the root: job definitions, checkpoints, quarantined copies.

    \b
    JSON: a list of {path, kind (job|checkpoint|quarantined), job, name, version,
    marked_for_deletion, uri, size, sha256, signed, created, age_seconds, locks, error}.
    """
    from zkstore.cluster import Cluster

    with Cluster.open(connection.config) as cluster:
        inventory = read_inventory(cluster.zk, cluster.layout, with_locks=True)
        now = time.time()
        items = [_record(r, cluster, now) for r in sorted(inventory.handles, key=lambda r: r.path)]
        root = cluster.storage.root_url + "/"
    rows = [
        {
            **item,
            "age": human_age(item["age_seconds"]) if item["age_seconds"] is not None else None,
            "size": human_size(item["size"]),
            "payload": (item["uri"] or "-").removeprefix(root),
            "name": str(int(item["name"]))
            if item["kind"] == "checkpoint" and is_checkpoint_node_name(item["name"])
            else item["name"],
            "state": "marked"
            if item["marked_for_deletion"]
            else ("corrupt" if item["error"] else "live"),
        }
        for item in items
    ]
    columns = ["kind", "job", "name", "version", "state", "size", "age", "locks", "payload"]
    emit(items, fmt, columns=columns, rows=rows, empty="no handles")


@handles.command("verify")
@connection_options
@format_option
def verify_handles(connection: Connection, fmt: str) -> None:
    """Check that every live handle's payload exists and its size and sha256 match (the
    schedules' definitions too).

    With ZKSTORE_SIGNING_KEY set, signatures are checked too. Nothing is unpickled.
    Exits 1 if any problem is found.

    \b
    JSON: {"checked": N, "problems": [{path, uri, kind, job, problem}]}.
    """
    from zkstore.cluster import Cluster

    with Cluster.open(connection.config) as cluster:
        # A follower may lag: without it, a handle deleted with its payload moments ago could
        # be reported as one whose payload is missing (seen in a chaos run on a loaded host).
        cluster.zk.sync(cluster.layout.base)
        inventory = read_inventory(cluster.zk, cluster.layout)
        live = [r for r in inventory.handles if not r.marked]
        with progress(len(live), "verifying payloads") as advance:
            problems = verify(cluster.storage, cluster.storage_layout, live, progress=advance)
        checked, schedule_problems = verify_schedules(
            ScheduleStore.for_config(connection.config, cluster.zk)
        )
    problems += schedule_problems
    live_count = len(live) + checked
    report = {"checked": live_count, "problems": [p.as_dict() for p in problems]}
    if fmt == "json":
        emit(report, fmt)
    else:
        if problems:
            emit(report["problems"], fmt, columns=["kind", "job", "path", "problem"])
        click.echo(f"{live_count} handle(s) checked, {len(problems)} problem(s)")
    if problems:
        raise PayloadError(f"{len(problems)} handle(s) whose payload cannot be trusted or read")


def verify_schedules(store: ScheduleStore) -> tuple[int, list[Problem]]:
    """Each schedule's definition handle checked as ``verify`` checks a job's (kind
    ``schedule``, its name as the job); an unreadable spec is a problem too."""
    problems: list[Problem] = []
    good, broken = store.all()
    for item in broken:
        path = store.layout.schedule(item.name)
        problems.append(Problem(path, None, "schedule", item.name, str(item.error)))
    for schedule in good:
        try:
            store.check_payload(schedule.spec)
        except PayloadError as exc:
            path = store.layout.schedule(schedule.name)
            uri = schedule.spec.handle.uri
            problems.append(Problem(path, uri, "schedule", schedule.name, str(exc)))
    return len(good) + len(broken), problems


@handles.command("lingering")
@connection_options
@format_option
@min_age_option
def lingering(connection: Connection, fmt: str, min_age: float) -> None:
    """What failures left behind, by kind (quarantined jobs are reported, never garbage).

    \b
    orphan-payload   an object under a job's storage prefix that no handle references
    dangling-handle  a live handle whose payload is missing or has the wrong size
                     (run `handles verify` for a full sha256 check)
    marked-node      a handle marked for deletion whose removal never finished
    dirty-result     a finished job whose cleanup never finished
    artifact-of-dead-attempt  an attempt-scoped artifact whose attempt ended, or an
                     artifact whose release was interrupted, while no driver runs
    artifact-of-ended-job     an artifact of a job that is neither current nor quarantined
    empty-job-tree   records of a job that is neither current, finished nor quarantined
    quarantined-job  a job that cannot run; its handle and payload are kept for you

    \b
    JSON: {"min_age_seconds": S, "findings": [{kind, job_id, target, age, size,
    detail, garbage}], "summary": {kind: count}}.
    """
    from zkstore.cluster import Cluster

    with Cluster.open(connection.config) as cluster:
        findings = find_lingering(cluster, min_age=min_age)
    summary = dict(Counter(f.kind for f in findings))
    if fmt == "json":
        emit(
            {
                "min_age_seconds": min_age,
                "findings": [f.as_dict() for f in findings],
                "summary": summary,
            },
            fmt,
        )
        return
    rows = [
        {**f.as_dict(), "job": f.job_id, "age": human_age(f.age), "size": human_size(f.size)}
        for f in findings
    ]
    emit(
        findings,
        fmt,
        columns=["kind", "job", "age", "size", "target", "detail"],
        rows=rows,
        empty="nothing lingering",
    )
    if findings:
        click.echo("\n" + ", ".join(f"{summary[k]} {k}" for k in KINDS if k in summary))


@handles.command("cleanup")
@connection_options
@format_option
@min_age_option
@click.option("--dry-run", is_flag=True, help="show what would be done; change nothing")
@click.option("--yes", is_flag=True, help="really do it")
@click.option(
    "--writers-stopped",
    is_flag=True,
    help="no client submits and no schedule fires now: with daemons up, a --min-age below "
    f"{SAFE_MIN_AGE:g}s is refused without it",
)
@artifact_root_option
def cleanup(
    connection: Connection,
    fmt: str,
    min_age: float,
    dry_run: bool,
    yes: bool,
    writers_stopped: bool,
    artifact_roots: tuple[str, ...],
) -> None:
    """Remove exactly what `handles lingering` reports as garbage.

    Orphan payloads are discarded, marked nodes and dirty results finished, empty job trees
    deleted, lingering artifacts released (their data, then their record: data outside the
    storage root only under an --artifact-root given here); dangling handles move their job to
    quarantine (never to the bin). Each deletion is re-checked against ZooKeeper just before it
    is made. Needs --dry-run or --yes.

    \b
    JSON: {"dry_run": bool, "results": [{kind, job_id, target, action, done, freed,
    note, ...}], "done": N, "freed_bytes": B}.
    """
    if dry_run == yes:
        raise UsageFailure("say --dry-run to look, or --yes to clean up")
    from zkstore.cluster import Cluster

    with Cluster.open(with_roots(connection.config, artifact_roots)) as cluster:
        if yes and min_age < SAFE_MIN_AGE and not writers_stopped:
            _refuse_young_while_daemons_run(cluster, min_age)
        findings = [f for f in find_lingering(cluster, min_age=min_age) if f.garbage]
        with progress(len(findings), "cleaning up") as advance:
            results = Cleaner(cluster, dry_run=dry_run).clean(findings, progress=advance)
    _show_cleanup(results, fmt, dry_run)
    failed = [r for r in results if r.action == "failed"]
    if failed:
        raise OperationFailed(f"{len(failed)} item(s) could not be cleaned up; see above")


def _show_cleanup(results: list[CleanupResult], fmt: str, dry_run: bool) -> None:
    done = [r for r in results if r.done]
    freed = sum(r.freed for r in done)
    if fmt == "json":
        report = {
            "dry_run": dry_run,
            "results": [r.as_dict() for r in results],
            "done": len(done),
            "freed_bytes": freed,
        }
        emit(report, fmt)
        return
    rows = [{**r.as_dict(), "job": r.finding.job_id} for r in results]
    columns = ["action", "kind", "job", "done", "target", "note"]
    emit(results, fmt, columns=columns, rows=rows, empty="nothing to clean up")
    if dry_run:
        acting = [r for r in results if r.action not in ("kept", "failed")]
        would_free = sum(r.finding.size or 0 for r in acting)
        kept = len(results) - len(acting)
        click.echo(
            f"\nwould act on {len(acting)} item(s), freeing {human_size(would_free)}"
            + (f"; {kept} kept (see NOTE)" if kept else "")
        )
    else:
        click.echo(f"\ncleaned up {len(done)} item(s), freed {human_size(freed)}")
