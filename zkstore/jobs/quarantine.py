"""Quarantine: a job whose definition cannot be read or verified is moved out of the way.

Moving a job to ``R/quarantine/<job>`` is one transaction: create the quarantine entry (reason,
time, and a copy of the handle, which keeps the payload referenced for forensics) and delete the
job's node from ``R/currentJobs`` with its locks. No other job is touched; recovery of every other
job goes on (invariant 6). An operator releases or purges a quarantined job
(:mod:`zkstore.cluster.triage`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zkstore.errors import (
    CorruptHandle,
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    NotEmpty,
    VersionConflict,
)
from zkstore.layout import Layout
from zkstore.payloads.store import ZooKeeperStateHandleStore
from zkstore.records.handle import Handle
from zkstore.records.record import short_error
from zkstore.records.result_records import QuarantineEntry
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.ops import Create, Fence, Op
from zkstore.zookeeper.retry import RACES, TryAgain

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["QuarantineStore"]

logger = logging.getLogger(__name__)


class QuarantineStore:
    """Move jobs into quarantine, read and list the entries."""

    def __init__(
        self, zk: ZooKeeper, layout: Layout, current_jobs: ZooKeeperStateHandleStore[Any]
    ) -> None:
        self.zk = zk
        self.layout = layout
        self.current_jobs = current_jobs

    def move_in(
        self,
        job_id: str,
        reason: str,
        *,
        fence: Fence | None = None,
        extra_ops: Sequence[Op] = (),
    ) -> QuarantineEntry:
        """Move ``job_id`` from currentJobs into quarantine with ``reason``; idempotent.
        ``extra_ops`` are committed with the move (the outbox entries of its notification).

        If the job is already quarantined, returns that entry. Raises the fence's error if the
        fence is lost.
        """

        def move_once() -> QuarantineEntry:
            existing = self.get(job_id)
            if existing is not None and self.zk.exists(self.layout.job_handle(job_id)) is None:
                return existing
            entry, ops = self._move_ops(job_id, reason, existing is not None)
            try:
                self.zk.commit([*ops, *extra_ops], fence=fence)
            except (HandleExists, HandleNotFound, NotEmpty, VersionConflict) as exc:
                raise TryAgain(str(exc)) from exc
            logger.warning("job %s quarantined: %s", job_id, reason)
            return entry.with_version(0)

        return RACES.call(move_once, what=f"quarantine of job {job_id}")

    def _move_ops(
        self, job_id: str, reason: str, entry_exists: bool
    ) -> tuple[QuarantineEntry, list[Op]]:
        handle: Handle | None = None
        raw: str | None = None
        ops: list[Op] = []
        found = self.current_jobs.removal_ops(job_id)
        if found is not None:
            data, stat, ops = found
            try:
                handle = Handle.from_znode(data, stat, self.layout.job_handle(job_id))
            except CorruptHandle:
                raw = short_error(data.decode("utf-8", errors="replace"))
        entry = QuarantineEntry(
            version=None,
            job_id=job_id,
            reason=short_error(reason) or "",
            since=utc_moment(),
            handle=handle,
            raw=raw,
        )
        if not entry_exists:
            ops.insert(0, Create(self.layout.quarantine_entry(job_id), entry.to_bytes()))
        return entry, ops

    def get(self, job_id: str) -> QuarantineEntry | None:
        path = self.layout.quarantine_entry(job_id)
        found = self.zk.get_if_exists(path)
        return None if found is None else QuarantineEntry.from_znode(*found, path)

    def all(self) -> tuple[list[QuarantineEntry], dict[str, str]]:
        """Every readable entry (pipelined reads) and, by job id, why the others could not be
        read: one garbage entry never hides the rest."""
        names = sorted(self.zk.children(self.layout.quarantine))
        found = self.zk.get_many([f"{self.layout.quarantine}/{n}" for n in names])
        entries: list[QuarantineEntry] = []
        unreadable: dict[str, str] = {}
        for name, item in zip(names, found, strict=True):
            if item is None:
                continue
            try:
                entries.append(
                    QuarantineEntry.from_znode(item[0], item[1], f"{self.layout.quarantine}/{name}")
                )
            except CorruptRecord as exc:
                unreadable[name] = str(exc)
        return entries, unreadable
