"""A real three-server ZooKeeper ensemble: running jobs ride out ZooKeeper blips.

The chaos runs (every scenario, their invariants) are ``make chaos``, which CI runs after the
suite; their invariant checks are tested in ``test_chaos_checks.py``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.helpers import hands_client, wait_for
from zkstore.config import DEFAULT_SESSION_TIMEOUT, StoreConfig
from zkstore.records.job_states import SUCCEEDED
from zkstore_dev.chaos import job
from zkstore_dev.ensemble import ZooKeeperEnsemble

pytestmark = pytest.mark.e2e


@pytest.fixture
def ensemble(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(tick_time_ms=2000, work_dir=tmp_path / "zk") as started:
        yield started


def test_running_jobs_ride_out_a_leader_kill_and_a_rolling_restart(
    ensemble: ZooKeeperEnsemble, tmp_path: Path
) -> None:
    """At the default session timeout, no job restarts: every attempt stays the first. The
    ensemble elects a new leader when its leader dies, and the old one rejoins as follower."""
    config = StoreConfig(
        zk_hosts=ensemble.connect_string,
        root="/blips",
        storage_url=f"file://{tmp_path}/storage",
        session_timeout=DEFAULT_SESSION_TIMEOUT,
    )
    local = LocalCluster(config, tmp_path / "rt")
    outs = {f"blip{n}": tmp_path / "out" / f"blip{n}" for n in range(1, 4)}
    try:
        local.start_daemon("d1")
        local.start_daemon("d2")
        local.wait_for_leader(timeout=60)
        with hands_client(config) as client:
            for job_id, out in outs.items():
                client.submit_function(job.sum_of_squares, str(out), None, 0.2, job_id=job_id)
            progressed_since(outs, time.time(), "jobs start")
            leader = ensemble.leader()
            assert leader is not None and len(ensemble.followers()) == 2
            ensemble.kill_member(leader)
            successor = ensemble.wait_serving(timeout=60)
            assert successor != leader and ensemble.mode(leader) is None
            progressed_since(outs, time.time(), "progress after the leader kill")
            ensemble.start_member(leader)
            assert ensemble.wait_serving(timeout=60) == successor, "the old one rejoins as follower"
            for n in ensemble.members:  # rolling restart
                ensemble.stop_member(n)
                ensemble.start_member(n)
                ensemble.wait_serving(timeout=60)
                progressed_since(outs, time.time(), f"progress after restarting server {n}")
            for out in outs.values():
                (out / job.STOP).touch()
            for job_id in outs:
                result = client.wait(job_id, timeout=120)
                assert (result.outcome, result.attempts) == (SUCCEEDED, 1), job_id
    finally:
        local.stop()
    for job_id, out in outs.items():
        assert [a.attempt for a in job.attempts(out)] == [1], f"{job_id} never restarted"


def progressed_since(outs: dict[str, Path], moment: float, what: str) -> None:
    wait_for(
        lambda: all(max(job.progress_times(out), default=0) > moment for out in outs.values()),
        timeout=60,
        what=what,
    )
