"""Checkpoints of one job: JSON metadata in storage, handles under ``R/jobs/<job>/checkpoints``.

Checkpoint ids grow monotonically (``%019d`` node names sort like numbers). A new checkpoint is
published before older ones are subsumed, so a failed add keeps every older checkpoint and the
latest one is never lost. Writes take a fence: a driver fences them on its own ``running`` node
and on the status version of its attempt, so a stale attempt cannot write a checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from zkstore.errors import ConfigError, HandleExists, HandleNotFound, ZkStoreError
from zkstore.layout import (
    Layout,
    StorageLayout,
    checkpoint_node_name,
    is_checkpoint_node_name,
    validate_job_id,
)
from zkstore.payloads.serializers import JsonSerializer
from zkstore.payloads.storage import StateStorage
from zkstore.payloads.store import ZooKeeperStateHandleStore
from zkstore.records.handle import Handle, SummaryValue
from zkstore.zookeeper.ops import Fence, Op
from zkstore.zookeeper.retry import RACES, TryAgain

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["DEFAULT_RETAIN", "Checkpoint", "CheckpointStore"]

logger = logging.getLogger(__name__)

DEFAULT_RETAIN = 3


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint: its id, metadata and handle (with the znode version)."""

    job_id: str
    checkpoint_id: int
    metadata: Any
    handle: Handle

    @property
    def created(self) -> datetime:
        return self.handle.created

    @property
    def summary(self) -> Mapping[str, SummaryValue]:
        return self.handle.summary


class CheckpointStore:
    """Add, read and retain the checkpoints of one job."""

    def __init__(
        self,
        zk: ZooKeeper,
        layout: Layout,
        storage: StateStorage,
        storage_layout: StorageLayout,
        job_id: str,
        *,
        retain: int = DEFAULT_RETAIN,
        instance_id: str | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        if retain < 1:
            raise ConfigError("checkpoint retention must keep at least 1")
        self.job_id = validate_job_id(job_id)
        self.retain = retain
        self.path = layout.checkpoints(job_id)
        self.zk = zk
        self.handles: ZooKeeperStateHandleStore[Any] = ZooKeeperStateHandleStore(
            zk,
            self.path,
            storage,
            JsonSerializer(),
            payload_prefix=lambda _name: storage_layout.checkpoints(job_id),
            instance_id=instance_id,
            on_step=on_step,
        )

    def _all_ids(self) -> list[int]:
        """Every checkpoint id with a node, marked ones included (ids are never reused)."""
        try:
            names = self.zk.children(self.path)
        except HandleNotFound:
            return []
        return sorted(int(n) for n in names if is_checkpoint_node_name(n))

    def ids(self) -> list[int]:
        """Ids of the live checkpoints, oldest first."""
        return sorted(int(n) for n in self.handles.names() if is_checkpoint_node_name(n))

    def add(
        self,
        metadata: Any,
        *,
        fence: Fence | None = None,
        summary: Mapping[str, SummaryValue] | None = None,
        with_ops: Callable[[int], Sequence[Op]] | None = None,
    ) -> Checkpoint:
        """Publish a checkpoint with the next id, then subsume all but the newest ``retain``.

        ``summary`` adds small scalar fields to the handle (the control version the checkpoint
        was taken under), readable without the metadata. ``with_ops(checkpoint_id)`` gives ops
        committed in the checkpoint's own transaction (the outputs it commits): all or
        nothing. Raises the fence's error if the fence is lost (nothing published, payload
        discarded); a failure while subsuming older checkpoints is logged and left to cleanup,
        never raised.
        """
        self.zk.ensure_path(self.path)

        def add_once() -> Checkpoint:
            ids = self._all_ids()
            checkpoint_id = (ids[-1] + 1) if ids else 1
            name = checkpoint_node_name(checkpoint_id)
            try:
                handle = self.handles.add(
                    name,
                    metadata,
                    summary={
                        **(summary or {}),
                        "checkpoint_id": checkpoint_id,
                        "job_id": self.job_id,
                    },
                    fence=fence,
                    stem=f"{checkpoint_id}-",
                    with_ops=with_ops(checkpoint_id) if with_ops is not None else (),
                )
            except HandleExists as exc:
                if exc.path != self.handles.node(name):
                    raise
                # another writer took this id (only without a fence): take the next
                raise TryAgain(str(exc)) from exc
            self._subsume(fence)
            return Checkpoint(self.job_id, checkpoint_id, metadata, handle)

        return RACES.call(
            add_once, what=f"a free checkpoint id under {self.path}", error=HandleExists
        )

    def _subsume(self, fence: Fence | None) -> None:
        live = self.ids()
        for old in live[: max(0, len(live) - self.retain)]:
            try:
                self.handles.remove(checkpoint_node_name(old), fence=fence)
            except ZkStoreError as exc:
                logger.warning("could not subsume checkpoint %s of %s: %s", old, self.job_id, exc)

    def latest(self) -> Checkpoint | None:
        """The newest checkpoint with verified metadata, or None if there is none.

        A corrupt or missing newest checkpoint raises: silently resuming from an older one could
        redo or skip work.
        """
        for checkpoint_id in reversed(self.ids()):
            try:
                entry = self.handles.get(checkpoint_node_name(checkpoint_id), lock=False)
            except HandleNotFound:
                continue  # subsumed meanwhile; a newer one exists
            return Checkpoint(self.job_id, checkpoint_id, entry.state, entry.handle)
        return None

    def newest_handle(self) -> Handle | None:
        """The handle of the newest live checkpoint (its summary), without reading metadata."""
        found = self.all()
        return found[-1][1] if found else None

    def all(self) -> list[tuple[int, Handle]]:
        """Ids and handles of the live checkpoints, oldest first, without reading payloads."""
        good, _ = self.handles.handles()
        return sorted((int(name), handle) for name, handle in good if is_checkpoint_node_name(name))

    def remove_all(self, *, fence: Fence | None = None) -> bool:
        """Remove every checkpoint (idempotent); False while one is locked by someone else."""
        done = True
        for checkpoint_id in self._all_ids():
            done &= self.handles.remove(checkpoint_node_name(checkpoint_id), fence=fence)
        return done
