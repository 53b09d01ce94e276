"""What a ``/metrics`` scrape costs ZooKeeper does not grow with the jobs that ended: each
finished job is read once, when its result appears
(:class:`recovery.observe.cluster_view.EndedJobs`), and counted from then on; a result that goes
(retention) is forgotten. Requests are counted at the kazoo client, every one the scrape sends to
the real server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import pytest
from prometheus_client.core import Metric

from recovery.observe.metrics import ClusterCollector, LeadershipStats
from zkstore.cluster import Cluster
from zkstore.jobs.definition import JobDefinition
from zkstore.records.job_states import FAILED, SUCCEEDED

pytestmark = pytest.mark.integration


def noop(ctx: object) -> None:
    return None


class Daemon:
    """What the collector reads of a daemon: its cluster (no launcher, not the leader)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.settings = cast(Any, type("Settings", (), {"daemon_id": "d1"})())
        self.launcher = cast(Any, type("Launcher", (), {"launched": 0})())
        self.is_leader = False


@contextmanager
def counted(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every request the cluster's client sends meanwhile, by its type."""
    client = cluster.zk.kazoo
    real = client._call
    sent: list[str] = []

    def counting(request: Any, async_object: Any) -> Any:
        sent.append(type(request).__name__)
        return real(request, async_object)

    with monkeypatch.context() as patch:
        patch.setattr(client, "_call", counting)
        yield sent


def finish(cluster: Cluster, first: int, count: int, outcome: str = SUCCEEDED) -> None:
    for n in range(first, first + count):
        job = f"ended-{n:04d}"
        cluster.results.create_dirty(job, outcome, attempts=1)
        cluster.results.mark_clean(job)


def jobs_by_state(metrics: list[Metric]) -> dict[str, float]:
    (family,) = [m for m in metrics if m.name == "zkstore_jobs"]
    return {s.labels["state"]: s.value for s in family.samples if s.value}


def test_a_scrape_reads_no_more_for_more_ended_jobs(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.jobs.submit(JobDefinition.for_function("live", noop))
    finish(cluster, 0, 5)
    collector = ClusterCollector(cast(Any, Daemon(cluster)), LeadershipStats())
    assert jobs_by_state(list(collector.collect())) == {"SUBMITTED": 1, SUCCEEDED: 5}
    with counted(cluster, monkeypatch) as few:
        list(collector.collect())

    finish(cluster, 5, 200)
    finish(cluster, 205, 10, FAILED)
    with counted(cluster, monkeypatch) as first:
        found = jobs_by_state(list(collector.collect()))
    assert found == {"SUBMITTED": 1, SUCCEEDED: 205, FAILED: 10}
    assert len(first) > len(few), "the new results are read, once"
    with counted(cluster, monkeypatch) as many:
        assert jobs_by_state(list(collector.collect())) == found
    assert sorted(many) == sorted(few), (len(few), len(many))

    # a result removed (retention) is no longer counted
    for n in range(3):
        cluster.zk.kazoo.delete(cluster.layout.result(f"ended-{n:04d}"))
    found = jobs_by_state(list(collector.collect()))
    assert found == {"SUBMITTED": 1, SUCCEEDED: 202, FAILED: 10}
