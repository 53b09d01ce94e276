"""One read of what the API, the status page and the metrics show, from ZooKeeper.

Every read goes through the daemon's :class:`~zkstore.cluster.Cluster` (a thread-safe session
whose every call has a deadline), from the HTTP server's own threads: nothing here ever runs on,
or waits for, the daemon's loop thread, and nothing here writes. A view is read with the same
pipelined reads as ``zkstore jobs list`` (:func:`zkstore.jobs.snapshot.read_snapshots`), plus
the fleet's members, the leader's record and the latest checkpoint of each running job.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from recovery.settings import DaemonSettings
from recovery.shared.fleet_daemons import DaemonInfo, read_daemons
from zkstore.cluster.pools import Pool, read_pools
from zkstore.errors import CorruptRecord
from zkstore.jobs.snapshot import JobSnapshot, read_listing, read_snapshots
from zkstore.layout import is_checkpoint_node_name
from zkstore.records.fleet_records import LeaderInfo
from zkstore.records.job_states import CLEAN
from zkstore.records.record import read_record
from zkstore.records.strict import time_text
from zkstore.schedules.schedule_store import ScheduleStore
from zkstore.schedules.schedule_view import listing as schedule_rows

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = [
    "ClusterView",
    "DaemonInfo",
    "EndedJobs",
    "Launches",
    "Observed",
    "finished",
    "read_jobs",
    "read_view",
]


class Launches(Protocol):
    """The daemon's driver launcher, as the metrics count it."""

    @property
    def launched(self) -> int: ...


class Observed(Protocol):
    """What the HTTP side needs of the daemon it serves (read from other threads)."""

    settings: DaemonSettings

    @property
    def cluster(self) -> Cluster | None: ...

    @property
    def launcher(self) -> Launches: ...

    @property
    def is_leader(self) -> bool: ...


@dataclass
class ClusterView:
    """The cluster as read at ``read_at`` (epoch seconds), in ``read_seconds``."""

    leader: dict[str, Any] | None
    daemons: list[DaemonInfo]
    jobs: dict[str, JobSnapshot]
    #: since when the leader leads (its record's ``since``; None without a readable one)
    leader_since: datetime | None = None
    #: job -> epoch seconds of its latest checkpoint, for the jobs whose driver runs
    checkpoints: dict[str, float] = field(default_factory=dict)
    #: every schedule's row (:func:`zkstore.schedules.schedule_view.listing`): next fire, last run,
    #: state
    schedules: list[dict[str, Any]] = field(default_factory=list)
    #: the pools' records (``R/pools``): their limits and priorities
    pools: dict[str, Pool] = field(default_factory=dict)
    read_at: float = 0.0
    read_seconds: float = 0.0
    #: notification events not yet taken by a receiver (the outbox's entries)
    notifications_pending: int = 0
    #: the finished jobs left out of ``jobs`` (read through :class:`EndedJobs`), by state
    ended: Counter[str] = field(default_factory=Counter)

    def states(self) -> Counter[str]:
        return Counter(job.state for job in self.jobs.values()) + self.ended

    def live_jobs(self) -> list[JobSnapshot]:
        """Jobs not finished and cleaned up (what ``jobs list`` shows without ``--all``)."""
        return [job for job in self.jobs.values() if not finished(job)]

    def checkpoint_age(self, job_id: str) -> float | None:
        taken = self.checkpoints.get(job_id)
        return None if taken is None else max(0.0, self.read_at - taken)


def finished(job: JobSnapshot) -> bool:
    return job.result is not None and job.result.state == CLEAN


def read_jobs(cluster: Cluster) -> dict[str, JobSnapshot]:
    """Every job with any trace: exactly the reads of ``zkstore jobs list``."""
    listing = read_listing(cluster.zk, cluster.layout)
    return read_snapshots(cluster.zk, cluster.layout, listing.job_ids(), listing=listing)


