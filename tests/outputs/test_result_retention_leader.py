"""The leader's retention of results, as daemons run it."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.helpers import hands_client, wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import JobFinished
from zkstore.records.job_records import RunningInfo
from zkstore.records.job_states import CLEAN, DIRTY, SUCCEEDED
from zkstore.records.strict import parse_time, utc_now

pytestmark = pytest.mark.e2e

LONG_AGO = "2020-01-01T00:00:00.000Z"


KEEP = 6.0


def plant_result(cluster: Cluster, job_id: str, state: str, finished: str) -> None:
    """A result as the leader leaves it (a DIRTY one with its index entry), finished then."""
    result = cluster.results.create_dirty(job_id, SUCCEEDED, attempts=1)
    if state == CLEAN:
        result = cluster.results.mark_clean(job_id)
    assert result.version is not None
    cluster.zk.set(
        cluster.layout.result(job_id),
        replace(result, finished=parse_time(finished)).to_bytes(),
        version=result.version,
    )


def test_retention_deletes_only_clean_results_past_their_age(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """Old CLEAN: deleted at the first pass. Young CLEAN: kept until it is KEEP old. DIRTY
    (its cleanup waits for a driver): never deleted, however old, until it is clean. An id
    whose result expired runs again."""
    local = LocalCluster(
        runtime_config, tmp_path / "rt", restart_backoff=0.2, extra_args=("--keep-results", "6s")
    )
    with Cluster.open(runtime_config) as cluster, hands_client(runtime_config) as client:
        try:
            plant_result(cluster, "old", CLEAN, LONG_AGO)
            plant_result(cluster, "stuck", DIRTY, LONG_AGO)
            running = RunningInfo(
                version=None, attempt=1, host="h", pid=1, started=parse_time(utc_now())
            )
            cluster.zk.create(
                cluster.layout.running("stuck"), running.to_bytes(), ephemeral=True, makepath=True
            )
            with pytest.raises(JobFinished):
                client.submit_function(jobs.flaky, str(tmp_path / "x"), 1, job_id="old")

            local.start_daemon("d1")
            wait_for(lambda: cluster.results.get("old") is None, timeout=60, what="old deleted")
            plant_result(cluster, "young", CLEAN, utc_now())
            planted = time.monotonic()
            # passes run every second: by then several have seen it younger than KEEP
            wait_for(lambda: time.monotonic() - planted > KEEP - 2, timeout=60)
            assert cluster.results.get("young") is not None, "deleted before its age"
            wait_for(lambda: cluster.results.get("young") is None, timeout=60, what="young")
            assert time.monotonic() - planted >= KEEP - 0.5
            stuck = cluster.results.get("stuck")
            assert stuck is not None and stuck.state == DIRTY, "never a DIRTY one"

            cluster.zk.delete(cluster.layout.running("stuck"))  # the driver goes away
            wait_for(lambda: cluster.results.get("stuck") is None, timeout=60, what="stuck")
            assert cluster.zk.exists(cluster.layout.cleanup_entry("stuck")) is None

            out = tmp_path / "again"
            client.submit_function(jobs.flaky, str(out), 1, job_id="old")
            assert client.wait("old", timeout=60).outcome == SUCCEEDED
            assert list(jobs.read_marks(str(out))) == ["attempt-1"]
        finally:
            local.stop()
