"""``zkstore daemons list | drain ID | undrain ID``: the fleet, for operators."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from recovery.cli.base import Connection, cli, connection_options
from recovery.cli.jobs.job_commands import open_zookeeper
from recovery.cli.output import emit, format_option
from recovery.shared import fleet_daemons
from recovery.shared.fleet_daemons import Marked, read_daemons
from recovery.shared.fleet_view import format_labels
from zkstore.config import validate_id
from zkstore.errors import CorruptRecord
from zkstore.records.fleet_records import LeaderInfo
from zkstore.records.record import read_record
from zkstore.service.job_view import age

if TYPE_CHECKING:  # the commands import the stores they use: ``daemons list`` reads records
    # over a ZooKeeper session alone (no storage built), ``--help`` imports no client at all
    from zkstore.layout import Layout
    from zkstore.zookeeper.zk import ZooKeeper

logger = logging.getLogger(__name__)


def _leader_id(zk: ZooKeeper, layout: Layout) -> str | None:
    """The leading daemon's id, None if none leads or its record is unreadable (then no
    daemon is listed as the leader, and the log says why)."""
    try:
        info = read_record(zk, LeaderInfo, layout.leader_info)
    except CorruptRecord as exc:
        logger.warning("the leader's record is unreadable: %s", exc)
        return None
    return None if info is None else info.daemon_id


@cli.group()
def daemons() -> None:
    """The daemons of the fleet: who runs what, and draining a daemon before maintenance."""


@daemons.command("list")
@connection_options
@format_option
def list_daemons(connection: Connection, fmt: str) -> None:
    """List the daemons: leader or not, driver slots used/total, labels, jobs placed, age.

    \b
    JSON (the same as GET /api/v1/cluster's daemons): a list of {id, host, pid, leader, slots,
    used, labels, drained, jobs, started, up, lost, lost_since, release, protocol,
    min_protocol, users_out, rss, heap_blocks, warm_ready, warm_first_s} (up: its session
    lives; lost: it is gone with attempts still placed on it, until the leader places them
    again, since lost_since if known; a daemon drained and down is listed too; release,
    protocol, min_protocol: the daemon's zkstore release, the fleet protocol it speaks and the
    oldest it serves; release null for a daemon older than 0.2.0; users_out: its --driver-user
    users out of its pool, name -> why: a process left running as it, or what a driver left
    that could not be removed; rss, heap_blocks: its resident memory in bytes and the blocks
    its Python allocator holds, as it reports them every 30 s, null until its first report or
    for a daemon older than 0.3.0; warm_ready: its warm driver JVMs ready for an attempt now,
    warm_first_s: the seconds from its start to its first one ready, both null without warm
    drivers, warm_first_s until then). MEMORY: the resident memory in MiB; WARM: the warm JVMs
    ready (and when the first was).
    """
    with open_zookeeper(connection) as (zk, layout):
        found = read_daemons(zk, layout, _leader_id(zk, layout))
    items = [d.as_dict() for d in found]
    rows = [
        {
            **item,
            "leader": "*" if d.leader else "",
            "slots": f"{d.used}/{d.slots}" if d.up else ("lost" if d.lost else "down"),
            "labels": format_labels(d.labels) or None,
            "state": "drained" if d.drained else "active",
            "jobs": ",".join(d.jobs) or None,
            "age": age(d.started),
            "memory": _mib(d.rss),
            "warm": _warm(d.warm_ready, d.warm_first_s),
            "users out": "; ".join(f"{k}: {v}" for k, v in sorted(d.users_out.items()))
            if d.users_out
            else None,
        }
        for d, item in zip(found, items, strict=True)
    ]
    columns = [
        "id",
        "leader",
        "host",
        "state",
        "slots",
        "labels",
        "release",
        "age",
        "memory",
        "warm",
        "jobs",
    ]
    if any(item.get("users_out") for item in items):
        columns.append("users out")
    emit(items, fmt, columns=columns, rows=rows, empty="no daemons")


def _warm(ready: object, first: object) -> str | None:
    """The warm JVMs as the column shows them: ``1 ready (first at 23.4 s)``."""
    if not isinstance(ready, int):
        return None
    return f"{ready} ready" + (f" (first at {first:g} s)" if isinstance(first, float) else "")


def _mib(value: object) -> str | None:
    """Bytes as the column shows them."""
    return f"{value / 2**20:.0f} MiB" if isinstance(value, int) else None


@daemons.command("drain")
@click.argument("daemon_id")
@click.option(
    "--before-start",
    is_flag=True,
    help="drain a daemon that has not started yet (else an id the fleet does not know is "
    "refused: exit 4)",
)
@connection_options
def drain(daemon_id: str, before_start: bool, connection: Connection) -> None:
    """Place no new attempts on DAEMON_ID; the jobs running there finish where they are.

    The mark is kept in ZooKeeper, so it outlives restarts of the daemon: undrain to lift it.
    Exits 4 for an id no daemon of the fleet has (a typo), unless --before-start.
    """
    from zkstore.cluster import Cluster

    validate_id(daemon_id, "daemon id")
    with Cluster.open(connection.config) as cluster:
        marked = fleet_daemons.drain(
            cluster.zk, cluster.layout, daemon_id, before_start=before_start
        )
    if marked is Marked.ALREADY:
        click.echo(f"{daemon_id} was drained already")
        return
    note = (
        "" if marked is Marked.DONE else " (it is not up now; the mark applies when it comes back)"
    )
    click.echo(f"{daemon_id} drained: no new attempts go there{note}")


@daemons.command("undrain")
@click.argument("daemon_id")
@connection_options
def undrain(daemon_id: str, connection: Connection) -> None:
    """Let the leader place attempts on DAEMON_ID again. Exits 4 for an id no daemon of the
    fleet has."""
    from zkstore.cluster import Cluster

    validate_id(daemon_id, "daemon id")
    with Cluster.open(connection.config) as cluster:
        marked = fleet_daemons.undrain(cluster.zk, cluster.layout, daemon_id)
    if marked is Marked.ALREADY:
        click.echo(f"{daemon_id} was not drained")
        return
    click.echo(f"{daemon_id} undrained at {datetime.now(UTC).isoformat(timespec='seconds')}")
