"""Quotas that ZooKeeper itself enforces on each job's node (``R/jobs/<job>``).

A job's identity may create nodes under its job's node (its driver's records appear and go
there), and ZooKeeper's CREATE right is per parent: the 64 KB limit of :mod:`zkstore.zookeeper.zk`
is the wrapper's, so job code using the kazoo client underneath could fill the server's heap. A hard
quota (ZOOKEEPER-3301, ZooKeeper 3.7+, server property ``zookeeper.enforceQuota=true``) on
each job's node bounds the nodes and bytes below it where the write lands, in the server: a
write past it is refused (:class:`~zkstore.errors.QuotaExceeded`) and nothing else is hurt.

A quota is ZooKeeper's own pair of nodes, as its ``setquota -N -B`` writes them::

    /zookeeper/quota/<R>/jobs/<job>/zookeeper_limits
            count=-1,bytes=-1,countHardLimit=N,byteHardLimit=B
    /zookeeper/quota/<R>/jobs/<job>/zookeeper_stats
            count=..,bytes=..  (the server keeps it)

The leader makes them in the transaction of the job's first placement (so no driver of the job
runs before its quota exists) and removes them with the job's records. They carry the cluster's
ACL, and so does the quota directory of the root's first segment (``/zookeeper/quota/zkstore``
for ``/zkstore/default``), so that no job can set a quota over the cluster's own nodes (a quota
of one node on ``R/currentJobs`` would refuse every submission). A server without
``enforceQuota`` only logs a quota's excess: :func:`probe` tells (``zkstore fleet status``).

The size (:func:`job_quota`) is what the job's records can legally take, twice over: every
record under its node at the wrapper's limit, the checkpoints kept with one being added and
one being subsumed (with their locks), and its artifacts at their count limit.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kazoo.security import ACL, Id, Permissions

from zkstore.errors import AccessDenied, HandleNotFound, QuotaExceeded, ZkStoreError
from zkstore.jobs.checkpoints import DEFAULT_RETAIN
from zkstore.jobs.job_artifacts import MAX_ARTIFACTS
from zkstore.layout import Layout
from zkstore.records.handle import MAX_HANDLE_BYTES
from zkstore.records.record import MAX_RECORD_BYTES
from zkstore.zookeeper.ops import Create, Op

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "QUOTA_ROOT",
    "JobQuota",
    "Quotas",
    "job_quota",
    "nodes",
    "probe",
    "quota_dir",
]

logger = logging.getLogger(__name__)

QUOTA_ROOT = "/zookeeper/quota"
LIMITS = "zookeeper_limits"
STATS = "zookeeper_stats"

#: Records directly under a job's node, each at most once (status, running, spark, outcome,
#: cancel, history, control, stop, end, heartbeat, control-ack, control-keys, resources, the
#: checkpoints', the artifacts' and the outputs' directories: 16 today; and the pins of cancel,
#: stop and end, zkstore.jobs.request_pins: 19), with room for a few more.
RECORDS = 24
#: Locks one checkpoint's handle may hold at once (store instances reading it).
LOCKS_PER_CHECKPOINT = 4
#: An artifact's record: a URI of at most 512 bytes, its name and a few fields.
ARTIFACT_RECORD_BYTES = 4096
#: What a quota allows beyond what the records can legally take.
MARGIN = 2


@dataclass(frozen=True)
class JobQuota:
    """The hard limits of one job's node: nodes (itself included) and bytes of data."""

    nodes: int
    #: bytes of data (-1: no limit)
    size: int

    def limits(self) -> bytes:
        """The ``zookeeper_limits`` node's data, as ZooKeeper's ``StatsTrack`` writes it (the
        soft limits off: -1)."""
        return f"count=-1,bytes=-1,countHardLimit={self.nodes},byteHardLimit={self.size}".encode()


def job_quota(retain: int = DEFAULT_RETAIN) -> JobQuota:
    """The quota of a job whose checkpoints keep ``retain`` (see the module)."""
    checkpoints = retain + 2  # the kept ones, one being added, one being subsumed
    nodes = 1 + RECORDS + checkpoints * (1 + LOCKS_PER_CHECKPOINT) + MAX_ARTIFACTS
    data = (
        RECORDS * MAX_RECORD_BYTES
        + checkpoints * MAX_HANDLE_BYTES
        + MAX_ARTIFACTS * ARTIFACT_RECORD_BYTES
    )
    return JobQuota(nodes=nodes * MARGIN, size=data * MARGIN)


def quota_dir(path: str) -> str:
    """Where ZooKeeper keeps the quota of ``path``."""
    return f"{QUOTA_ROOT}{path}"


