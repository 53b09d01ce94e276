"""Lingering payloads and handles: orphan payloads, dangling handles, marked nodes."""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from zkstore.admin.inventory import CHECKPOINT, JOB, HandleRecord, payload_prefix
from zkstore.admin.lingering.kind import CleanupResult, Finding, Kind, Look, owned
from zkstore.errors import HandleNotFound, StoreUnavailable, ZkStoreError
from zkstore.jobs.logs import is_log_key, logs_kept
from zkstore.layout import job_record_dir
from zkstore.payloads.storage import StoredObject, is_temporary
from zkstore.payloads.store import ZooKeeperStateHandleStore, is_marked
from zkstore.records.strict import time_text

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["DanglingHandle", "MarkedNode", "OrphanPayload"]


class OrphanPayload(Kind):
    """An object under a job's storage prefix that no handle references (a crash between
    writing a payload and publishing its handle, or before discarding a replaced one), or a
    driver log that no job keeps any more; garbage once older than the minimum age. A job's
    records in storage (its control history) are the job's while it lives."""

    name = "orphan-payload"

    def find(self, look: Look) -> list[Finding]:
        cluster, inventory = look.cluster, look.inventory
        referenced = inventory.referenced_uris()
        found = []
        for item in look.objects:
            age = look.now - item.modified.timestamp()
            if item.uri in referenced or age < look.min_age:
                continue
            key = cluster.storage.key_of(item.uri)
            job = _job_of(key) or "?"
            if job in inventory.newer_jobs:
                continue  # what its newer records reference is a newer zkstore's to tell
            record = job_record_dir(key)
            if record is not None and owned(inventory, job):
                continue  # the living job's own record (its cleanup removes it)
            if is_temporary(item.uri):
                detail = "partial write (temporary file)"
            elif record is not None:
                detail = f"{record} of a job that is gone"
            elif is_log_key(key):
                live = job in inventory.current_jobs or job in inventory.trees
                result = inventory.results.get(job)
                if logs_kept(live or job in inventory.quarantine, result, _at(look.now)):
                    continue
                detail = (
                    f"driver log past its retention (kept until {time_text(result.logs_until)})"
                    if result is not None and result.logs_until is not None
                    else "driver log of no job"
                )
            else:
                detail = "referenced by no handle"
            found.append(self.finding(job, item.uri, age, item.size, detail))
        return found

    def clean(self, cluster: Cluster, finding: Finding, *, dry_run: bool) -> CleanupResult:
        if _referenced(cluster, finding.job_id, finding.target):
            return CleanupResult(finding, "kept", False, note="referenced by a handle now")
        # A temporary file is a write whose writer died (older than --min-age): never part of
        # the logs a job keeps, so what `lingering` reports as a partial write goes here too.
        key = cluster.storage.key_of(finding.target)
        if (
            is_log_key(key)
            and not is_temporary(finding.target)
            and _logs_kept(cluster, finding.job_id)
        ):
            return CleanupResult(finding, "kept", False, note="its job keeps it now")
        if not dry_run:
            cluster.storage.discard(finding.target)
        return CleanupResult(finding, "discard payload", not dry_run, freed=finding.size or 0)


class DanglingHandle(Kind):
    """A live handle whose payload is missing or has the wrong size (damage from outside:
    invariant 1 is never broken by zkstore itself); cleanup moves the job to quarantine, never
    to the bin. Reported at any age, once a second read confirms it."""

    name = "dangling-handle"

    def find(self, look: Look) -> list[Finding]:
        cluster = look.cluster
        objects = {o.uri: o for o in look.objects}
        suspects = [
            (record, damage)
            for record in look.inventory.handles
            if not record.marked and not record.newer and record.kind in (JOB, CHECKPOINT)
            if (damage := _damage(cluster, record, objects)) is not None
        ]
        if not suspects:
            return []
        # Second look: the znode still holds the same handle, and its payload is still wrong.
        # A handle published or replaced after the storage listing is not damage.
        again = cluster.zk.get_many([record.path for record, _ in suspects])
        found = []
        for (record, (detail, size)), item in zip(suspects, again, strict=True):
            if item is None or item[1].version != record.version or is_marked(item[1]):
                continue
            handle = record.handle
            if handle is not None and _payload_fine(cluster, record, handle.uri, handle.size):
                continue
            age = look.now - record.mtime if record.mtime else 0.0
            found.append(self.finding(record.job_id, record.path, age, size, detail))
        return found

    def clean(self, cluster: Cluster, finding: Finding, *, dry_run: bool) -> CleanupResult:
        store, name = _store(cluster, finding)
        try:
            store.verify(name)
        except HandleNotFound:
            return CleanupResult(finding, "kept", False, note="gone meanwhile")
        except ZkStoreError as exc:
            if isinstance(exc, StoreUnavailable):
                raise
            reason = f"{finding.target}: {type(exc).__name__}: {exc}"
            if not dry_run:
                cluster.quarantine.move_in(finding.job_id, reason)
            return CleanupResult(finding, "quarantine job", not dry_run)
        return CleanupResult(finding, "kept", False, note="verifies now")