class EndedJobs:
    """The finished jobs (a CLEAN result and no other trace) by state, kept between reads, for
    a reader that only counts them (``/metrics``): each is read once, when its result first
    appears, and forgotten when its result goes (retention), so that what a read costs does not
    grow with the jobs that ended (one listing of the results' names, pipelined with the other
    parents). Safe from several threads."""

    def __init__(self) -> None:
        self._states: dict[str, str] = {}
        self._lock = threading.Lock()

    def read(self, cluster: Cluster) -> tuple[dict[str, JobSnapshot], Counter[str]]:
        """The snapshots of every job but the finished ones already known, and the finished
        ones by state."""
        listing = read_listing(cluster.zk, cluster.layout)
        live = listing.current_jobs | listing.job_dirs | listing.quarantine | listing.cleanup
        ended = (listing.results or frozenset()) - live
        with self._lock:
            known = {job: self._states[job] for job in ended if job in self._states}
        new = [job for job in ended if job not in known]
        jobs = read_snapshots(cluster.zk, cluster.layout, [*live, *new], listing=listing)
        for job_id in new:
            found = jobs.get(job_id)
            if found is not None and finished(found):
                known[job_id] = found.state
                del jobs[job_id]
        with self._lock:
            self._states = known  # a result gone (retention) is forgotten
        return jobs, Counter(known.values())


def read_view(cluster: Cluster, ended: EndedJobs | None = None) -> ClusterView:
    """Leader, daemons, every job, the latest checkpoint of each running job, and the
    schedules; with ``ended``, the finished jobs it knows already are only counted
    (:attr:`ClusterView.ended`), not read again."""
    started = time.monotonic()
    read_at = time.time()
    counted: Counter[str] = Counter()
    if ended is None:
        jobs = read_jobs(cluster)
    else:
        jobs, counted = ended.read(cluster)
    info = _leader(cluster)
    leader = _leader_json(info)
    view = ClusterView(
        leader=leader,
        daemons=read_daemons(cluster.zk, cluster.layout, leader_id(info)),
        leader_since=info.since if isinstance(info, LeaderInfo) else None,
        jobs=jobs,
        checkpoints=_latest_checkpoints(cluster, [j for j in jobs.values() if j.driver_present]),
        schedules=schedule_rows(
            ScheduleStore.for_config(cluster.config, cluster.zk), cluster.layout
        ),
        pools=read_pools(cluster.zk, cluster.layout),
        read_at=read_at,
        notifications_pending=_outbox_size(cluster),
        ended=counted,
    )
    view.read_seconds = time.monotonic() - started
    return view


def _outbox_size(cluster: Cluster) -> int:
    """How many notification entries wait for a receiver (one children call)."""
    found = cluster.zk.children_many([cluster.layout.notifications])[0]
    return len(found or ())


def _leader(cluster: Cluster) -> LeaderInfo | CorruptRecord | None:
    """The leader's record, None if there is none, the error if it is garbage."""
    try:
        return read_record(cluster.zk, LeaderInfo, cluster.layout.leader_info)
    except CorruptRecord as exc:
        return exc


def leader_id(info: LeaderInfo | CorruptRecord | None) -> str | None:
    return info.daemon_id if isinstance(info, LeaderInfo) else None


def _leader_json(info: LeaderInfo | CorruptRecord | None) -> dict[str, Any] | None:
    if isinstance(info, CorruptRecord):
        return {"error": "unreadable leader record"}
    if info is None:
        return None
    return {
        "id": info.daemon_id,
        "host": info.host,
        "pid": info.pid,
        "since": time_text(info.since),
    }


def _latest_checkpoints(cluster: Cluster, jobs: list[JobSnapshot]) -> dict[str, float]:
    """When each job's latest checkpoint was published (its znode's creation time)."""
    layout = cluster.layout
    children = cluster.zk.children_many([layout.checkpoints(job.job_id) for job in jobs])
    latest: list[tuple[str, str]] = []
    for job, names in zip(jobs, children, strict=True):
        valid = sorted(n for n in names or () if is_checkpoint_node_name(n))
        if valid:
            latest.append((job.job_id, f"{layout.checkpoints(job.job_id)}/{valid[-1]}"))
    stats = cluster.zk.exists_many([path for _, path in latest])
    return {
        job_id: stat.ctime / 1000.0
        for (job_id, _), stat in zip(latest, stats, strict=True)
        if stat is not None
    }
