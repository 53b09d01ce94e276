"""Lingering state: what failures leave behind, found exactly and cleaned up safely.

Each kind is an object that finds its own findings and cleans one up after a re-check
(:class:`~zkstore.admin.lingering.kind.Kind`); garbage kinds are what ``handles cleanup``
removes, the others are for people to decide:

``orphan-payload``  an object under a job's storage prefix that no handle references, or a
                    driver log no job keeps any more (:mod:`.payloads`)
``dangling-handle`` a live handle whose payload is missing or has the wrong size; cleanup
                    quarantines the job (:mod:`.payloads`)
``marked-node``     a handle marked for deletion whose removal never finished (:mod:`.payloads`)
``dirty-result``    a job's result whose cleanup never finished (:mod:`.lingering_records`)
``artifact-of-dead-attempt``, ``artifact-of-ended-job``
                    artifacts nobody owns any more; cleanup releases them, data then record
                    (:mod:`.lingering_artifacts`)
``output-staging``  an output's part staged by an attempt whose driver is gone and never
                    committed (:mod:`.lingering_outputs`)
``empty-job-tree``  ``R/jobs/<job>`` records of a job that is not current, not quarantined and
                    not being cleaned up (:mod:`.lingering_records`)
``quarantined-job`` a job in quarantine (reported, never removed by cleanup)
``orphan-schedule-payload``
                    a schedule's definition that no schedule references
                    (:mod:`.lingering_schedules`)
``orphan-conditions``
                    the leader's conditions on a schedule or a job that no longer exists
                    (:mod:`.lingering_conditions`)

Every deletion is re-checked against ZooKeeper just before it is made, so that a payload
published meanwhile is never removed; nothing younger than the minimum age is ever touched.
A payload is only ever published within :data:`~zkstore.payloads.store.MAX_PUBLISH_DELAY` of being
written, so an unreferenced payload older than that (plus clock skew) can never become referenced.

The modules::

    kind.py        what every kind is: a :class:`Kind` finds its findings and cleans one up
    payloads.py    orphan payloads, dangling handles, marked nodes
    lingering_records.py
                   dirty results, empty job trees, quarantined jobs
    lingering_artifacts.py
                   artifacts of dead attempts and of ended jobs
    lingering_outputs.py
                   staged output parts never committed
    lingering_schedules.py
                   orphan schedule payloads
    lingering_conditions.py
                   conditions of schedules and jobs that are gone
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from zkstore.admin.inventory import Inventory, read_inventory
from zkstore.admin.lingering.kind import CleanupResult, Finding, Kind, Look
from zkstore.admin.lingering.lingering_artifacts import DeadAttemptArtifact, EndedJobArtifact
from zkstore.admin.lingering.lingering_conditions import OrphanConditions
from zkstore.admin.lingering.lingering_outputs import OutputStaging
from zkstore.admin.lingering.lingering_records import DirtyResult, EmptyJobTree, QuarantinedJob
from zkstore.admin.lingering.lingering_schedules import OrphanSchedulePayload
from zkstore.admin.lingering.payloads import DanglingHandle, MarkedNode, OrphanPayload
from zkstore.errors import StoreUnavailable, ZkStoreError

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

#: Every kind, in the order findings are listed and cleaned: artifacts before the job trees
#: they are in (released first, then the tree goes).
ALL_KINDS: tuple[Kind, ...] = (
    OrphanPayload(),
    DanglingHandle(),
    MarkedNode(),
    DirtyResult(),
    DeadAttemptArtifact(),
    EndedJobArtifact(),
    OutputStaging(),
    EmptyJobTree(),
    QuarantinedJob(),
    OrphanSchedulePayload(),
    OrphanConditions(),
)
BY_NAME = {kind.name: kind for kind in ALL_KINDS}
KINDS = tuple(BY_NAME)
GARBAGE = frozenset(kind.name for kind in ALL_KINDS if kind.garbage)
ORPHAN_PAYLOAD = OrphanPayload.name
DANGLING_HANDLE = DanglingHandle.name
MARKED_NODE = MarkedNode.name
DIRTY_RESULT = DirtyResult.name
EMPTY_JOB_TREE = EmptyJobTree.name
QUARANTINED_JOB = QuarantinedJob.name

__all__ = [
    "GARBAGE",
    "KINDS",
    "Cleaner",
    "CleanupResult",
    "Finding",
    "Kind",
    "find_lingering",
]


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

    Without an ``inventory`` given, the session's server is synced with the ensemble first:
    a follower that lags would show a handle published moments ago as missing, its payload
    as an orphan, and the re-check before each deletion reads from that same server.
    """
    if inventory is None:
        cluster.zk.sync(cluster.layout.base)
        inventory = read_inventory(cluster.zk, cluster.layout)
    look = Look(
        cluster,
        inventory,
        cluster.storage.list(cluster.storage_layout.jobs),
        time.time() if now is None else now,
        min_age,
    )
    findings = [finding for kind in ALL_KINDS for finding in kind.find(look)]
    return sorted(findings, key=lambda f: (KINDS.index(f.kind), f.job_id, f.target))


class Cleaner:
    """Removes lingering garbage, each finding by its kind, re-checked just before acting."""

    def __init__(self, cluster: Cluster, *, dry_run: bool) -> None:
        self.cluster = cluster
        self.dry_run = dry_run

    def clean(
        self, findings: list[Finding], progress: Callable[[int], None] | None = None
    ) -> list[CleanupResult]:
        outcomes = []
        for finding in findings:
            if finding.garbage:
                kind = BY_NAME[finding.kind]
                try:
                    outcomes.append(kind.clean(self.cluster, finding, dry_run=self.dry_run))
                except StoreUnavailable:
                    raise
                except ZkStoreError as exc:
                    outcomes.append(
                        CleanupResult(finding, "failed", False, note=f"{type(exc).__name__}: {exc}")
                    )
            if progress is not None:
                progress(1)
        return outcomes
