"""``zkstore checkpoints list``: a job's checkpoints, from their handles (no payload read)."""

from __future__ import annotations

from typing import Any

import click

from recovery.cli.base import Connection, cli, connection_options
from recovery.cli.jobs.job_commands import open_cluster
from recovery.cli.output import emit, format_option
from zkstore.records.strict import time_text

__all__ = ["checkpoints", "list_checkpoints"]


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
    from zkstore.jobs.snapshot import read_snapshot
    from zkstore.service.job_view import age

    with open_cluster(connection) as cluster:
        read_snapshot(cluster.zk, cluster.layout, job_id)
        found = cluster.checkpoints(job_id).all()
    items: list[dict[str, Any]] = [
        {
            "id": cid,
            "created": time_text(h.created),
            "size": h.size,
            "uri": h.uri,
            "version": h.version,
        }
        for cid, h in found
    ]
    rows = [{**i, "age": age(h.created_at)} for i, (_, h) in zip(items, found, strict=True)]
    emit(
        items,
        fmt,
        columns=["id", "age", "size", "uri"],
        rows=rows,
        empty=f"no checkpoints for {job_id}",
    )
