"""Lingering artifacts: records (and their data) that no job or attempt owns any more.

``artifact-of-ended-job``    an artifact of a job that is neither current nor quarantined, and
                             whose cleanup is not pending (a dirty result's cleanup takes its
                             artifacts itself);
``artifact-of-dead-attempt`` an attempt-scoped artifact whose attempt's driver is gone, or any
                             artifact whose release was interrupted (RELEASING) while no driver
                             runs.

Both are garbage past the minimum age. Cleanup re-reads the record and what owns it just before
it acts, and releases the artifact (data, then record) in writes guarded on that re-check: the
job's ``running`` node absent, and its handle and quarantine entry absent (ended job) or its
status unchanged (dead attempt), so that an attempt starting meanwhile makes the cleanup fail
instead of deleting what the attempt now owns.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from zkstore.admin.inventory import Inventory
from zkstore.admin.lingering.kind import CleanupResult, Finding, Kind, Look
from zkstore.errors import ConflictError, CorruptRecord, InvalidName, UntrustedPayload
from zkstore.jobs.job_artifacts import ATTEMPT, RELEASING, Artifact
from zkstore.records.job_records import RunningInfo
from zkstore.records.job_states import DIRTY
from zkstore.zookeeper.ops import Fence

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = [
    "DEAD_ATTEMPT",
    "ENDED_JOB",
    "UNREADABLE",
    "DeadAttemptArtifact",
    "EndedJobArtifact",
    "classify",
    "find_leftovers",
    "release_leftover",
]

logger = logging.getLogger(__name__)

DEAD_ATTEMPT = "artifact-of-dead-attempt"
ENDED_JOB = "artifact-of-ended-job"

#: The driver of a job as a re-check sees it: absent (None), alive at an attempt, or alive with
#: an unreadable record (taken to be alive, attempt unknown).
UNREADABLE = -1


class _ArtifactKind(Kind):
    """Both artifact kinds come out of one pipelined read of every artifact record (shared
    through the look's memo); each keeps its own findings and cleans them alike."""

    def find(self, look: Look) -> list[Finding]:
        if "artifacts" not in look.memo:
            look.memo["artifacts"] = find_leftovers(
                look.cluster, look.inventory, now=look.now, min_age=look.min_age
            )
        leftovers: list[tuple[str, str, str, float, str]] = look.memo["artifacts"]
        return [
            self.finding(job, path, age, detail=detail)
            for kind, job, path, age, detail in leftovers
            if kind == self.name
        ]

    def clean(self, cluster: Cluster, finding: Finding, *, dry_run: bool) -> CleanupResult:
        action, done, note = release_leftover(cluster, finding, dry_run=dry_run)
        return CleanupResult(finding, action, done, note=note)


class DeadAttemptArtifact(_ArtifactKind):
    """An attempt-scoped artifact whose attempt's driver is gone, or any artifact whose release
    was interrupted (RELEASING) while no driver runs."""

    name = DEAD_ATTEMPT


class EndedJobArtifact(_ArtifactKind):
    """An artifact of a job that is neither current nor quarantined, and whose cleanup is not
    pending (a dirty result's cleanup takes its artifacts itself)."""

    name = ENDED_JOB


def find_leftovers(
    cluster: Cluster, inventory: Inventory, *, now: float, min_age: float
) -> list[tuple[str, str, str, float, str]]:
    """Every lingering artifact record older than ``min_age`` (pipelined reads): (kind, job,
    path, age, detail) each."""
    layout = cluster.layout
    jobs = sorted(job for job, tree in inventory.trees.items() if "artifacts" in tree.children)
    names = [found or [] for found in cluster.zk.children_many([layout.artifacts(j) for j in jobs])]
    paths = [
        (job, f"{layout.artifacts(job)}/{n}")
        for job, ns in zip(jobs, names, strict=True)
        for n in ns
    ]
    records = cluster.zk.get_many([path for _, path in paths])
    drivers = _drivers(cluster, [job for job in jobs if "running" in inventory.trees[job].children])
    found = []
    for (job, path), item in zip(paths, records, strict=True):
        if item is None or now - item[1].mtime / 1000.0 < min_age:
            continue
        try:
            record = Artifact.from_znode(item[0], item[1], path)
        except CorruptRecord as exc:
            logger.warning("lingering: %s", exc)
            continue
        why = classify(job, record, inventory, drivers.get(job))
        if why is not None:
            age = now - item[1].mtime / 1000.0
            found.append((why[0], job, path, age, f"{why[1]}: {record.uri}"))
    return found


def _drivers(cluster: Cluster, jobs: list[str]) -> dict[str, int | None]:
    """The attempt of each job's live driver (:data:`UNREADABLE` if its record is garbage)."""
    paths = [cluster.layout.running(job) for job in jobs]
    drivers: dict[str, int | None] = {}
    for job, path, item in zip(jobs, paths, cluster.zk.get_many(paths), strict=True):
        if item is None:
            drivers[job] = None
            continue
        try:
            drivers[job] = RunningInfo.from_znode(item[0], item[1], path).attempt
        except CorruptRecord:
            drivers[job] = UNREADABLE
    return drivers


def classify(
    job: str, record: Artifact, inventory: Inventory, driver: int | None
) -> tuple[str, str] | None:
    """The leftover kind of ``record`` and why, or None if something still owns it."""
    result = inventory.results.get(job)
    if result is not None and result.state == DIRTY:
        return None  # the job's cleanup releases it
    if job not in inventory.current_jobs and job not in inventory.quarantine:
        ended = f"job ended {result.outcome}" if result is not None else "no such job"
        return ENDED_JOB, f"{ended}; {record.state}"
    return _dead(record, driver)


def _dead(record: Artifact, driver: int | None) -> tuple[str, str] | None:
    if driver is not None and (driver == UNREADABLE or record.scope != ATTEMPT):
        return None
    if record.state == RELEASING and driver is None:
        return DEAD_ATTEMPT, f"release interrupted ({record.scope} scope)"
    if record.scope == ATTEMPT and driver != record.attempt:
        live = "" if driver is None else f"; attempt {driver} runs"
        return DEAD_ATTEMPT, f"attempt {record.attempt} ended, {record.state}{live}"
    return None


def release_leftover(
    cluster: Cluster, leftover: Finding, *, dry_run: bool
) -> tuple[str, bool, str]:
    """Release one leftover after re-checking it: (action, done, note)."""
    store = cluster.artifacts(leftover.job_id)
    name = leftover.target.rsplit("/", 1)[1]
    try:
        record = store.get(name)
    except (CorruptRecord, InvalidName) as exc:
        return "kept", False, f"unreadable: {exc}"
    if record is None:
        return "kept", False, "released meanwhile"
    guard, why_not = _recheck(cluster, leftover, record)
    if guard is None:
        return "kept", False, why_not
    if dry_run:
        return "release artifact", False, ""
    try:
        store.release(name, fence=guard)
    except UntrustedPayload as exc:
        # outside the roots given (--artifact-root), not claimed by this artifact alone, or
        # behind a symbolic link: not ours to delete
        return "kept", False, f"data not ours to delete: {exc}"
    except ConflictError as exc:
        return "kept", False, f"owned again meanwhile ({exc})"
    return "release artifact", True, ""


def _recheck(cluster: Cluster, leftover: Finding, record: Artifact) -> tuple[Fence | None, str]:
    """The guard of the release if the record is still a leftover, else (None, why not)."""
    job, layout, zk = leftover.job_id, cluster.layout, cluster.zk
    handle, quarantined, running, status = zk.exists_many(
        [
            layout.job_handle(job),
            layout.quarantine_entry(job),
            layout.running(job),
            layout.status(job),
        ]
    )
    if running is not None:
        return None, "a driver runs: the job and the leader release it"
    guard = Fence.absent(layout.running(job), description="a driver started")
    if leftover.kind == ENDED_JOB:
        result = cluster.results.get(job)
        if handle is not None or quarantined is not None or (result and result.state == DIRTY):
            return None, "the job is current, quarantined or being cleaned up again"
        guard += Fence.absent(layout.job_handle(job), description="the job is current again")
        return guard + Fence.absent(layout.quarantine_entry(job), description="quarantined"), ""
    if _dead(record, None) is None:
        return None, "not a leftover any more"
    if status is None:
        return guard + Fence.absent(layout.status(job), description="an attempt started"), ""
    return guard + Fence.check(
        layout.status(job), status.version, description="attempt started"
    ), ""
