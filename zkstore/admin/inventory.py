"""Everything under a cluster's root, read in a few rounds of pipelined requests.

The inventory is what the operator commands stand on: every handle (job definitions, checkpoints,
the copies kept in quarantine entries), every job record tree, every result. It never reads a
payload; :func:`verify` does, and never unpickles one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zkstore.errors import (
    CorruptRecord,
    NewerRecord,
    StoreUnavailable,
    UntrustedPayload,
    ZkStoreError,
)
from zkstore.layout import Layout, StorageLayout
from zkstore.payloads.storage import StateStorage
from zkstore.payloads.store import LOCKS, is_marked
from zkstore.records.handle import Handle
from zkstore.records.result_records import JobResult, QuarantineEntry

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "CHECKPOINT",
    "JOB",
    "QUARANTINED",
    "HandleRecord",
    "Inventory",
    "JobTree",
    "Problem",
    "check_handle",
    "payload_prefix",
    "read_inventory",
    "verify",
]

JOB = "job"
CHECKPOINT = "checkpoint"
QUARANTINED = "quarantined"


@dataclass(frozen=True)
class HandleRecord:
    """One handle found under the root (``handle`` is None when the znode holds garbage)."""

    path: str
    kind: str
    job_id: str
    name: str
    handle: Handle | None
    version: int
    marked: bool
    mtime: float
    error: str | None = None
    locks: tuple[str, ...] | None = None
    #: written at a newer fleet protocol than this code speaks: not damage, left alone
    newer: bool = False


@dataclass(frozen=True)
class JobTree:
    """``R/jobs/<job>``: its children and the newest change time among them (seconds)."""

    job_id: str
    children: tuple[str, ...]
    newest: float


@dataclass
class Inventory:
    handles: list[HandleRecord] = field(default_factory=list)
    trees: dict[str, JobTree] = field(default_factory=dict)
    results: dict[str, JobResult] = field(default_factory=dict)
    quarantine: dict[str, QuarantineEntry] = field(default_factory=dict)
    current_jobs: set[str] = field(default_factory=set)
    record_errors: dict[str, str] = field(default_factory=dict)
    #: jobs with a handle or record written at a newer fleet protocol: what they reference
    #: cannot be told here, so nothing of theirs is lingering (a newer zkstore decides)
    newer_jobs: set[str] = field(default_factory=set)

    def referenced_uris(self) -> set[str]:
        """Every payload URI a handle points at, marked and quarantined handles included."""
        return {r.handle.uri for r in self.handles if r.handle is not None}


def _children(zk: ZooKeeper, paths: list[str]) -> list[list[str]]:
    return [found or [] for found in zk.children_many(paths)]


def read_inventory(zk: ZooKeeper, layout: Layout, *, with_locks: bool = False) -> Inventory:
    """Read every handle and job record under ``layout``'s root (pipelined; no payloads)."""
    inventory = Inventory()
    current, job_dirs, results, quarantined = _children(
        zk, [layout.current_jobs, layout.jobs, layout.results, layout.quarantine]
    )
    inventory.current_jobs = set(current)
    job_dir_paths = [f"{layout.jobs}/{j}" for j in job_dirs]
    tree_children = _children(zk, job_dir_paths)
    checkpoint_parents = [
        (job, f"{layout.jobs}/{job}/checkpoints")
        for job, kids in zip(job_dirs, tree_children, strict=True)
        if "checkpoints" in kids
    ]
    checkpoint_names = _children(zk, [p for _, p in checkpoint_parents])
    nodes: list[tuple[str, str, str, str]] = [
        (JOB, job, job, f"{layout.current_jobs}/{job}") for job in current
    ]
    for (job, parent), names in zip(checkpoint_parents, checkpoint_names, strict=True):
        nodes += [(CHECKPOINT, job, name, f"{parent}/{name}") for name in names]
    _read_handles(zk, inventory, nodes, with_locks)
    _read_trees(zk, inventory, job_dirs, tree_children, layout)
    _read_records(zk, inventory, layout, results, quarantined)
    return inventory


def _read_handles(
    zk: ZooKeeper, inventory: Inventory, nodes: list[tuple[str, str, str, str]], with_locks: bool
) -> None:
    found = zk.get_many([path for *_, path in nodes])
    locks = _children(zk, [f"{p}/{LOCKS}" for *_, p in nodes]) if with_locks else None
    for i, ((kind, job, name, path), item) in enumerate(zip(nodes, found, strict=True)):
        if item is None:
            continue  # removed meanwhile
        data, stat = item
        handle, error, newer = None, None, False
        try:
            handle = Handle.from_znode(data, stat, path)
        except CorruptRecord as exc:  # CorruptHandle, or NewerRecord
            error, newer = str(exc), isinstance(exc, NewerRecord)
        if newer:
            inventory.newer_jobs.add(job)
        inventory.handles.append(
            HandleRecord(
                path=path,
                kind=kind,
                job_id=job,
                name=name,
                handle=handle,
                version=stat.version,
                marked=is_marked(stat),
                mtime=stat.mtime / 1000.0,
                error=error,
                locks=tuple(locks[i]) if locks is not None else None,
                newer=newer,
            )
        )


