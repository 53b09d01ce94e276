"""A leader below the daemon, for the notification tests: a leadership as the election makes
it, a state change and its events written in one transaction fenced on it, and the sender's
settings for a test (short deadlines, loopback receivers allowed)."""

from __future__ import annotations

from recovery.leader.notifier import SenderSettings
from zkstore.cluster import Cluster
from zkstore.errors import NotLeader
from zkstore.lifecycle.destinations import Destinations
from zkstore.lifecycle.outbox import Event, notification_ops
from zkstore.lifecycle.retry_backoff import Backoff
from zkstore.records.strict import utc_now
from zkstore.zookeeper.ops import Fence, SetData

#: the sender of a test: a round's deadline of 2 s, short backoffs, a poll every 0.5 s
FAST = SenderSettings(deadline=2.0, backoff=Backoff(0.05, 0.2, jitter=0.2), poll=0.5)
#: the test's receivers listen on loopback, which notifications may reach only when allowed
LOOPBACK = Destinations.parse("127.0.0.1")


def lead(cluster: Cluster) -> tuple[Fence, str]:
    """A leadership as the election makes it: an EPHEMERAL_SEQUENTIAL contender node."""
    node = cluster.zk.create(f"{cluster.layout.election}/n_", ephemeral=True, sequence=True)
    return Fence.check(node, error=NotLeader, description="no longer the leader"), node


def record(cluster: Cluster, fence: Fence, events: list[Event], urls: list[str | None]) -> None:
    """A state change and its events, in one transaction fenced on the leadership."""
    status = f"{cluster.layout.jobs}/state-changes"
    cluster.zk.ensure_path(status)
    ops = [SetData(status, utc_now().encode()), *notification_ops(cluster.layout, events, urls)]
    cluster.zk.commit(ops, fence=fence)
