"""Lingering state: what failures leave behind, found exactly and cleaned up safely.

Kinds (``garbage`` ones are what ``cleanup`` removes; the others are for people to decide):

``orphan-payload``  an object under a job's storage prefix that no handle references (a crash
                    between writing a payload and publishing its handle, or before discarding a
                    replaced one), or a driver log that no job keeps any more (its job is gone
                    and the retention recorded with its result has passed); garbage once older
                    than the minimum age. A job's records in storage (its control history) are
                    referenced by no handle: they are the job's while it lives, and orphans only
                    once it is gone.
``dangling-handle`` a live handle whose payload is missing or has the wrong size (damage from
                    outside: invariant 1 is never broken by zkstore itself); cleanup moves the job
                    to quarantine, never to the bin.
``marked-node``     a handle marked for deletion whose removal never finished; cleanup finishes it.
``dirty-result``    a job with a recorded result whose cleanup never finished; cleanup finishes it.
``empty-job-tree``  ``R/jobs/<job>`` records of a job that is not current, not quarantined and
                    not being cleaned up (no result, or a CLEAN one); cleanup deletes them.
``quarantined-job`` a job in quarantine (reported, never removed by cleanup).
``artifact-of-dead-attempt``, ``artifact-of-ended-job``
                    artifacts nobody owns any more (see :mod:`zkstore.admin.artifacts`);
                    cleanup releases them: their data, then their record.

Every deletion is re-checked against ZooKeeper just before it is made, so that a payload
published meanwhile is never removed; nothing younger than the minimum age is ever touched.
A payload is only ever published within :data:`~zkstore.store.MAX_PUBLISH_DELAY` of being
written, so an unreferenced payload older than that (plus clock skew) can never become referenced.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from zkstore.admin import artifacts
from zkstore.admin.inventory import (
    CHECKPOINT,
    JOB,
    HandleRecord,
    Inventory,
    payload_prefix,
    read_inventory,
)
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up, remove_records
from zkstore.errors import HandleNotFound, StoreUnavailable, ZkStoreError
from zkstore.jobs.logs import is_log_key, logs_kept
from zkstore.jobs.states import DIRTY
from zkstore.layout import job_record_dir
from zkstore.storage import TEMP_MARKER, StoredObject
from zkstore.store import ZooKeeperStateHandleStore, is_marked
from zkstore.strict import parse_time

logger = logging.getLogger(__name__)

ORPHAN_PAYLOAD = "orphan-payload"
DANGLING_HANDLE = "dangling-handle"
MARKED_NODE = "marked-node"
DIRTY_RESULT = "dirty-result"
EMPTY_JOB_TREE = "empty-job-tree"
QUARANTINED_JOB = "quarantined-job"
KINDS = (
    ORPHAN_PAYLOAD,
    DANGLING_HANDLE,
    MARKED_NODE,
    DIRTY_RESULT,
    *artifacts.KINDS,  # before the job trees they are in: released first, then the tree goes
    EMPTY_JOB_TREE,
    QUARANTINED_JOB,
)
GARBAGE = frozenset(KINDS) - {QUARANTINED_JOB}


@dataclass(frozen=True)
class Finding:
    """One piece of lingering state. ``target`` is a znode path or a payload URI."""

    kind: str
    job_id: str
    target: str
    age: float
    size: int | None = None
    detail: str = ""

    @property
    def garbage(self) -> bool:
        return self.kind in GARBAGE

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "age": round(self.age, 1), "garbage": self.garbage}


def _job_of(key: str) -> str | None:
    """The job id in a payload key ``<cluster>/jobs/<job>/...``."""
    parts = key.split("/")
    return parts[2] if len(parts) > 3 and parts[1] == "jobs" else None


def find_lingering(
    cluster: Cluster,
    *,
    min_age: float,
    inventory: Inventory | None = None,
    now: float | None = None,
) -> list[Finding]:
    """Everything lingering under the cluster's root; garbage kinds only past ``min_age``.

    A dangling handle is damage at any age: it is reported once a second read of its znode and
    its payload confirms it (a handle replaced or removed meanwhile is not damage).
    """
    inventory = inventory or read_inventory(cluster.zk, cluster.layout)
    now = time.time() if now is None else now
    objects = cluster.storage.list(cluster.storage_layout.jobs)
    findings = _orphans(cluster, inventory, objects, now, min_age)
    findings += _marked(inventory, now, min_age)
    findings += _dangling(cluster, inventory, {o.uri: o for o in objects}, now)
    findings += _records(cluster, inventory, now, min_age)
    findings += [
        Finding(left.kind, left.job_id, left.target, left.age, detail=left.detail)
        for left in artifacts.find_leftovers(cluster, inventory, now=now, min_age=min_age)
    ]
    return sorted(findings, key=lambda f: (KINDS.index(f.kind), f.job_id, f.target))


def _orphans(
    cluster: Cluster, inventory: Inventory, objects: list[StoredObject], now: float, min_age: float
) -> list[Finding]:
    referenced = inventory.referenced_uris()
    found = []
    for item in objects:
        age = now - item.modified.timestamp()
        if item.uri in referenced or age < min_age:
            continue
        key = cluster.storage.key_of(item.uri)
        job = _job_of(key) or "?"
        record = job_record_dir(key)
        if record is not None and _owned(inventory, job):
            continue  # the living job's own record (its cleanup removes it)
        partial = TEMP_MARKER in item.uri.rsplit("/", 1)[-1]
        if partial:
            detail = "partial write (temporary file)"
        elif record is not None:
            detail = f"{record} of a job that is gone"
        elif is_log_key(key):
            live = job in inventory.current_jobs or job in inventory.trees
            result = inventory.results.get(job)
            if logs_kept(live or job in inventory.quarantine, result, _at(now)):
                continue
            detail = (
                f"driver log past its retention (kept until {result.logs_until})"
                if result is not None and result.logs_until is not None
                else "driver log of no job"
            )
        else:
            detail = "referenced by no handle"
        found.append(Finding(ORPHAN_PAYLOAD, job, item.uri, age, item.size, detail))
    return found


def _marked(inventory: Inventory, now: float, min_age: float) -> list[Finding]:
    found = []
    for record in inventory.handles:
        age = now - record.mtime if record.mtime else 0.0
        if record.marked and age >= min_age:
            found.append(
                Finding(
                    MARKED_NODE, record.job_id, record.path, age, detail="removal never finished"
                )
            )
    return found


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


def _dangling(
    cluster: Cluster, inventory: Inventory, objects: dict[str, StoredObject], now: float
) -> list[Finding]:
    suspects = [
        (record, damage)
        for record in inventory.handles
        if not record.marked and record.kind in (JOB, CHECKPOINT)
        if (damage := _damage(cluster, record, objects)) is not None
    ]
    if not suspects:
        return []
    # Second look: the znode still holds the same handle, and its payload is still wrong. A
    # handle published or replaced after the storage listing is not damage.
    again = cluster.zk.get_many([record.path for record, _ in suspects])
    found = []
    for (record, (detail, size)), item in zip(suspects, again, strict=True):
        if item is None or item[1].version != record.version or is_marked(item[1]):
            continue
        handle = record.handle
        if handle is not None and _payload_fine(cluster, record, handle.uri, handle.size):
            continue
        age = now - record.mtime if record.mtime else 0.0
        found.append(Finding(DANGLING_HANDLE, record.job_id, record.path, age, size, detail))
    return found


def _payload_fine(cluster: Cluster, record: HandleRecord, uri: str, size: int) -> bool:
    if not cluster.storage.is_under(uri, payload_prefix(record, cluster.storage_layout)):
        return False
    return cluster.storage.size(uri) == size


def _records(cluster: Cluster, inventory: Inventory, now: float, min_age: float) -> list[Finding]:
    layout = cluster.layout
    found = []
    for job, result in inventory.results.items():
        age = now - parse_time(result.finished).timestamp()
        if result.state == DIRTY and age >= min_age:
            found.append(
                Finding(
                    DIRTY_RESULT,
                    job,
                    layout.result(job),
                    age,
                    detail=f"{result.outcome}, cleanup unfinished",
                )
            )
    for job, entry in inventory.quarantine.items():
        age = now - parse_time(entry.since).timestamp()
        found.append(
            Finding(QUARANTINED_JOB, job, layout.quarantine_entry(job), age, detail=entry.reason)
        )
    for job, tree in inventory.trees.items():
        age = now - tree.newest
        if _owned(inventory, job) or age < min_age:
            continue
        detail = "records of no current job: " + (", ".join(tree.children) or "empty")
        if "running" in tree.children:
            detail += " (a driver still holds it: left alone)"
        found.append(Finding(EMPTY_JOB_TREE, job, layout.job_dir(job), age, detail=detail))
    return found


def _owned(inventory: Inventory, job: str) -> bool:
    """The job still owns its records: it is current, quarantined, or its cleanup (which
    takes them) is unfinished."""
    result = inventory.results.get(job)
    return (
        job in inventory.current_jobs
        or job in inventory.quarantine
        or (result is not None and result.state == DIRTY)
    )


@dataclass(frozen=True)
class CleanupResult:
    """What cleanup did with one finding."""

    finding: Finding
    action: str
    done: bool
    freed: int = 0
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.finding.as_dict(),
            "action": self.action,
            "done": self.done,
            "freed": self.freed,
            "note": self.note,
        }


class Cleaner:
    """Removes lingering garbage, re-checking each item against ZooKeeper just before acting."""

    def __init__(self, cluster: Cluster, *, dry_run: bool) -> None:
        self.cluster = cluster
        self.dry_run = dry_run

    def clean(
        self, findings: list[Finding], progress: Callable[[int], None] | None = None
    ) -> list[CleanupResult]:
        outcomes = []
        actions = {
            ORPHAN_PAYLOAD: self._orphan,
            DANGLING_HANDLE: self._dangling,
            MARKED_NODE: self._marked,
            DIRTY_RESULT: self._dirty,
            EMPTY_JOB_TREE: self._tree,
            **dict.fromkeys(artifacts.KINDS, self._artifact),
        }
        for finding in findings:
            if finding.garbage:
                try:
                    outcomes.append(actions[finding.kind](finding))
                except StoreUnavailable:
                    raise
                except ZkStoreError as exc:
                    outcomes.append(
                        CleanupResult(finding, "failed", False, note=f"{type(exc).__name__}: {exc}")
                    )
            if progress is not None:
                progress(1)
        return outcomes

    def _orphan(self, finding: Finding) -> CleanupResult:
        if self._referenced(finding.job_id, finding.target):
            return CleanupResult(finding, "kept", False, note="referenced by a handle now")
        if is_log_key(self.cluster.storage.key_of(finding.target)) and self._logs_kept(
            finding.job_id
        ):
            return CleanupResult(finding, "kept", False, note="its job keeps it now")
        if not self.dry_run:
            self.cluster.storage.discard(finding.target)
        return CleanupResult(finding, "discard payload", not self.dry_run, freed=finding.size or 0)

    def _referenced(self, job_id: str, uri: str) -> bool:
        """Re-read every handle that could reference a payload of ``job_id`` (they name it)."""
        if job_id == "?":
            return False
        layout = self.cluster.layout
        paths = [layout.job_handle(job_id), layout.quarantine_entry(job_id)]
        with contextlib.suppress(HandleNotFound):
            paths += [
                f"{layout.checkpoints(job_id)}/{n}"
                for n in self.cluster.zk.children(layout.checkpoints(job_id))
            ]
        # The URI appearing anywhere in those znodes counts: when in doubt, keep the payload.
        found = self.cluster.zk.get_many(paths)
        return any(item is not None and uri.encode() in item[0] for item in found)

    def _logs_kept(self, job_id: str) -> bool:
        """Re-read whether the job lives or its logs' retention holds, just before a discard."""
        layout = self.cluster.layout
        owners = self.cluster.zk.exists_many(
            [layout.job_handle(job_id), layout.job_dir(job_id), layout.quarantine_entry(job_id)]
        )
        live = any(stat is not None for stat in owners)
        return logs_kept(live, self.cluster.results.get(job_id), _at(time.time()))

    def _store(self, finding: Finding) -> tuple[ZooKeeperStateHandleStore[Any], str]:
        name = finding.target.rsplit("/", 1)[1]
        if finding.target.startswith(self.cluster.layout.current_jobs + "/"):
            return self.cluster.jobs.handles, name
        return self.cluster.checkpoints(finding.job_id).handles, name

    def _marked(self, finding: Finding) -> CleanupResult:
        store, name = self._store(finding)
        if self.dry_run:
            return CleanupResult(finding, "finish removal", False)
        done = store.remove(name)
        return CleanupResult(
            finding, "finish removal", done, note="" if done else "locked by someone"
        )

    def _dangling(self, finding: Finding) -> CleanupResult:
        store, name = self._store(finding)
        try:
            store.verify(name)
        except HandleNotFound:
            return CleanupResult(finding, "kept", False, note="gone meanwhile")
        except ZkStoreError as exc:
            if isinstance(exc, StoreUnavailable):
                raise
            reason = f"{finding.target}: {type(exc).__name__}: {exc}"
            if not self.dry_run:
                self.cluster.quarantine.move_in(finding.job_id, reason)
            return CleanupResult(finding, "quarantine job", not self.dry_run)
        return CleanupResult(finding, "kept", False, note="verifies now")

    def _dirty(self, finding: Finding) -> CleanupResult:
        result = self.cluster.results.get(finding.job_id)
        if result is None or result.state != DIRTY:
            return CleanupResult(finding, "kept", False, note="cleaned meanwhile")
        if self.cluster.state.running(finding.job_id) is not None:
            return CleanupResult(finding, "kept", False, note="a driver still runs")
        if self.dry_run:
            return CleanupResult(finding, "finish job cleanup", False)
        done = clean_up(self.cluster, finding.job_id)
        return CleanupResult(
            finding, "finish job cleanup", done, note="" if done else "still locked"
        )

    def _artifact(self, finding: Finding) -> CleanupResult:
        leftover = artifacts.Leftover(
            finding.kind, finding.job_id, finding.target, finding.age, finding.detail
        )
        action, done, note = artifacts.release_leftover(
            self.cluster, leftover, dry_run=self.dry_run
        )
        return CleanupResult(finding, action, done, note=note)

    def _tree(self, finding: Finding) -> CleanupResult:
        job, layout, zk = finding.job_id, self.cluster.layout, self.cluster.zk
        owners = zk.exists_many(
            [layout.job_handle(job), layout.quarantine_entry(job), layout.running(job)]
        )
        result = self.cluster.results.get(job)
        cleaning = result is not None and result.state == DIRTY
        if cleaning or any(stat is not None for stat in owners):
            return CleanupResult(finding, "kept", False, note="owned again (or a driver holds it)")
        if self.cluster.artifacts(job).all()[0]:  # deleting their records would leak their data
            return CleanupResult(finding, "kept", False, note="its artifacts are not released yet")
        if self.dry_run:
            return CleanupResult(finding, "delete records", False)
        if not remove_records(self.cluster, job):
            return CleanupResult(finding, "kept", False, note="changed meanwhile")
        return CleanupResult(finding, "delete records", True)


def _at(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)
