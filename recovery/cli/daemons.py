"""``zkstore daemons list | drain ID | undrain ID``: the fleet, for operators."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import click

from recovery.shared.fleet import format_labels, read_fleet
from zkstore.cli.base import Connection, cli, connection_options
from zkstore.cli.output import emit, format_option
from zkstore.cluster import Cluster
from zkstore.config import validate_id
from zkstore.errors import CorruptRecord, DaemonNotFound, HandleExists, HandleNotFound
from zkstore.jobs.records import DrainMark, LeaderInfo, read_record
from zkstore.service.jobs import age
from zkstore.strict import time_text, utc_moment

logger = logging.getLogger(__name__)


def _leader_id(cluster: Cluster) -> str | None:
    """The leading daemon's id, None if none leads or its record is unreadable (then no
    daemon is listed as the leader, and the log says why)."""
    try:
        info = read_record(cluster.zk, LeaderInfo, cluster.layout.leader_info)
    except CorruptRecord as exc:
        logger.warning("the leader's record is unreadable: %s", exc)
        return None
    return None if info is None else info.daemon_id


def fleet_report(cluster: Cluster) -> list[dict[str, Any]]:
    """Every daemon of the fleet as a JSON-able dict (the shape of ``daemons list --format
    json``); a drained daemon that is down is listed too, so that it can be undrained."""
    return [item for item, _ in _fleet(cluster)]


def _fleet(cluster: Cluster) -> list[tuple[dict[str, Any], datetime | None]]:
    """:func:`fleet_report`'s items, each with when its daemon started (None: down)."""
    fleet = read_fleet(cluster.zk, cluster.layout)
    leader = _leader_id(cluster)
    drained_only = set(cluster.zk.children(cluster.layout.drained)) - set(fleet.members)
    items: list[dict[str, Any]] = []
    started: list[datetime | None] = []
    for member in sorted(fleet.members.values(), key=lambda m: m.daemon_id):
        info = member.info
        items.append(
            {
                "id": member.daemon_id,
                "host": info.host,
                "pid": info.pid,
                "leader": member.daemon_id == leader,
                "slots": info.slots,
                "used": len(member.assigned),
                "labels": member.labels,
                "drained": member.drained,
                "jobs": sorted(member.assigned),
                "started": time_text(info.started),
                "up": True,
                "release": info.release,
                "protocol": info.protocol,
                "min_protocol": info.min_protocol,
                "users_out": info.users_out or {},
                "rss": info.rss,
                "heap_blocks": info.heap_blocks,
                "warm_ready": info.warm_ready,
                "warm_first_s": None
                if info.warm_first_ms is None
                else round(info.warm_first_ms / 1000, 1),
            }
        )
        started.append(info.started)
    for daemon_id in sorted(drained_only):
        items.append({"id": daemon_id, "drained": True, "up": False, "leader": False})
        started.append(None)
    return list(zip(items, started, strict=True))


@cli.group()
def daemons() -> None:
    """The daemons of the fleet: who runs what, and draining a daemon before maintenance."""


@daemons.command("list")
@connection_options
@format_option
def list_daemons(connection: Connection, fmt: str) -> None:
    """List the daemons: leader or not, driver slots used/total, labels, jobs placed, age.

    \b
    JSON: a list of {id, host, pid, leader, slots, used, labels, drained, jobs,
    started, up, release, protocol, min_protocol, users_out, rss, heap_blocks, warm_ready,
    warm_first_s} (release,
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
    with Cluster.open(connection.config) as cluster:
        found = _fleet(cluster)
    items = [item for item, _ in found]
    rows = [
        {
            **item,
            "leader": "*" if item["leader"] else "",
            "slots": f"{item['used']}/{item['slots']}" if item["up"] else "down",
            "labels": format_labels(item.get("labels") or {}) or None,
            "state": "drained" if item["drained"] else "active",
            "jobs": ",".join(item.get("jobs") or []) or None,
            "age": age(moment),
            "memory": _mib(item.get("rss")),
            "warm": _warm(item.get("warm_ready"), item.get("warm_first_s")),
            "users out": "; ".join(f"{k}: {v}" for k, v in sorted(item["users_out"].items()))
            if item.get("users_out")
            else None,
        }
        for item, moment in found
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


def _known(cluster: Cluster, daemon_id: str) -> bool:
    """True if the daemon is up, or the fleet knows it: attempts placed on it (its assignment
    directory, made when it registers), or a drain mark."""
    layout = cluster.layout
    found = cluster.zk.exists_many(
        [
            layout.member(daemon_id),
            layout.member_assignments(daemon_id),
            layout.drain_mark(daemon_id),
        ]
    )
    return any(stat is not None for stat in found)


def _unknown(cluster: Cluster, daemon_id: str) -> DaemonNotFound:
    try:
        up = sorted(cluster.zk.children(cluster.layout.members))
    except HandleNotFound:
        up = []
    return DaemonNotFound(
        f"no daemon {daemon_id!r} in this cluster (up: {', '.join(up) or 'none'}); to drain "
        "one that has not started yet, or whose records are gone, use --before-start",
        path=cluster.layout.member(daemon_id),
    )


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
    validate_id(daemon_id, "daemon id")
    with Cluster.open(connection.config) as cluster:
        if not before_start and not _known(cluster, daemon_id):
            raise _unknown(cluster, daemon_id)
        mark = DrainMark(version=None, since=utc_moment()).to_bytes()
        try:
            cluster.zk.create(cluster.layout.drain_mark(daemon_id), mark)
        except HandleExists:
            click.echo(f"{daemon_id} was drained already")
            return
        up = cluster.zk.exists(cluster.layout.member(daemon_id)) is not None
    note = "" if up else " (it is not up now; the mark applies when it comes back)"
    click.echo(f"{daemon_id} drained: no new attempts go there{note}")


@daemons.command("undrain")
@click.argument("daemon_id")
@connection_options
def undrain(daemon_id: str, connection: Connection) -> None:
    """Let the leader place attempts on DAEMON_ID again. Exits 4 for an id no daemon of the
    fleet has."""
    validate_id(daemon_id, "daemon id")
    with Cluster.open(connection.config) as cluster:
        try:
            cluster.zk.delete(cluster.layout.drain_mark(daemon_id))
        except HandleNotFound:
            if not _known(cluster, daemon_id):
                raise _unknown(cluster, daemon_id) from None
            click.echo(f"{daemon_id} was not drained")
            return
    click.echo(f"{daemon_id} undrained at {datetime.now(UTC).isoformat(timespec='seconds')}")
