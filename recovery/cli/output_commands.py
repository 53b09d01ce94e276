"""``zkstore outputs list|show|paths``: what a job committed to its outputs, and nothing else.

Read from the job's records while it lives, from the manifest file a kept output has next to
its data once it is over (:mod:`zkstore.service.output_view`).
"""

from __future__ import annotations

from typing import Any

import click

from recovery.cli.artifact_options import artifact_root_option, with_roots
from recovery.cli.base import Connection, cli, connection_options
from recovery.cli.output import emit, format_option

__all__ = ["list_outputs", "output_paths", "outputs", "show_output"]


@cli.group()
def outputs() -> None:
    """What jobs committed with their checkpoints (ctx.outputs): only committed parts.

    A job stages a step's parts under ctx.outputs.stage(NAME) and commits them with
    ctx.checkpoint(state, commit={NAME: [paths]}): in one ZooKeeper transaction, fenced on
    its attempt, so each step is committed once and a superseded attempt commits nothing.
    """


def _open(connection: Connection, roots: tuple[str, ...]) -> Any:
    from zkstore.cluster import Cluster

    return Cluster.open(with_roots(connection.config, roots))


@outputs.command("list")
@click.argument("job_id")
@artifact_root_option
@connection_options
@format_option
def list_outputs(
    job_id: str, artifact_roots: tuple[str, ...], connection: Connection, fmt: str
) -> None:
    """List a job's outputs: commits, committed parts, the newest commit, where they are.

    JSON: a list of {name, uri, commits, parts, newest (the newest commit's id: the
    checkpoint it was committed with), from (zookeeper while the job lives, manifest: the
    file a finished job kept next to the data)}. Exits 4 if there is no such job.
    """
    from zkstore.service.output_view import list_outputs as listed

    with _open(connection, artifact_roots) as cluster:
        items = listed(cluster, job_id)
    emit(
        items,
        fmt,
        columns=["name", "commits", "parts", "newest", "from", "uri"],
        empty=f"no outputs for {job_id}",
    )


@outputs.command("show")
@click.argument("job_id")
@click.argument("name")
@artifact_root_option
@connection_options
@format_option
def show_output(
    job_id: str, name: str, artifact_roots: tuple[str, ...], connection: Connection, fmt: str
) -> None:
    """Show an output's manifest: each commit (its checkpoint, attempt, time) and its parts.

    JSON: {job_id, output, uri, commit (the newest), paths (every committed part, oldest
    first), commits [{commit, attempt, committed, parts (relative to uri)}], from}. Exits 4
    if the job or the output is unknown.
    """
    from zkstore.service.output_view import show_output as shown

    with _open(connection, artifact_roots) as cluster:
        item = shown(cluster, job_id, name)
    if fmt == "json":
        emit(item, fmt)
        return
    emit({"output": item["output"], "uri": item["uri"], "from": item["from"]}, fmt)
    commits = item.get("commits") or []
    if not commits:
        click.echo("no commit yet")
    for commit in commits:
        click.echo(
            f"commit {commit['commit']} (attempt {commit['attempt']}, {commit['committed']}): "
            + ", ".join(commit["parts"])
        )


@outputs.command("paths")
@click.argument("job_id")
@click.argument("name")
@click.option(
    "--hadoop",
    is_flag=True,
    help="the URLs Spark's Hadoop filesystems read (s3a:// for s3://)",
)
@artifact_root_option
@connection_options
@format_option
def output_paths(
    job_id: str,
    name: str,
    hadoop: bool,
    artifact_roots: tuple[str, ...],
    connection: Connection,
    fmt: str,
) -> None:
    """Print the committed parts of an output, one URI a line, oldest commit first: what
    spark.read.parquet(*paths) or pandas should read (never the directory as a whole, which
    may hold staged parts that were not committed).

    JSON: a list of URIs. Exits 4 if the job or the output is unknown.
    """
    from zkstore.service.output_view import paths
    from zkstore.service.output_view import show_output as shown

    with _open(connection, artifact_roots) as cluster:
        found = paths(shown(cluster, job_id, name), hadoop=hadoop)
    if fmt == "json":
        emit(found, fmt)
        return
    for path in found:
        click.echo(path)
