"""``zkstore pools set | list | show | delete``: named limits and priorities on driver slots
(:mod:`zkstore.cluster.pools`)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import click

from recovery.cli.base import Connection, cli, connection_options
from recovery.cli.output import emit, format_option
from zkstore.cluster import fleet_protocol as fleet
from zkstore.cluster.pools import MAX_PRIORITY, Pool, counts, delete_pool, read_pools, set_pool
from zkstore.errors import ConfigError, HandleNotFound
from zkstore.jobs.runspec import DEFAULT_POOL
from zkstore.jobs.snapshot import read_listing, read_snapshots
from zkstore.protocol import FEATURES, POOLS

if TYPE_CHECKING:  # the commands import the cluster's stores when they run (not for --help)
    from zkstore.cluster import Cluster

COLUMNS = ["name", "max_running", "priority", "running", "waiting"]


@cli.group("pools")
def pools_group() -> None:
    """Pools: how many of a pool's jobs may run at once and which pool's jobs start first.

    A job names its pool with `zkstore submit --pool NAME`; one without is in `default`, which
    has no limit and priority 0 until set. The leader starts the waiting job of the highest
    priority first (first come, first served within a priority) and never runs more of a
    pool's jobs than its limit, counting attempts being launched and attempts lost but not yet
    replaced. Needs the fleet at protocol 4 (zkstore fleet status).
    """


@pools_group.command("set")
@click.argument("name")
@click.option(
    "--max-running",
    type=click.IntRange(0, 1_000_000),
    help="the most of the pool's jobs that run at once (0: none start) [default: kept, or no "
    "limit for a new pool]",
)
@click.option("--no-limit", is_flag=True, help="lift the pool's limit")
@click.option(
    "--priority",
    type=click.IntRange(0, MAX_PRIORITY),
    help=f"0-{MAX_PRIORITY}: the waiting jobs of a higher priority start first [default: kept, "
    "or 0 for a new pool]",
)
@connection_options
@format_option
def set_command(
    connection: Connection,
    fmt: str,
    name: str,
    max_running: int | None,
    no_limit: bool,
    priority: int | None,
) -> None:
    """Create pool NAME or change its limit or priority (what is not given keeps its value).
    The leader applies it at once to the jobs waiting; running jobs are never stopped."""
    if no_limit and max_running is not None:
        raise ConfigError("give --max-running or --no-limit, not both")
    from zkstore.cluster import Cluster

    with Cluster.open(connection.config) as cluster:
        fleet.require(cluster.zk, cluster.layout, FEATURES[POOLS])
        record = set_pool(
            cluster.zk,
            cluster.layout,
            name,
            max_running=max_running,
            priority=priority,
            no_limit=no_limit,
        )
    if fmt == "json":
        emit(record.view(), fmt)
        return
    click.echo(
        f"pool {record.name}: at most {record.limit_shown()} running, priority "
        f"{record.priority} (version {record.version})"
    )


@pools_group.command("list")
@connection_options
@format_option
def list_command(connection: Connection, fmt: str) -> None:
    """Every pool with its limit, priority and how many of its jobs run and wait now
    (`running` counts attempts being launched and attempts lost but not yet replaced)."""
    from zkstore.cluster import Cluster

    with Cluster.open(connection.config) as cluster:
        pools = read_pools(cluster.zk, cluster.layout)
        running, waiting = _counts(cluster)
    names = sorted(set(pools) | set(running) | set(waiting) | {DEFAULT_POOL})
    rows = [_row(pools.get(n), n, running[n], waiting[n]) for n in names]
    emit(rows, fmt, columns=COLUMNS)


@pools_group.command("show")
@click.argument("name")
@connection_options
@format_option
def show_command(connection: Connection, fmt: str, name: str) -> None:
    """One pool: its limit, priority, and how many of its jobs run and wait now."""
    from zkstore.cluster import Cluster

    with Cluster.open(connection.config) as cluster:
        pools = read_pools(cluster.zk, cluster.layout)
        if name not in pools and name != DEFAULT_POOL:
            raise HandleNotFound(f"no pool {name!r} (zkstore pools list)")
        running, waiting = _counts(cluster)
    emit(_row(pools.get(name), name, running[name], waiting[name]), fmt)


@pools_group.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="do it without asking")
@click.option("--dry-run", is_flag=True, help="say what would be deleted, delete nothing")
@connection_options
def delete_command(connection: Connection, name: str, yes: bool, dry_run: bool) -> None:
    """Delete pool NAME's record: its jobs then run as a pool without one (no limit,
    priority 0); jobs naming it keep their pool, and setting it again applies to them."""
    from zkstore.cluster import Cluster

    with Cluster.open(connection.config) as cluster:
        if dry_run:
            if name not in read_pools(cluster.zk, cluster.layout):
                raise HandleNotFound(f"no pool {name!r} (zkstore pools list)")
            click.echo(f"would delete pool {name}")
            return
        if not yes:
            click.confirm(f"delete pool {name}?", abort=True)
        record = delete_pool(cluster.zk, cluster.layout, name)
    click.echo(f"deleted pool {record.name}")


def _row(record: Pool | None, name: str, running: int, waiting: int) -> dict[str, Any]:
    return {
        "name": name,
        "max_running": None if record is None else record.max_running,
        "priority": 0 if record is None else record.priority,
        "running": running,
        "waiting": waiting,
    }


def _counts(cluster: Cluster) -> tuple[Counter[str], Counter[str]]:
    """Per pool, the jobs running (placed) and waiting (:func:`zkstore.cluster.pools.counts`)."""
    listing = read_listing(cluster.zk, cluster.layout, results=False)
    ids = set(listing.current_jobs) - set(listing.quarantine)
    return counts(read_snapshots(cluster.zk, cluster.layout, ids, listing=listing).values())
