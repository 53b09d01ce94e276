"""What a client checks a job or a schedule against before it writes anything (invariant 17):
the bounds and policies the cluster's leader published (:mod:`zkstore.cluster.cluster_settings`),
or, for a cluster whose leader has not (a fleet below protocol 4), the client's own environment as
before. Each refusal is the leader's words, the record's value and how to change it (the
daemons' flag), with the exit code of its error class."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from zkstore.cluster.cluster_settings import SHOWN_BY, ClusterSettings, key_for, read_settings
from zkstore.config import StoreConfig
from zkstore.errors import OutOfBounds
from zkstore.layout import Layout
from zkstore.lifecycle.destinations import ALLOWED_ENV, Destinations
from zkstore.schedules.schedule_limits import MIN_INTERVAL_ENV, check_bounds, min_interval_from_env
from zkstore.schedules.schedule_records import ScheduleSpec

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["ClusterPolicy"]


@dataclass(frozen=True)
class ClusterPolicy:
    """What a client checks a job or a schedule against: the leader's record, or (a cluster
    without one) the client's own environment, as before the record existed."""

    record: ClusterSettings | None
    schedule_min_interval: int
    notify_allowed_hosts: tuple[str, ...]

    @classmethod
    def from_record(cls, record: ClusterSettings) -> ClusterPolicy:
        return cls(record, record.schedule_min_interval, record.notify_allowed_hosts)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ClusterPolicy:
        """A cluster without the record: the environment's (``ZKSTORE_SCHEDULE_MIN_INTERVAL``,
        ``ZKSTORE_NOTIFY_ALLOWED_HOSTS``), as every client read before protocol 4."""
        env = Destinations.from_env(environ)
        allowed = tuple(sorted(env.names)) + tuple(str(n) for n in env.networks)
        return cls(None, min_interval_from_env(environ), allowed)

    @classmethod
    def read(cls, zk: ZooKeeper, layout: Layout, config: StoreConfig) -> ClusterPolicy:
        """The policy of the cluster of ``config`` (its record checked with its key)."""
        record = read_settings(zk, layout, key=key_for(config))
        return cls.from_env() if record is None else cls.from_record(record)

    def _source(self, option: str, legacy_env: str) -> str:
        if self.record is None:
            return f"{legacy_env}, the daemons' {option}"
        return f"the leader {self.record.leader_id}'s {option}; {SHOWN_BY} shows it"

    def check_schedule(self, spec: ScheduleSpec, now: datetime) -> None:
        """Refuse (:class:`OutOfBounds`, exit 2) a schedule the leader would not fire."""
        check_bounds(
            spec,
            now,
            self.schedule_min_interval,
            source=self._source("--schedule-min-interval", MIN_INTERVAL_ENV),
        )

    def check_notify(self, url: str | None) -> None:
        """Refuse (:class:`~zkstore.errors.RefusedDestination`, exit 2) a notification URL
        the leader would drop."""
        if not url:
            return
        allowed = ", ".join(self.notify_allowed_hosts) or "none"
        Destinations.parse(self.notify_allowed_hosts).check_url(
            url,
            allowed_by=f"the cluster's allowed hosts ({allowed}: "
            f"{self._source('--notify-allowed-hosts', ALLOWED_ENV)})",
        )

    def check_progress_timeout(self, seconds: float | None) -> None:
        """Refuse a ``--progress-timeout`` under the leader's least (only with a record: a
        cluster without one is checked as before, at the option)."""
        if self.record is None or not seconds:
            return
        least = self.record.progress_timeout_min_ms / 1000
        if seconds < least:
            raise OutOfBounds(
                f"--progress-timeout {seconds:g}s is under the cluster's least, {least:g}s "
                f"({SHOWN_BY} shows it)"
            )
