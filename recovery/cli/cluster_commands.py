"""``zkstore cluster settings``: the bounds and policies the cluster's leader enforces, as it
published them (:mod:`zkstore.cluster.cluster_settings`)."""

from __future__ import annotations

import click

from recovery.cli.base import Connection, cli, connection_options
from recovery.cli.output import emit, format_option
from zkstore.errors import HandleNotFound


@cli.group("cluster")
def cluster_group() -> None:
    """The cluster as a whole: the settings its leader enforces."""


@cluster_group.command("settings")
@connection_options
@format_option
def settings_command(connection: Connection, fmt: str) -> None:
    """The bounds and policies the leader enforces, as it published them: the shortest
    interval between a schedule's windows, where notifications may go, how many of a job's
    wait at most... Every command that makes or changes a job or a schedule checks against
    them; each is set by the daemon flag shown beside it (the leader's flags are in force),
    and the daemons whose own flags differ are named here and in `zkstore fleet status`.

    Exit 4 while no leader of fleet protocol 4 or above has published them (clients then
    check against their own environment, as before).
    """
    from zkstore.cluster import Cluster
    from zkstore.cluster import fleet_protocol as fleet
    from zkstore.cluster.cluster_settings import (
        POLICY_FIELDS,
        differing,
        key_for,
        read_settings,
        view,
    )

    with Cluster.open(connection.config) as cluster:
        record = read_settings(cluster.zk, cluster.layout, key=key_for(connection.config))
        if record is None:
            raise HandleNotFound(
                "no leader has published the cluster's settings yet (a daemon of fleet protocol "
                "4 publishes them when it leads, once the fleet is finalized at 4: zkstore fleet "
                "status)",
                path=cluster.layout.settings,
            )
        members, _ = fleet.live_members(cluster.zk, cluster.layout)
    differ = differing(record, members)
    data = view(record, differ)
    if fmt == "json":
        emit(data, fmt)
        return
    rows = [
        {"setting": name, "value": data["settings"][name], "set by": flag}
        for name, flag in POLICY_FIELDS.items()
    ]
    emit(data, fmt, rows=rows, columns=["setting", "value", "set by"])
    signed = "signed" if record.signature is not None else "not signed (no signing key)"
    click.echo(f"published by leader {record.leader_id} at {record.written}; {signed}")
    if differ:
        click.echo(
            f"daemons whose own settings differ (the leader's are in force): {', '.join(differ)}"
        )
