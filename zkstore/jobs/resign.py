"""Re-signing a job's handles signed with the cluster key (before job keys) with the job's key.

Payloads written before job keys existed (:mod:`zkstore.signing`) carry a signature made with
the cluster key itself. Daemons, the command line and clients, which hold the cluster key,
accept it; a driver, which holds only its job's key, cannot. So before an attempt is launched,
its daemon re-signs the job's definition and checkpoint handles that carry such a signature:
the signature is a field of the handle in ZooKeeper (it signs the payload's key, sha256 and
size), so one conditional write of that small record does it and the payload is never touched.

Only a handle whose signature verifies with the cluster key, and whose payload lies under this
job's own prefix, is re-signed: nothing else gains a signature. Each write is conditional on the
version read and on the caller's fence (the attempt's status version): a handle that changed
meanwhile is left to whoever changed it. A crash between two writes leaves some handles re-signed
and the others as they were, both readable by every holder of the cluster key; the next launch
does the rest. Idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from zkstore.errors import CorruptHandle, HandleNotFound, UntrustedPayload, VersionConflict
from zkstore.layout import Layout, is_checkpoint_node_name
from zkstore.payloads.storage import StateStorage
from zkstore.payloads.store import is_marked
from zkstore.records.handle import Handle
from zkstore.signing import job_of
from zkstore.zookeeper.ops import Fence, SetData

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["resign_job"]

logger = logging.getLogger(__name__)


def resign_job(
    zk: ZooKeeper,
    layout: Layout,
    storage: StateStorage,
    cluster_id: str,
    job_id: str,
    *,
    fence: Fence | None = None,
) -> int:
    """Re-sign with ``job_id``'s key its definition and checkpoint handles that carry a
    cluster-key signature; returns how many were re-signed (0 at once without the cluster key).

    Raises :class:`~zkstore.errors.StoreUnavailable` in an outage and the fence's error if it
    is lost; a handle that is unreadable, changed or gone meanwhile is skipped.
    """
    signer = storage.signer
    if not signer.holds_cluster_key:
        return 0
    try:
        names = [n for n in zk.children(layout.checkpoints(job_id)) if is_checkpoint_node_name(n)]
    except HandleNotFound:
        names = []
    nodes = [f"{layout.checkpoints(job_id)}/{name}" for name in names]
    nodes.append(layout.job_handle(job_id))
    resigned = 0
    for node, found in zip(nodes, zk.get_many(nodes), strict=True):
        if found is None or is_marked(found[1]):
            continue
        try:
            handle = Handle.from_znode(found[0], found[1], node)
            key = storage.key_of(handle.uri)
        except (CorruptHandle, UntrustedPayload):
            continue  # whoever reads it meets it as it is, and reports it
        if job_of(key) != (cluster_id, job_id) or not signer.is_legacy(
            key, handle.sha256, handle.size, handle.hmac
        ):
            continue
        resigned_handle = replace(handle, hmac=signer.sign(key, handle.sha256, handle.size))
        try:
            zk.commit([SetData(node, resigned_handle.to_bytes(), found[1].version)], fence=fence)
        except (VersionConflict, HandleNotFound):
            continue
        resigned += 1
    if resigned:
        logger.info(
            "job %s: %d handle(s) signed with the cluster key re-signed with the job's key",
            job_id,
            resigned,
        )
    return resigned
