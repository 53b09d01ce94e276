"""A look inside each job's node first (the leader's looks at a few jobs): the same snapshots
as reading every record, with fewer reads."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests import jobs
from tests.helpers import requests_sent
from zkstore.cluster import Cluster
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.snapshot import read_snapshots
from zkstore.jobs.stops import EndRequest, StopRequest
from zkstore.records.job_records import JobStatus, RunningInfo
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.ops import Create
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def count_reads(cluster: Cluster, look_inside: bool, ids: list[str]) -> tuple[dict, int]:
    """The snapshots, and how many requests reading them sent."""
    with requests_sent(cluster.zk) as sent:
        found = read_snapshots(cluster.zk, cluster.layout, ids, look_inside=look_inside)
    return found, len(sent)


def test_looking_inside_reads_the_same_snapshots_with_fewer_reads(
    cluster: Cluster, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    layout = cluster.layout
    now = utc_now()
    for job_id in ("pending", "starting", "ended", "stopped", "running"):
        cluster.jobs.submit(JobDefinition.for_function(job_id, jobs.noop))
    for job_id in ("starting", "ended", "stopped", "running"):
        status = JobStatus(
            version=None, state="STARTING", attempt=1, updated=parse_time(now), daemon_id="d"
        )
        cluster.state.put_status(job_id, status, expected_version=None)
    end = EndRequest(
        version=None, attempt=1, reason="STOPPED", requested=parse_time(now), grace_ms=1000
    )
    cluster.zk.commit([Create(layout.end("ended"), end.to_bytes())])
    stop = StopRequest(version=None, requested=parse_time(now))
    cluster.zk.commit([Create(layout.stop("stopped"), stop.to_bytes())])
    running = RunningInfo(version=None, attempt=1, host="h", pid=1, started=parse_time(now))
    stand_in_session().commit(
        [Create(layout.running("running"), running.to_bytes(), ephemeral=True)]
    )
    cluster.zk.ensure_path(layout.job_dir("pending"))
    cluster.zk.commit([Create(layout.cancel("pending"), b"garbage")])  # an unreadable record
    ids = ["pending", "starting", "ended", "stopped", "running", "nothing"]

    every, all_reads = count_reads(cluster, False, ids)
    inside, fewer_reads = count_reads(cluster, True, ids)

    assert set(every) == {"pending", "starting", "ended", "stopped", "running"}
    assert inside == every, "the same snapshots, errors included"
    assert every["ended"].end is not None and every["pending"].errors
    assert fewer_reads < all_reads, (fewer_reads, all_reads)
