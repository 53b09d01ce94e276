"""A quarantined job whose driver still runs (issue 21, finding 4).

A job is quarantined while its driver runs when a record of it turns unreadable (here its
handle in ``currentJobs``): the leader stops acting on it, the driver goes on, paused here, and
holds its slot. Through the installed ``zkstore`` script: ``quarantine release`` refuses and
says how to end it; ``jobs cancel`` ends the driver, and the job ends CANCELLED and is cleaned.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests.cli import script
from tests.helpers import SESSION_TIMEOUT, alive, wait_for
from zkstore.config import StoreConfig
from zkstore.records.job_states import CANCELLED, QUARANTINED
from zkstore_dev.chaos import job

pytestmark = pytest.mark.e2e

START = SESSION_TIMEOUT * 10


def test_jobs_cancel_ends_a_quarantined_jobs_live_driver(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    local.extra_args = ("--reconcile-interval", "0.5")
    local.start_daemon("d1")
    local.wait_for_leader(timeout=START)
    out = tmp_path / "out"
    job_id = client.submit_function(job.sum_of_squares, str(out), None, 0.2, job_id="held")
    wait_for(lambda: len(job.progress_times(out)) >= 2, timeout=90, what="progress")
    assert script(runtime_config, "control pause", job_id).returncode == 0
    wait_for(lambda: client.status(job_id).state == "PAUSED", timeout=60, what="paused")
    pid = local.driver_pid(job_id)
    assert pid is not None
    handle = client.cluster.layout.job_handle(job_id)
    client.cluster.zk.set(handle, b"{garbage")
    wait_for(lambda: client.status(job_id).state == QUARANTINED, timeout=60, what="quarantined")
    assert alive(pid), "the driver of a quarantined job goes on"

    refused = script(runtime_config, "quarantine release", job_id)
    assert refused.returncode == 5, refused
    assert f"pid {pid}" in refused.stderr, refused.stderr
    assert f"zkstore jobs cancel {job_id}" in refused.stderr, refused.stderr
    resume = script(runtime_config, "control resume", job_id)
    assert resume.returncode == 5, resume
    assert f"zkstore jobs cancel {job_id}" in resume.stderr, resume.stderr

    cancelled = script(runtime_config, "jobs cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "its driver, still running, is asked to stop" in cancelled.stdout, cancelled.stdout
    wait_for(lambda: not alive(pid), timeout=SESSION_TIMEOUT * 5, what="the driver ended")
    result = client.wait(job_id, timeout=60)
    assert result.outcome == CANCELLED
    wait_for(lambda: client.status(job_id).state == CANCELLED, timeout=60, what="cleaned up")
    assert local.driver_pid(job_id) is None


def test_a_quarantined_jobs_live_driver_keeps_its_slot_until_it_is_gone(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """Issue 50: the driver of a job quarantined while it runs still holds a driver slot: a
    daemon of one slot takes no other job until that driver is gone, then takes it."""
    import os
    import signal

    local.start_daemon("d1", "--max-drivers", "1")
    local.wait_for_leader(timeout=START)
    out = tmp_path / "out"
    held = client.submit_function(job.sum_of_squares, str(out), None, 0.2, job_id="held")
    wait_for(lambda: len(job.progress_times(out)) >= 2, timeout=90, what="progress")
    pid = local.driver_pid(held)
    assert pid is not None
    client.cluster.zk.set(client.cluster.layout.job_handle(held), b"{garbage")
    wait_for(lambda: client.status(held).state == QUARANTINED, timeout=60, what="quarantined")
    other = client.submit_function(job.sum_of_squares, str(tmp_path / "o"), 2, 0.01, job_id="next")

    def waits_for_a_slot() -> bool:
        status = client.status(other).status
        return status is not None and "slot" in (status.reason or "")

    wait_for(waits_for_a_slot, timeout=60, what="the next job waiting for the slot")
    assert client.status(other).state == "PENDING" and alive(pid)
    os.kill(pid, signal.SIGKILL)
    assert client.wait(other, timeout=120).outcome == "SUCCEEDED"