class MarkedNode(Kind):
    """A handle marked for deletion whose removal never finished; cleanup finishes it."""

    name = "marked-node"

    def find(self, look: Look) -> list[Finding]:
        found = []
        for record in look.inventory.handles:
            age = look.now - record.mtime if record.mtime else 0.0
            if record.marked and age >= look.min_age:
                found.append(
                    self.finding(record.job_id, record.path, age, detail="removal never finished")
                )
        return found

    def clean(self, cluster: Cluster, finding: Finding, *, dry_run: bool) -> CleanupResult:
        store, name = _store(cluster, finding)
        if dry_run:
            return CleanupResult(finding, "finish removal", False)
        done = store.remove(name)
        return CleanupResult(
            finding, "finish removal", done, note="" if done else "locked by someone"
        )


def _job_of(key: str) -> str | None:
    """The job id in a payload key ``<cluster>/jobs/<job>/...``."""
    parts = key.split("/")
    return parts[2] if len(parts) > 3 and parts[1] == "jobs" else None


def _at(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


def _damage(
    cluster: Cluster, record: HandleRecord, objects: dict[str, StoredObject]
) -> tuple[str, int | None] | None:
    """What is wrong with a live handle's payload (from the listing), or None."""
    handle = record.handle
    if handle is None:
        return record.error or "corrupt handle", None
    if not cluster.storage.is_under(handle.uri, payload_prefix(record, cluster.storage_layout)):
        return f"payload {handle.uri!r:.200} is outside its job's prefix", handle.size
    stored = objects.get(handle.uri)
    if stored is None:
        return f"payload {handle.uri} is missing", handle.size
    if stored.size != handle.size:
        return f"payload has {stored.size} bytes, handle says {handle.size}", handle.size
    return None


def _payload_fine(cluster: Cluster, record: HandleRecord, uri: str, size: int) -> bool:
    if not cluster.storage.is_under(uri, payload_prefix(record, cluster.storage_layout)):
        return False
    return cluster.storage.size(uri) == size


def _referenced(cluster: Cluster, job_id: str, uri: str) -> bool:
    """Re-read every handle that could reference a payload of ``job_id`` (they name it)."""
    if job_id == "?":
        return False
    layout = cluster.layout
    paths = [layout.job_handle(job_id), layout.quarantine_entry(job_id)]
    with contextlib.suppress(HandleNotFound):
        paths += [
            f"{layout.checkpoints(job_id)}/{n}"
            for n in cluster.zk.children(layout.checkpoints(job_id))
        ]
    # The URI appearing anywhere in those znodes counts: when in doubt, keep the payload.
    found = cluster.zk.get_many(paths)
    return any(item is not None and uri.encode() in item[0] for item in found)


def _logs_kept(cluster: Cluster, job_id: str) -> bool:
    """Re-read whether the job lives or its logs' retention holds, just before a discard."""
    layout = cluster.layout
    owners = cluster.zk.exists_many(
        [layout.job_handle(job_id), layout.job_dir(job_id), layout.quarantine_entry(job_id)]
    )
    live = any(stat is not None for stat in owners)
    return logs_kept(live, cluster.results.get(job_id), _at(time.time()))


def _store(cluster: Cluster, finding: Finding) -> tuple[ZooKeeperStateHandleStore[Any], str]:
    name = finding.target.rsplit("/", 1)[1]
    if finding.target.startswith(cluster.layout.current_jobs + "/"):
        return cluster.jobs.handles, name
    return cluster.checkpoints(finding.job_id).handles, name