def create_ops(layout: Layout, job_id: str, quota: JobQuota) -> list[Op]:
    """Make the job's quota (after its node, in the same transaction: the server counts what
    is under the node when the stats node is made)."""
    where = quota_dir(layout.job_dir(job_id))
    return [
        Create(where),
        Create(f"{where}/{LIMITS}", quota.limits()),
        Create(f"{where}/{STATS}", b"count=0,bytes=0"),
    ]


def optional_paths(layout: Layout, job_id: str) -> set[str]:
    """The nodes of :func:`create_ops` a transaction may do without when they exist already
    (a quota kept since an earlier job of the id, or made by a placement that was cut short)."""
    where = quota_dir(layout.job_dir(job_id))
    return {where, f"{where}/{LIMITS}", f"{where}/{STATS}"}


def nodes(layout: Layout, job_id: str) -> tuple[str, ...]:
    """The job's quota nodes, children first: what goes with its records
    (:meth:`~zkstore.zookeeper.zk.ZooKeeper.delete_tree`'s ``also``)."""
    where = quota_dir(layout.job_dir(job_id))
    return (f"{where}/{STATS}", f"{where}/{LIMITS}", where)


class Quotas:
    """The leader's side of the quotas, prepared once per leadership (:meth:`ready`): the
    directory their nodes go in, and ``/zookeeper/quota`` closed to anybody but the cluster."""

    def __init__(self, zk: ZooKeeper, layout: Layout, quota: JobQuota | None = None) -> None:
        self._zk = zk
        self._layout = layout
        self.quota = quota or job_quota()
        self._ready: bool | None = None
        try:  # now, at the leadership's start, rather than within its first placement
            self.ready()
        except ZkStoreError as exc:
            logger.warning("ZooKeeper quotas not prepared yet (%s): trying again later", exc)

    def ready(self) -> bool:
        """True once the quotas' directory is there; False (logged once) if it cannot be made
        (``/zookeeper/quota`` closed to this identity by another): jobs then run without."""
        if self._ready is None:
            try:
                self._zk.ensure_path(quota_dir(self._layout.jobs))
                self._close(quota_dir(self._top()))
                self._ready = True
            except (AccessDenied, HandleNotFound) as exc:
                logger.warning(
                    "jobs run without ZooKeeper quotas: %s (give %s an ACL for this cluster's "
                    "identity; docs/operating.md)",
                    exc,
                    QUOTA_ROOT,
                )
                self._ready = False
        return self._ready

    def _top(self) -> str:
        """The first segment of the cluster's root (``/zkstore`` of ``/zkstore/default``)."""
        return "/" + self._layout.base.strip("/").split("/", 1)[0]

    def _close(self, path: str) -> None:
        """Only the cluster may create quotas over its own nodes: the quota directory of its
        root's first segment is the cluster's (a quota set there by a job would bound the
        whole root). ``ensure_path`` made it with the cluster's ACL; one made earlier by
        somebody else open to anybody is closed. Only with credentials: without, every client
        is everybody."""
        own = self._zk.acl
        if not own:
            return
        acls, stat = self._zk.get_acls(path)
        anyone = Id("world", "anyone")
        if all(acl.id != anyone or acl.perms == Permissions.READ for acl in acls):
            return
        self._zk.set_acls(path, [*own, ACL(Permissions.READ, anyone)], version=stat.aversion)
        logger.warning("%s was open to anybody: closed to this cluster's identity", path)


def probe(zk: ZooKeeper, layout: Layout) -> bool | None:
    """Whether the ensemble enforces quotas: a node of its own with a quota of one node, and a
    child tried under it. True: refused (enforced); False: made (not enforced: a quota only
    logs); None: could not tell (no rights to make the probe). Leaves nothing behind."""
    node = f"{layout.base}/quota-probe-{uuid.uuid4().hex[:12]}"
    where = quota_dir(node)
    made: list[str] = []
    try:
        zk.create(node)
        made.append(node)
        zk.ensure_path(where)
        made.append(where)
        zk.commit(
            [
                Create(f"{where}/{LIMITS}", JobQuota(nodes=1, size=-1).limits()),
                Create(f"{where}/{STATS}", b"count=0,bytes=0"),
            ]
        )
        try:
            zk.create(f"{node}/child")
        except QuotaExceeded:
            return True
        return False
    except AccessDenied:
        return None
    finally:
        for path in reversed(made):
            try:
                zk.delete_tree(path)
            except ZkStoreError as exc:
                logger.warning("the quota probe %s is left behind: %s", path, exc)
