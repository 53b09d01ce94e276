"""Staged output parts that no commit names, of attempts whose driver is gone.

``output-staging``  an object under an output's place, in the staging directory of an attempt
                    that no live driver holds, that no commit of the output names: what an
                    attempt wrote and never committed (its commit refused, or it died before
                    it), left where the leader's sweep did not reach (a leader that died
                    between the attempt's end and its sweep).

Garbage past the minimum age (an object's age: its modification time). Cleanup re-reads the
output's commits and the job's ``running`` node just before it deletes, and deletes only after
a check of a guard: no driver runs, the job's status is unchanged (no attempt started since).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from zkstore.admin.lingering.kind import CleanupResult, Finding, Kind, Look
from zkstore.errors import CorruptRecord, InvalidName, UntrustedPayload, ZkStoreError
from zkstore.zookeeper.ops import Fence

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["OUTPUT_STAGING", "OutputStaging"]

logger = logging.getLogger(__name__)

OUTPUT_STAGING = "output-staging"


class OutputStaging(Kind):
    """A staged part no commit names, of an attempt whose driver is gone."""

    name = OUTPUT_STAGING

    def find(self, look: Look) -> list[Finding]:
        cluster, inventory = look.cluster, look.inventory
        found = []
        for job, tree in sorted(inventory.trees.items()):
            if "outputs" not in tree.children or "running" in tree.children:
                continue  # a live driver may be staging (its own attempt's; the leader sweeps)
            try:
                objects = cluster.outputs(job).stray()
            except (CorruptRecord, InvalidName, UntrustedPayload) as exc:
                logger.warning("lingering: outputs of %s: %s", job, exc)
                continue
            for item in objects:
                age = item.age_seconds()
                if age >= look.min_age:
                    found.append(
                        self.finding(job, item.uri, age, item.size, "staged, never committed")
                    )
        return found

    def clean(self, cluster: Cluster, finding: Finding, *, dry_run: bool) -> CleanupResult:
        job, layout = finding.job_id, cluster.layout
        running, status = cluster.zk.exists_many([layout.running(job), layout.status(job)])
        if running is not None:
            return CleanupResult(finding, "kept", False, note="a driver runs: the leader sweeps")
        try:
            stray = cluster.outputs(job).stray()
        except ZkStoreError as exc:
            return CleanupResult(finding, "kept", False, note=f"outputs unreadable: {exc}")
        if finding.target not in {item.uri for item in stray}:
            return CleanupResult(finding, "kept", False, note="committed or gone meanwhile")
        if dry_run:
            return CleanupResult(finding, "delete staged part", False)
        guard = Fence.absent(layout.running(job), description="a driver started")
        guard += (
            Fence.absent(layout.status(job), description="an attempt started")
            if status is None
            else Fence.check(layout.status(job), status.version, description="attempt started")
        )
        cluster.zk.ensure_fence(guard)
        cluster.artifact_space.delete(job, finding.target)
        return CleanupResult(finding, "delete staged part", True, freed=finding.size or 0)
