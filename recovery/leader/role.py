"""What the leader's helpers (its actions, its retention passes) may use of one leadership.

:class:`~recovery.leader.grant.LeaderProcess` is the one implementation; the helpers are typed
against this protocol so that they sit below the leader in the import graph (the leader builds
them, they never import it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from recovery.leader.job_conditions import JobConditions
from recovery.leader.loop import Loop
from recovery.leader.placement import Fleet
from recovery.leader.requests_seen import RequestsSeen
from recovery.settings import DaemonSettings
from zkstore.cluster.fleet_protocol import FleetReading
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.lifecycle.outboxcap import OutboxCounts
from zkstore.zookeeper.clock import ServerClock
from zkstore.zookeeper.ops import Fence

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["LeaderRole"]


class LeaderRole(Protocol):
    """One leadership as its helpers see it: every write they make carries :attr:`fence`, and
    everything they schedule goes through the leader's loop."""

    cluster: Cluster
    settings: DaemonSettings
    fence: Fence
    loop: Loop
    fleet: Fleet
    #: ZooKeeper's time (:mod:`zkstore.zookeeper.clock`)
    clock: ServerClock
    #: the fleet's protocol (:mod:`zkstore.cluster.fleet_protocol`)
    protocol: FleetReading
    #: the outbox's entries per job, and what more may be written (invariant 15)
    outbox_counts: OutboxCounts
    #: the conditions kept on jobs (zkstore/conditions.py)
    conditions: JobConditions
    #: when this leadership first saw each attempt's cancel and stop
    requests_seen: RequestsSeen

    @property
    def active(self) -> bool:
        """True while this leadership holds (not deposed, not stopped)."""
        ...

    def post(self, *job_ids: str) -> None:
        """Reconcile these jobs again, soon, on the loop."""
        ...

    def post_at(self, when: float, job_id: str) -> None:
        """Reconcile ``job_id`` again at ``when`` (monotonic seconds)."""
        ...

    def watch_job(self, job_id: str, *paths: str) -> None:
        """Reconcile ``job_id`` again when any of ``paths`` changes."""
        ...

    def expect_start(self, job: JobSnapshot, attempt: int) -> None:
        """``attempt`` of ``job`` was placed (its driver's start may need no look)."""
        ...

    def job_done(self, job_id: str) -> None:
        """Forget ``job_id``: it left the current jobs."""
        ...

    def job_quarantined(self, job_id: str) -> None:
        """``job_id`` went to quarantine: look at the jobs waiting for it."""
        ...
