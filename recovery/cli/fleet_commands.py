"""The fleet's protocol: ``zkstore fleet status | finalize``.

A rolling upgrade leaves the fleet at its old protocol: the new daemons run it, so that the old
ones read everything that is written and a downgrade stays possible. Once every daemon runs the
new release, ``fleet finalize`` raises the protocol and the new release's features may be used
(:mod:`zkstore.cluster.fleet_protocol`; docs/operating.md "Upgrading").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from recovery.cli.base import Connection, UsageFailure, cli, connection_options
from recovery.cli.output import emit, format_option
from zkstore import protocol

if TYPE_CHECKING:  # each command imports the stores it uses: ``fleet --help`` imports none
    from zkstore.cluster import fleet_protocol as fleet


@cli.group("fleet")
def fleet_group() -> None:
    """The fleet's protocol: which daemons run which release, and finalizing an upgrade.

    Each daemon speaks a fleet protocol (`zkstore --version` says which); the cluster is
    finalized at one. Features of a newer protocol are refused (exit 9) until every live
    daemon speaks it and `zkstore fleet finalize` has run; after that, a daemon of an older
    protocol refuses to start (no downgrade past a finalization).
    """


@fleet_group.command("status")
@connection_options
@format_option
def status_command(connection: Connection, fmt: str) -> None:
    """Each live daemon's release and protocol, the fleet's protocol, and whether it can be
    finalized to a newer one; and whether the ZooKeeper ensemble enforces the quota of each
    job's nodes (a probe: a node with a quota of one node, and a child tried under it)."""
    from zkstore.cluster import Cluster, quotas
    from zkstore.cluster import fleet_protocol as fleet

    with Cluster.open(connection.config) as cluster:
        found = fleet.status(cluster.zk, cluster.layout)
        enforced = quotas.probe(cluster.zk, cluster.layout)
    data = {**found.as_dict(), "quotas_enforced": enforced}
    if fmt == "json":
        emit(data, fmt)
        return
    rows = [{**d, "release": d["release"] or "before 0.2.0"} for d in data["daemons"]]
    emit(
        data,
        fmt,
        rows=rows,
        columns=["daemon_id", "host", "release", "protocol", "min_protocol"],
        empty="no live daemon",
    )
    click.echo(_summary(found))
    if found.differing:
        click.echo(
            "settings differ from the leader's on "
            + ", ".join(m.daemon_id for m in found.differing)
            + " (the leader's are in force: zkstore cluster settings shows them; give every "
            "daemon the same --schedule-* and --notify-* flags)"
        )
    click.echo(_quotas(enforced))


def _quotas(enforced: bool | None) -> str:
    if enforced:
        return "ZooKeeper quotas: enforced (each job's nodes and bytes are bounded)"
    if enforced is None:
        return "ZooKeeper quotas: unknown (this identity may not make the probe)"
    return (
        "ZooKeeper quotas: NOT enforced: a job's code can write past its quota and exhaust "
        "ZooKeeper (set enforceQuota=true on every server; docs/operating.md)"
    )


def _summary(found: fleet.FleetStatus) -> str:
    line = f"fleet protocol {found.current}"
    if found.target is not None:
        line += f" (a finalization to {found.target} was cut short: run zkstore fleet finalize)"
    if found.common > found.current:
        return f"{line}; every live daemon speaks {found.common}: zkstore fleet finalize raises it"
    behind = found.behind
    if behind:
        names = ", ".join(m.daemon_id for m in behind[:5])
        spoken = protocol.PROTOCOL
        return f"{line}; {len(behind)} daemon(s) speak less than {spoken} ({names}): upgrade them"
    return f"{line}; up to date"


@fleet_group.command("finalize")
@connection_options
@click.option("--dry-run", is_flag=True, help="only say what would be finalized")
@click.option("--yes", is_flag=True, help="really finalize (no downgrade past this)")
def finalize_command(connection: Connection, dry_run: bool, yes: bool) -> None:
    """Raise the fleet's protocol to the one this release speaks.

    Refused (exit 9) while a live daemon speaks less, naming it. Afterwards the new
    protocol's features may be used, and a daemon of an older release refuses to start: a
    downgrade is possible only until this runs.
    """
    if dry_run == yes:
        raise UsageFailure("give exactly one of --dry-run or --yes")
    from zkstore.cluster import Cluster
    from zkstore.cluster import fleet_protocol as fleet

    with Cluster.open(connection.config) as cluster:
        if dry_run:
            found = fleet.status(cluster.zk, cluster.layout)
            if found.behind and found.current < protocol.PROTOCOL:
                fleet.check_spoken(found, protocol.PROTOCOL)  # raises, naming the daemons behind
            if found.current < protocol.PROTOCOL:
                target, now = protocol.PROTOCOL, found.current
                click.echo(f"would finalize the fleet at protocol {target} (now {now})")
            else:
                click.echo(_summary(found))
            return
        done = fleet.finalize(cluster.zk, cluster.layout)
    if done.after == done.before:
        click.echo(f"the fleet is at protocol {done.after} already: nothing to finalize")
    else:
        click.echo(f"fleet finalized at protocol {done.after} (was {done.before})")
