"""Who may touch a cluster's nodes: find ACLs open to anyone, and put ours on every node.

A node whose ACL grants ``world:anyone`` write, create, delete or admin rights lets anybody who
reaches ZooKeeper change the cluster: create a handle under ``currentJobs`` (code the leader will
run), delete a result (a finished job runs again), or rewrite a status. Nodes created by a
session with credentials carry :func:`zkstore.zookeeper.zk.default_acl`; nodes created before
credentials were configured keep the open ACL until :func:`apply_acl` replaces it.

Rendered ACL entries never show a digest hash: ``digest:alice=cdrwa``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kazoo.security import ACL, Permissions

from zkstore.errors import ConfigError, HandleNotFound
from zkstore.jobs.claims import ArtifactClaims
from zkstore.layout import Layout

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "ApplyResult",
    "NodeAcl",
    "apply_acl",
    "check_cluster_root",
    "describe_open",
    "grant_job",
    "open_rights",
    "read_node_acl",
    "render",
    "walk",
]

_LETTERS = (
    (Permissions.CREATE, "c"),
    (Permissions.DELETE, "d"),
    (Permissions.READ, "r"),
    (Permissions.WRITE, "w"),
    (Permissions.ADMIN, "a"),
)
_MUTATIONS = (
    (Permissions.CREATE, "create"),
    (Permissions.DELETE, "delete"),
    (Permissions.WRITE, "write"),
    (Permissions.ADMIN, "admin"),
)


def render(entry: ACL) -> str:
    """``scheme:id=perms`` with the digest hash left out."""
    ident = entry.id.id.split(":", 1)[0] if entry.id.scheme == "digest" else entry.id.id
    letters = "".join(letter for bit, letter in _LETTERS if entry.perms & bit)
    return f"{entry.id.scheme}:{ident}={letters}"


def open_rights(acl: Sequence[ACL]) -> list[str]:
    """The mutations ``acl`` grants to anyone (``world:anyone``), e.g. ``["create", "write"]``."""
    perms = 0
    for entry in acl:
        if entry.id.scheme == "world" and entry.id.id == "anyone":
            perms |= entry.perms
    return [name for bit, name in _MUTATIONS if perms & bit]


@dataclass(frozen=True)
class NodeAcl:
    """One node's ACL as found."""

    path: str
    acl: tuple[str, ...]
    open_to_anyone: tuple[str, ...]

    @property
    def is_open(self) -> bool:
        return bool(self.open_to_anyone)

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "acl": list(self.acl), "open": list(self.open_to_anyone)}


def read_node_acl(zk: ZooKeeper, path: str) -> NodeAcl | None:
    """The ACL of ``path``, or None if it does not exist."""
    try:
        acl, _ = zk.get_acls(path)
    except HandleNotFound:
        return None
    return NodeAcl(path, tuple(render(e) for e in acl), tuple(open_rights(acl)))


def check_cluster_root(zk: ZooKeeper, layout: Layout) -> list[NodeAcl]:
    """The ACLs of the cluster root and its persistent parents (``currentJobs``, ``jobs``...).

    These decide who can add or change anything; a node open to anyone here is a finding.
    Raises :class:`~zkstore.errors.AccessDenied` if our identity may not even read them.
    """
    paths = (layout.base, f"{layout.base}/leader", *layout.base_paths())
    found = (read_node_acl(zk, path) for path in paths)
    return [node for node in found if node is not None]


def describe_open(nodes: Sequence[NodeAcl]) -> str:
    """One line about the open nodes, for logs and errors."""
    opened = [n for n in nodes if n.is_open]
    shown = ", ".join(f"{n.path} ({'/'.join(n.open_to_anyone)})" for n in opened[:3])
    more = f" and {len(opened) - 3} more" if len(opened) > 3 else ""
    return (
        f"ZooKeeper ACL lets anyone change this cluster: {shown}{more}; anybody who reaches "
        "ZooKeeper, any job's code included, can submit code to run, erase results or write "
        "another job's records. Set ZKSTORE_ZK_AUTH and run 'zkstore acl apply --yes'"
    )


def walk(zk: ZooKeeper, top: str) -> Iterator[str]:
    """Every node under ``top`` (``top`` included), parents before children, level by level."""
    level = [top] if zk.exists(top) is not None else []
    while level:
        yield from level
        found = zk.children_many(level)
        level = [
            f"{parent}/{child}"
            for parent, kids in zip(level, found, strict=True)
            if kids
            for child in kids
        ]


@dataclass(frozen=True)
class ApplyResult:
    checked: int
    changed: int


def apply_acl(
    zk: ZooKeeper,
    layout: Layout,
    *,
    dry_run: bool = False,
    on_node: Callable[[str, bool], None] | None = None,
) -> ApplyResult:
    """Give every node under the cluster root the session's ACL (:attr:`ZooKeeper.acl`).

    Idempotent: run it again after any failure. The root's parents (shared with other clusters)
    are left alone. A node that vanishes meanwhile is skipped; one we may not administer raises
    :class:`~zkstore.errors.AccessDenied`.
    """
    if zk.acl is None:
        raise ConfigError("no credentials configured (ZKSTORE_ZK_AUTH): there is no ACL to apply")
    checked = changed = 0
    claims = ArtifactClaims(zk, layout)
    for path in walk(zk, layout.base):
        # a claim and its place's node stay their job's (zkstore.zookeeper.identity)
        owner = claims.owner(path) if claims.is_claim_path(path) else None
        wanted = zk.acl if zk.acl_policy is None else zk.acl_policy.acl_for(path, owner)
        try:
            acl, stat = zk.get_acls(path)
            differs = sorted(map(repr, acl)) != sorted(map(repr, wanted))
            if differs and not dry_run:
                zk.set_acls(path, wanted, version=stat.aversion)
        except HandleNotFound:
            continue
        checked += 1
        changed += differs
        if on_node is not None:
            on_node(path, differs)
    return ApplyResult(checked, changed)


def grant_job(zk: ZooKeeper, layout: Layout, job_id: str) -> int:
    """Give the nodes of ``job_id`` that were made before per-job identities (a fleet below
    protocol 3, :mod:`zkstore.zookeeper.identity`) the ACL they get now, so that its driver, with
    its job's identity, can write its own records there. Returns how many were changed (0 when
    the job's directory grants the job already: everything since was made with it).

    Idempotent; a node that goes meanwhile is skipped, one changed meanwhile set again.
    """
    policy = zk.acl_policy
    if policy is None:
        return 0
    job = policy.job_entry(job_id)
    top = layout.job_dir(job_id)
    try:
        acl, _ = zk.get_acls(top)
    except HandleNotFound:
        return 0  # made by the leader's placement, with the policy
    if any(entry.id == job for entry in acl):
        return 0
    changed = 0
    locks = f"{layout.job_handle(job_id)}/locks"
    for path in [*walk(zk, top), *walk(zk, locks)]:
        try:
            acl, stat = zk.get_acls(path)
            wanted = policy.acl_for(path)
            if sorted(map(repr, acl)) != sorted(map(repr, wanted)):
                zk.set_acls(path, wanted, version=stat.aversion)
                changed += 1
        except HandleNotFound:
            continue
    return changed
