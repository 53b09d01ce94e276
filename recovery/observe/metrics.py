"""The Prometheus metrics of one daemon: its own counters, and the cluster read at scrape time.

One registry per daemon (no multiprocess mode: it disables custom collectors). What the cluster
is doing (jobs by state, attempts, checkpoint ages, daemons, the leader) is read from ZooKeeper
by a custom collector when Prometheus scrapes, so that every daemon, leader or not, tells the
same truth; what only this daemon knows (whether it leads, its takeovers, the drivers it started,
the HTTP requests it served) it counts itself.

Names follow Prometheus' conventions: the ``zkstore_`` prefix, base units in the name
(``_seconds``), ``_total`` for counters, labels for dimensions (``state``, ``job_id``).
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from recovery.observe.cluster_view import ClusterView, EndedJobs, Observed, read_view
from recovery.shared.memory import own_memory
from zkstore.cluster.pools import counts as pool_counts
from zkstore.conditions import CANNOT_FIRE, NOTIFICATION_DROPPED
from zkstore.errors import ZkStoreError
from zkstore.jobs.runspec import DEFAULT_POOL
from zkstore.records.job_states import (
    CLEANING,
    NEEDS_UPGRADE,
    OUTCOMES,
    QUARANTINED,
    RUNNING,
    STATUS_STATES,
    SUBMITTED,
)

__all__ = ["JOB_STATES", "ClusterCollector", "DaemonMetrics", "LeadershipStats"]

logger = logging.getLogger(__name__)

#: Every state a job can be shown in, so that a state with no job is a 0, not a gap.
JOB_STATES = (
    SUBMITTED,
    *STATUS_STATES,
    RUNNING,
    CLEANING,
    QUARANTINED,
    NEEDS_UPGRADE,
    *OUTCOMES,
)


@dataclass
class LeadershipStats:
    """What this daemon knows of its own leaderships (written by the loop thread only, but
    ``refused``: the notification events its leaderships did not write, per why: "job" or
    "outbox", counted by :class:`~zkstore.lifecycle.outboxcap.OutboxCounts`)."""

    acquired: int = 0
    lost: int = 0
    since: float | None = None
    last_takeover_seconds: float | None = None
    refused: collections.Counter[str] = field(default_factory=collections.Counter)
    #: conditions its leaderships made hold on jobs and schedules, per type
    #: (:mod:`zkstore.conditions`; counted by the conditions' writers, on any thread)
    conditions: collections.Counter[str] = field(default_factory=collections.Counter)

    def granted(self, took: float) -> None:
        """Leadership taken; its first reconcile of every job took ``took`` seconds."""
        self.acquired += 1
        self.since = time.time()
        self.last_takeover_seconds = took

    def revoked(self) -> None:
        self.lost += 1
        self.since = None


class DaemonMetrics:
    """The registry of one daemon, with the metrics its HTTP side counts itself."""

    def __init__(self, daemon: Observed, stats: LeadershipStats) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.collector = ClusterCollector(daemon, stats)
        self.registry.register(self.collector)
        ProcessCollector(registry=self.registry)
        self.requests = Counter(
            "zkstore_http_requests",
            "HTTP requests served by this daemon",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "zkstore_http_request_duration_seconds",
            "Time to answer an HTTP request",
            ["route"],
            registry=self.registry,
        )
        self.refused_connections = Counter(
            "zkstore_http_connections_refused",
            "HTTP connections answered 503 and closed: --http-max-connections were open",
            registry=self.registry,
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(route).observe(seconds)


class ClusterCollector(Collector):
    """Collects at scrape time: this daemon's standing, then the cluster from ZooKeeper.

    A scrape during an outage still answers: ``zkstore_zookeeper_up`` (or
    ``zkstore_storage_up``) is 0 and the metrics read from there are left out.
    """

    def __init__(self, daemon: Observed, stats: LeadershipStats) -> None:
        self.daemon = daemon
        self.stats = stats
        #: the finished jobs, read once each: a scrape costs what the live jobs do
        self.ended = EndedJobs()

    def collect(self) -> Iterator[Metric]:
        yield from self._own()
        cluster = self.daemon.cluster
        view: ClusterView | None = None
        if cluster is not None and cluster.zk.connected:
            try:
                view = read_view(cluster, self.ended)
            except ZkStoreError as exc:
                logger.debug("metrics: cannot read the cluster: %s", exc)
        yield _gauge(
            "zkstore_zookeeper_up", "1 if ZooKeeper answered this scrape", view is not None
        )
        storage_up = cluster is not None and cluster.storage.probe()
        yield _gauge("zkstore_storage_up", "1 if the payload storage answered", storage_up)
        if view is not None:
            yield from self._cluster(view)

    def _own(self) -> Iterator[Metric]:
        daemon_id = self.daemon.settings.daemon_id
        leader = GaugeMetricFamily(
            "zkstore_leader", "1 if this daemon is the leader, else 0", labels=["daemon"]
        )
        leader.add_metric([daemon_id], 1.0 if self.daemon.is_leader else 0.0)
        yield leader
        stats = self.stats
        for name, text, value in (
            ("zkstore_leadership_acquired", "Leaderships this daemon took", stats.acquired),
            ("zkstore_leadership_lost", "Leaderships this daemon lost or gave up", stats.lost),
            (
                "zkstore_driver_starts",
                "Driver processes this daemon started",
                self.daemon.launcher.launched,
            ),
        ):
            counter = CounterMetricFamily(name, text, labels=["daemon"])
            counter.add_metric([daemon_id], float(value))
            yield counter
        refused = CounterMetricFamily(
            "zkstore_notifications_refused",
            "Notification events this daemon's leaderships did not write: the job's bound "
            "(--notify-max-per-job) or the outbox's was reached",
            labels=["daemon", "reason"],
        )
        for reason in ("job", "outbox"):
            refused.add_metric([daemon_id, reason], float(stats.refused[reason]))
        yield refused
        raised = CounterMetricFamily(
            "zkstore_conditions_raised",
            "Conditions this daemon's leaderships put on jobs and schedules: what the leader "
            "does not do for them (a window it will not fire, a notification it dropped)",
            labels=["daemon", "type"],
        )
        for kind in sorted({CANNOT_FIRE, NOTIFICATION_DROPPED, *stats.conditions}):
            raised.add_metric([daemon_id, kind], float(stats.conditions[kind]))
        yield raised
        memory = own_memory()
        if memory.rss is not None:
            rss = GaugeMetricFamily(
                "zkstore_daemon_resident_memory_bytes",
                "This daemon's resident memory (it should not grow with the jobs it has seen)",
                labels=["daemon"],
            )
            rss.add_metric([daemon_id], float(memory.rss))
            yield rss
        heap = GaugeMetricFamily(
            "zkstore_daemon_python_heap_blocks",
            "Memory blocks this daemon's Python allocator holds (its objects and their small "
            "buffers)",
            labels=["daemon"],
        )
        heap.add_metric([daemon_id], float(memory.heap_blocks))
        yield heap
        if stats.last_takeover_seconds is not None:
            yield _gauge(
                "zkstore_last_takeover_duration_seconds",
                "Time this daemon's last takeover took to look at every job",
                stats.last_takeover_seconds,
            )

    def _cluster(self, view: ClusterView) -> Iterator[Metric]:
        states = view.states()
        jobs = GaugeMetricFamily("zkstore_jobs", "Jobs by state", labels=["state"])
        for state in (*JOB_STATES, *sorted(set(states) - set(JOB_STATES))):
            jobs.add_metric([state], float(states.get(state, 0)))
        yield jobs
        yield _gauge(
            "zkstore_daemons", "Daemons in the fleet (members)", sum(d.up for d in view.daemons)
        )
        slots = GaugeMetricFamily(
            "zkstore_daemon_driver_slots", "Driver slots of each daemon", labels=["daemon"]
        )
        used = GaugeMetricFamily(
            "zkstore_daemon_driver_slots_used",
            "Attempts placed on each daemon",
            labels=["daemon"],
        )
        for daemon in view.daemons:
            if not (daemon.up or daemon.lost):
                continue  # drained and down: nothing placed on it
            slots.add_metric([daemon.daemon_id], daemon.slots)
            used.add_metric([daemon.daemon_id], daemon.used)
        yield slots
        yield used
        if view.leader_since is not None:
            yield _gauge(
                "zkstore_leader_since_timestamp_seconds",
                "When the current leader took over",
                view.leader_since.timestamp(),
            )
        yield from _per_job(view)
        running, waiting = pool_counts(view.jobs.values())
        pools = GaugeMetricFamily(
            "zkstore_pool_jobs",
            "Jobs of each pool running (attempts placed: launching, running, or lost and not "
            "yet replaced) and waiting for a start",
            labels=["pool", "state"],
        )
        for pool in sorted({DEFAULT_POOL, *running, *waiting}):
            pools.add_metric([pool, "running"], float(running[pool]))
            pools.add_metric([pool, "waiting"], float(waiting[pool]))
        yield pools
        behind = GaugeMetricFamily(
            "zkstore_schedule_windows_behind",
            "Windows of a schedule up to now that no leader decided yet (a catch-up being "
            "worked off a budget a pass, or no leader)",
            labels=["schedule"],
        )
        for row in view.schedules:
            if isinstance(row.get("behind"), int):
                behind.add_metric([str(row["name"])], float(row["behind"]))
        yield behind
        yield _gauge(
            "zkstore_notifications_pending",
            "Notification events not yet taken by a receiver (zkstore daemon/submit --notify)",
            view.notifications_pending,
        )
        yield _gauge(
            "zkstore_cluster_read_duration_seconds",
            "Time this scrape took to read the cluster from ZooKeeper",
            view.read_seconds,
        )


def _per_job(view: ClusterView) -> Iterator[Metric]:
    live = view.live_jobs()
    families = {
        "attempts": GaugeMetricFamily(
            "zkstore_job_attempts", "Attempts started of a job not yet finished", labels=["job_id"]
        ),
        "failures": GaugeMetricFamily(
            "zkstore_job_failures",
            "Attempts of a job that failed (its own code; each restarted until max attempts)",
            labels=["job_id"],
        ),
        "lost": GaugeMetricFamily(
            "zkstore_job_lost_attempts",
            "Attempts of a job lost to the infrastructure (restarted, not counted as failures)",
            labels=["job_id"],
        ),
        "age": GaugeMetricFamily(
            "zkstore_job_last_checkpoint_age_seconds",
            "Age of the latest checkpoint of a running job",
            labels=["job_id"],
        ),
    }
    for job in live:
        if job.attempt is not None:
            families["attempts"].add_metric([job.job_id], float(job.attempt))
        if job.status is not None:
            families["failures"].add_metric([job.job_id], float(job.status.failures))
            families["lost"].add_metric([job.job_id], float(job.status.lost))
        age = view.checkpoint_age(job.job_id)
        if age is not None:
            families["age"].add_metric([job.job_id], age)
    yield from families.values()


def _gauge(name: str, text: str, value: float | bool) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, value=float(value))