def _read_trees(
    zk: ZooKeeper,
    inventory: Inventory,
    job_dirs: list[str],
    tree_children: list[list[str]],
    layout: Layout,
) -> None:
    paths = [
        f"{layout.jobs}/{job}/{child}"
        for job, kids in zip(job_dirs, tree_children, strict=True)
        for child in kids
    ]
    stats = iter(zk.exists_many(paths))
    tops = zk.exists_many([f"{layout.jobs}/{job}" for job in job_dirs])
    for job, kids, top in zip(job_dirs, tree_children, tops, strict=True):
        times = [top.mtime / 1000.0] if top is not None else []
        for _ in kids:
            stat = next(stats)
            if stat is not None:
                times.append(stat.mtime / 1000.0)
        inventory.trees[job] = JobTree(job, tuple(kids), max(times, default=0.0))


def _read_records(
    zk: ZooKeeper, inventory: Inventory, layout: Layout, results: list[str], quarantined: list[str]
) -> None:
    result_items = zk.get_many([f"{layout.results}/{j}" for j in results])
    for job, item in zip(results, result_items, strict=True):
        if item is None:
            continue
        path = f"{layout.results}/{job}"
        try:
            inventory.results[job] = JobResult.from_znode(item[0], item[1], path)
        except CorruptRecord as exc:
            inventory.record_errors[path] = str(exc)
            if isinstance(exc, NewerRecord):
                inventory.newer_jobs.add(job)
    quarantine_items = zk.get_many([f"{layout.quarantine}/{j}" for j in quarantined])
    for job, item in zip(quarantined, quarantine_items, strict=True):
        if item is None:
            continue
        path = f"{layout.quarantine}/{job}"
        try:
            entry = QuarantineEntry.from_znode(item[0], item[1], path)
        except CorruptRecord as exc:
            inventory.record_errors[path] = str(exc)
            if isinstance(exc, NewerRecord):
                inventory.newer_jobs.add(job)
            continue
        inventory.quarantine[job] = entry
        copy = _quarantined_handle(entry, path)
        if copy is not None:
            inventory.handles.append(copy)


def _quarantined_handle(entry: QuarantineEntry, path: str) -> HandleRecord | None:
    handle = entry.handle
    if handle is None:
        return None
    return HandleRecord(
        path=path,
        kind=QUARANTINED,
        job_id=entry.job_id,
        name=entry.job_id,
        handle=handle,
        version=entry.version or 0,
        marked=False,
        mtime=0.0,
    )


@dataclass(frozen=True)
class Problem:
    """A handle whose payload does not check out."""

    path: str
    uri: str | None
    kind: str
    job_id: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "uri": self.uri,
            "kind": self.kind,
            "job": self.job_id,
            "problem": self.reason,
        }


def payload_prefix(record: HandleRecord, storage_layout: StorageLayout) -> str:
    """Where the payload of a handle of this kind and job must be (see :mod:`zkstore.layout`)."""
    if record.kind == CHECKPOINT:
        return storage_layout.checkpoints(record.job_id)
    return storage_layout.definitions(record.job_id)


def check_handle(
    storage: StateStorage, storage_layout: StorageLayout, record: HandleRecord
) -> Problem | None:
    """Read the payload and check where it is, its size and sha256 (and HMAC with a key); never
    unpickles. Outages raise :class:`StoreUnavailable`: an unreachable store is not a broken
    handle."""
    if record.handle is None:
        return Problem(
            record.path, None, record.kind, record.job_id, record.error or "corrupt handle"
        )
    prefix = payload_prefix(record, storage_layout)
    try:
        if not storage.is_under(record.handle.uri, prefix):
            raise UntrustedPayload(f"{record.handle.uri!r:.200} is not under {prefix}/")
        storage.read(record.handle.ref)
    except StoreUnavailable:
        raise
    except ZkStoreError as exc:
        return Problem(
            record.path,
            record.handle.uri,
            record.kind,
            record.job_id,
            f"{type(exc).__name__}: {exc}",
        )
    return None


def verify(
    storage: StateStorage,
    storage_layout: StorageLayout,
    records: Iterable[HandleRecord],
    *,
    workers: int = 16,
    progress: Callable[[int], None] | None = None,
) -> list[Problem]:
    """Check every live handle's payload; returns the problems, in path order."""
    live = [r for r in records if not r.marked]

    def check(record: HandleRecord) -> Problem | None:
        problem = check_handle(storage, storage_layout, record)
        if progress is not None:
            progress(1)
        return problem

    if storage.is_local or workers <= 1:
        found = [check(r) for r in live]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            found = list(pool.map(check, live))
    return sorted((p for p in found if p is not None), key=lambda p: p.path)
