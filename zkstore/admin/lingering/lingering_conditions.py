"""Lingering conditions: ``R/conditions/schedules/<name>`` of a schedule that no longer exists,
``R/conditions/jobs/<job>`` of a job that has no handle, no result and no quarantine entry any
more (a crash between a schedule's delete and its conditions', a release that did not delete
them together, a job forgotten). Garbage once older than the minimum age; cleanup re-reads the
object just before a delete at the version it found."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zkstore.admin.lingering.kind import CleanupResult, Finding, Kind, Look
from zkstore.conditions import JOB, SCHEDULE
from zkstore.errors import HandleNotFound, VersionConflict
from zkstore.zookeeper.ops import Delete

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["NAME", "OrphanConditions"]

NAME = "orphan-conditions"


def _owners(cluster: Cluster, kind: str, name: str) -> list[str]:
    """The nodes whose existence keeps the object's conditions (any one of them)."""
    layout = cluster.layout
    if kind == SCHEDULE:
        return [f"{layout.schedules}/{name}"]
    return [layout.job_handle(name), layout.result(name), layout.quarantine_entry(name)]


def _owned(cluster: Cluster, kind: str, name: str) -> bool:
    return any(stat is not None for stat in cluster.zk.exists_many(_owners(cluster, kind, name)))


class OrphanConditions(Kind):
    """The leader's conditions on a schedule or a job that is gone."""

    name = NAME

    def find(self, look: Look) -> list[Finding]:
        cluster, found = look.cluster, []
        for kind in (SCHEDULE, JOB):
            base = f"{cluster.layout.conditions}/{kind}"
            try:
                names = cluster.zk.children(base)
            except HandleNotFound:
                continue
            stats = cluster.zk.exists_many([f"{base}/{name}" for name in names])
            for name, stat in zip(names, stats, strict=True):
                if stat is None:
                    continue
                age = look.now - stat.mtime / 1000
                if age < look.min_age or _owned(cluster, kind, name):
                    continue
                what = "schedule" if kind == SCHEDULE else "job"
                found.append(
                    self.finding(
                        f"{what}:{name}" if kind == SCHEDULE else name,
                        f"{base}/{name}",
                        age,
                        detail=f"conditions of {what} {name}, which no longer exists",
                    )
                )
        return found

    def clean(self, cluster: Cluster, finding: Finding, *, dry_run: bool) -> CleanupResult:
        path = finding.target
        kind, name = path.rsplit("/", 2)[-2:]
        stat = cluster.zk.exists(path)
        if stat is None:
            return CleanupResult(finding, "kept", False, note="gone already")
        if _owned(cluster, kind, name):
            return CleanupResult(finding, "kept", False, note=f"its {kind[:-1]} exists again")
        if dry_run:
            return CleanupResult(finding, "delete conditions", False)
        try:
            cluster.zk.commit([Delete(path, stat.version)])
        except (HandleNotFound, VersionConflict):
            return CleanupResult(finding, "kept", False, note="changed meanwhile")
        return CleanupResult(finding, "delete conditions", True)
