"""The outbox's size, as the status page's view and ``/metrics`` see it: events recorded by a
leader's transaction and not yet taken by a receiver."""

from __future__ import annotations

from typing import Any, cast

import pytest

from recovery.observe.cluster_view import read_view
from recovery.observe.metrics import ClusterCollector
from zkstore.cluster import Cluster
from zkstore.lifecycle.outbox import Event, Outbox, notification_ops
from zkstore.records.strict import utc_moment

pytestmark = pytest.mark.integration


def test_pending_notifications_are_counted_and_exported(cluster: Cluster) -> None:
    assert read_view(cluster).notifications_pending == 0, "no outbox yet: none"
    Outbox(cluster.zk, cluster.layout).ensure()
    events = [Event(job_id="j", attempt=n, state="ATTEMPT_FAILED", at=utc_moment()) for n in (1, 2)]
    cluster.zk.commit(notification_ops(cluster.layout, events, ["http://127.0.0.1:9/hook"]))
    view = read_view(cluster)
    assert view.notifications_pending == 2
    collector = ClusterCollector(cast(Any, None), cast(Any, None))
    found = {m.name: m for m in collector._cluster(view)}
    assert found["zkstore_notifications_pending"].samples[0].value == 2
