"""Lingering job records: unfinished cleanups, records of no job, quarantined jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zkstore.admin.lingering.kind import CleanupResult, Finding, Kind, Look, owned
from zkstore.cluster.cleanup import clean_up, remove_records
from zkstore.records.job_states import DIRTY

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["DirtyResult", "EmptyJobTree", "QuarantinedJob"]


class DirtyResult(Kind):
    """A job with a recorded result whose cleanup never finished; cleanup finishes it."""

    name = "dirty-result"

    def find(self, look: Look) -> list[Finding]:
        found = []
        for job, result in look.inventory.results.items():
            age = look.now - result.finished.timestamp()
            if result.state == DIRTY and age >= look.min_age:
                path = look.cluster.layout.result(job)
                detail = f"{result.outcome}, cleanup unfinished"
                found.append(self.finding(job, path, age, detail=detail))
        return found

    def clean(self, cluster: Cluster, finding: Finding, *, dry_run: bool) -> CleanupResult:
        result = cluster.results.get(finding.job_id)
        if result is None or result.state != DIRTY:
            return CleanupResult(finding, "kept", False, note="cleaned meanwhile")
        if cluster.state.running(finding.job_id) is not None:
            return CleanupResult(finding, "kept", False, note="a driver still runs")
        if dry_run:
            return CleanupResult(finding, "finish job cleanup", False)
        done = clean_up(cluster, finding.job_id)
        return CleanupResult(
            finding, "finish job cleanup", done, note="" if done else "still locked"
        )


class EmptyJobTree(Kind):
    """``R/jobs/<job>`` records of a job that is not current, not quarantined and not being
    cleaned up (no result, or a CLEAN one); cleanup deletes them."""

    name = "empty-job-tree"

    def find(self, look: Look) -> list[Finding]:
        inventory, found = look.inventory, []
        for job, tree in inventory.trees.items():
            age = look.now - tree.newest
            if owned(inventory, job) or age < look.min_age:
                continue
            detail = "records of no current job: " + (", ".join(tree.children) or "empty")
            if "running" in tree.children:
                detail += " (a driver still holds it: left alone)"
            found.append(self.finding(job, look.cluster.layout.job_dir(job), age, detail=detail))
        return found

    def clean(self, cluster: Cluster, finding: Finding, *, dry_run: bool) -> CleanupResult:
        job, layout, zk = finding.job_id, cluster.layout, cluster.zk
        owners = zk.exists_many(
            [layout.job_handle(job), layout.quarantine_entry(job), layout.running(job)]
        )
        result = cluster.results.get(job)
        cleaning = result is not None and result.state == DIRTY
        if cleaning or any(stat is not None for stat in owners):
            return CleanupResult(finding, "kept", False, note="owned again (or a driver holds it)")
        if cluster.artifacts(job).all()[0]:  # deleting their records would leak their data
            return CleanupResult(finding, "kept", False, note="its artifacts are not released yet")
        if dry_run:
            return CleanupResult(finding, "delete records", False)
        if not remove_records(cluster, job):
            return CleanupResult(finding, "kept", False, note="changed meanwhile")
        return CleanupResult(finding, "delete records", True)


class QuarantinedJob(Kind):
    """A job in quarantine: reported, never removed by cleanup (``quarantine release|purge``)."""

    name = "quarantined-job"
    garbage = False

    def find(self, look: Look) -> list[Finding]:
        layout = look.cluster.layout
        return [
            self.finding(
                job,
                layout.quarantine_entry(job),
                look.now - entry.since.timestamp(),
                detail=entry.reason,
            )
            for job, entry in look.inventory.quarantine.items()
        ]
