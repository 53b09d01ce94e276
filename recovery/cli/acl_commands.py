"""ZooKeeper access commands: ``zkstore acl check | apply | digest``.

Each command imports the client it uses (``acl --help`` imports none)."""

from __future__ import annotations

import click

from recovery.cli.base import Connection, OperationFailed, UsageFailure, cli, connection_options
from recovery.cli.output import emit, format_option


@cli.group()
def acl() -> None:
    """Who may read and change the cluster's ZooKeeper nodes.

    With ZKSTORE_ZK_AUTH set, every node zkstore creates carries an ACL: all rights for that
    identity, read for the --zk-read-acl ids, nothing for anyone else.
    """


@acl.command("check")
@connection_options
@format_option
def check(connection: Connection, fmt: str) -> None:
    """Show the ACL of the cluster root and its parents; exit 1 if anyone may change them."""
    from zkstore.admin.acl import check_cluster_root, describe_open
    from zkstore.cluster import Cluster

    with Cluster.open(connection.config) as cluster:
        nodes = check_cluster_root(cluster.zk, cluster.layout)
    rows = [n.to_json() for n in nodes]
    emit(rows, fmt, columns=["path", "acl", "open"], empty="no cluster root yet")
    if any(n.is_open for n in nodes):
        raise OperationFailed(describe_open(nodes))


@acl.command("apply")
@connection_options
@click.option("--dry-run", is_flag=True, help="only count the nodes whose ACL would change")
@click.option("--yes", is_flag=True, help="really replace the ACLs")
def apply(connection: Connection, dry_run: bool, yes: bool) -> None:
    """Put the configured ACL on every node under the cluster root (not on its parents).

    For a cluster created before credentials were configured: its old nodes are open to anyone
    until this runs. Idempotent. Run it with the credentials every zkstore process will use.
    """
    if dry_run == yes:
        raise UsageFailure("give exactly one of --dry-run or --yes")
    from zkstore.admin.acl import apply_acl
    from zkstore.cluster import Cluster

    with Cluster.open(connection.config) as cluster:
        result = apply_acl(cluster.zk, cluster.layout, dry_run=dry_run)
    verb = "would change" if dry_run else "changed"
    click.echo(f"{result.checked} node(s) checked, {verb} the ACL of {result.changed}")


@acl.command("digest")
@click.argument("user")
def digest(user: str) -> None:
    """Print the ZooKeeper id of USER's password (digest:USER:HASH), for --zk-read-acl.

    The password is read from the terminal (or the first line of standard input); only its
    hash is printed.
    """
    from kazoo.security import make_digest_acl_credential

    password = click.prompt(f"password of {user}", hide_input=True, err=True)
    click.echo(f"digest:{make_digest_acl_credential(user, password)}")
