"""The leader's batch over many jobs: slots, one broken job among many, a backlog that drains.

Real daemons and drivers as processes; every job records when it ran (``tests.jobs``), so the
tests assert what happened, not what the daemon's log says.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.helpers import wait_quarantined
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.records.job_records import JobStatus
from zkstore.records.job_states import PENDING, SUCCEEDED
from zkstore.records.strict import parse_time, utc_now

pytestmark = pytest.mark.e2e


def busiest(outs: list[Path]) -> int:
    """The most ``sleeper`` jobs that ran at the same moment."""
    spans = []
    for out in outs:
        marks = jobs.read_marks(str(out))
        spans.append((marks["attempt-1"]["time"], marks["finished"]["time"]))
    return max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)


def test_a_batch_of_a_new_and_a_pending_job_respects_one_driver_slot(
    runtime_config: StoreConfig, client: Client, tmp_path: Path
) -> None:
    """[Initialize(a), Start(b)] in one batch with --max-drivers 1: one driver at a time.

    Before the fix, initializing ``a`` reconciled it again from inside the batch, which counted
    the live drivers but not ``b``'s start still pending in the batch: both started."""
    outs = [tmp_path / "a", tmp_path / "b"]
    client.submit_function(jobs.sleeper, str(outs[0]), 1.5, job_id="a")
    client.submit_function(jobs.sleeper, str(outs[1]), 1.5, job_id="b")
    with Cluster.open(runtime_config) as cluster:  # b was seen by an earlier leader: PENDING
        status = JobStatus(version=None, state=PENDING, updated=parse_time(utc_now()))
        cluster.state.put_status("b", status, expected_version=None)
    local = LocalCluster(runtime_config, tmp_path / "rt", extra_args=("--max-drivers", "1"))
    try:
        local.start_daemon("d1")
        for job_id in ("a", "b"):
            assert client.wait(job_id, timeout=90).outcome == SUCCEEDED
    finally:
        local.stop()
    assert busiest(outs) == 1


def test_a_corrupt_result_record_quarantines_its_job_and_the_others_run(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """Invariant 6 for records, not only handles: garbage in ``results/b`` while a, b and c wait
    for a leader. Before the fix, the new leader's first pass died on it, for every job."""
    for job_id in ("a", "b", "c"):
        client.submit_function(jobs.steps, str(tmp_path / job_id), 2, 0.01, job_id=job_id)
    with Cluster.open(runtime_config) as cluster:
        cluster.zk.create(cluster.layout.result("b"), b'{"state": "DIRTY", "outcome": ')
    local.start_daemon("d1")
    for job_id in ("a", "c"):
        assert client.wait(job_id, timeout=60).outcome == SUCCEEDED
    assert "results/b" in wait_quarantined(client, "b").reason
    assert local.daemons["d1"].alive


def test_a_freed_slot_is_refilled_at_once_not_at_the_next_periodic_pass(
    runtime_config: StoreConfig, client: Client, tmp_path: Path
) -> None:
    """Four quick jobs on one slot with a periodic pass every 10 minutes: only a driver's exit
    can start the next job, so all four finishing proves the slot is refilled on the event."""
    outs = [tmp_path / f"o{i}" for i in range(4)]
    ids = [
        client.submit_function(jobs.sleeper, str(out), 0.1, job_id=f"q{i}")
        for i, out in enumerate(outs)
    ]
    local = LocalCluster(
        runtime_config,
        tmp_path / "rt",
        extra_args=("--max-drivers", "1", "--reconcile-interval", "600"),
    )
    try:
        local.start_daemon("d1")
        for job_id in ids:
            assert client.wait(job_id, timeout=120).outcome == SUCCEEDED
    finally:
        local.stop()
    assert busiest(outs) == 1
