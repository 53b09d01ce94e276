"""A running job and a ZooKeeper outage: ridden out while its lease lasts, stopped before its
session can expire when it does not."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.helpers import SESSION_TIMEOUT, hands_client, wait_for
from zkstore.config import DEFAULT_SESSION_TIMEOUT, StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.jobs.definition import JobDefinition
from zkstore.lifecycle.attempt_limits import heartbeat_interval
from zkstore.records.job_states import SUCCEEDED
from zkstore_dev.blackout import Blackout
from zkstore_dev.chaos import job

pytestmark = pytest.mark.e2e


def test_running_job_rides_out_a_full_outage_shorter_than_its_lease(
    zk_server: EmbeddedZooKeeper, config: StoreConfig, tmp_path: Path
) -> None:
    """Every connection to ZooKeeper cut for 4 s (longer than the old bound of a quarter of the
    10 s session) while a job checkpoints: its first attempt goes on and finishes."""
    with Blackout(zk_server.connect_string) as blackout:
        cut_config = config.with_changes(
            zk_hosts=blackout.connect_string, session_timeout=DEFAULT_SESSION_TIMEOUT
        )
        local = LocalCluster(cut_config, tmp_path / "rt")
        out = tmp_path / "out"
        try:
            local.start_daemon("d1")
            local.wait_for_leader(timeout=60)
            with hands_client(
                config
            ) as client:  # around the blackout: it sees the cluster throughout
                client.submit_function(job.sum_of_squares, str(out), None, 0.2, job_id="cut")
                wait_for(lambda: len(job.progress_times(out)) >= 3, timeout=60, what="progress")
                blackout.cut_for(0.4 * cut_config.session_timeout)  # 4 s of a 10 s session
                healed = time.time()
                wait_for(
                    lambda: max(job.progress_times(out)) > healed + 2, timeout=60, what="progress"
                )
                (out / job.STOP).touch()
                result = client.wait("cut", timeout=60)
        finally:
            local.stop()
    assert (result.outcome, result.attempts) == (SUCCEEDED, 1)
    assert [a.attempt for a in job.attempts(out)] == [1]


def test_driver_cut_off_past_its_lease_is_gone_before_the_next_attempt_starts(
    zk_server: EmbeddedZooKeeper, config: StoreConfig, tmp_path: Path
) -> None:
    """Cut until the driver's session has expired: the driver stops itself when its lease runs
    out, before its session expires, and the next attempt resumes from the checkpoint; never
    both alive."""
    with Blackout(zk_server.connect_string) as blackout:
        cut_config = config.with_changes(
            zk_hosts=blackout.connect_string, session_timeout=SESSION_TIMEOUT
        )
        local = LocalCluster(cut_config, tmp_path / "rt", restart_backoff=0.2)
        out = tmp_path / "out"
        try:
            local.start_daemon("d1")
            local.wait_for_leader(timeout=60)
            with hands_client(config) as client:
                client.submit_function(job.sum_of_squares, str(out), 20, 0.1, job_id="cut")
                wait_for(lambda: len(job.progress_times(out)) >= 3, timeout=60, what="progress")
                blackout.cut()
                # Cut until the server has expired the driver's session (the client sees the
                # server directly): its running node is gone.
                running = client.cluster.layout.running("cut")
                wait_for(
                    lambda: client.cluster.zk.exists(running) is None,
                    timeout=4 * cut_config.session_timeout,
                    what="the cut-off driver's session to expire",
                )
                blackout.restore()
                # The member recorded the driver's exit once ZooKeeper was back: the leader
                # learnt of it from that record, not from a launch deadline a minute later.
                second_placed = wait_for(
                    lambda: (s := client.status("cut").status) is not None and s.attempt == 2 and s,
                    timeout=60,
                    what="attempt 2 placed",
                )
                assert "stopped itself" in (second_placed.last_error or ""), second_placed
                result = client.wait("cut", timeout=120)
        finally:
            local.stop()
    assert (result.outcome, result.attempts) == (SUCCEEDED, 2)
    first, second = job.attempts(out)
    assert first.last < second.start, "attempt 1 was gone before attempt 2 started"
    assert second.step == 20 and job.output(out)["total"] == job.expected_total(20)  # type: ignore[index]
    log = (tmp_path / "rt" / "drivers" / "cut" / "attempt-1.log").read_text()
    (stop_line,) = [line for line in log.splitlines() if "stops itself" in line]
    assert "no answer from ZooKeeper for too long" in stop_line
    stopped = datetime.strptime(stop_line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    assert stopped < second.start, "the driver stopped itself before the next attempt began"


def test_a_driver_stops_when_its_lease_ends_though_a_heartbeat_write_waits(
    zk_server: EmbeddedZooKeeper, config: StoreConfig, tmp_path: Path
) -> None:
    """A job with a progress timeout: its driver writes a heartbeat 10 s after the last, from
    the thread that also watched its lease. ZooKeeper is cut a second before the next one is
    due: that write waits for its deadline (20 s here), and the lease must end on time anyway,
    before the session can expire (it stopped only after the write gave up, past the session:
    the next attempt could have started beside it)."""
    with Blackout(zk_server.connect_string) as blackout:
        cut_config = config.with_changes(
            zk_hosts=blackout.connect_string, session_timeout=SESSION_TIMEOUT, timeout=20.0
        )
        local = LocalCluster(cut_config, tmp_path / "rt", restart_backoff=0.2)
        out = tmp_path / "out"
        try:
            local.start_daemon("d1")
            local.wait_for_leader(timeout=60)
            with hands_client(config) as client:
                definition = JobDefinition.for_function(
                    "beats",
                    job.sum_of_squares,
                    args=(str(out), None, 0.1, None, 10**9),  # no checkpoint after the start
                    lifecycle={"progress_timeout": 40.0},  # a heartbeat every 10 s
                )
                client.submit(definition)
                heartbeat = client.cluster.layout.heartbeat("beats")
                stat = wait_for(
                    lambda: client.cluster.zk.exists(heartbeat), timeout=60, what="a heartbeat"
                )
                due = stat.mtime / 1000 + heartbeat_interval(40.0)
                time.sleep(max(0.0, due - 1.0 - time.time()))  # up to a second before it
                cut_at = time.time()
                blackout.cut()
                (first,) = job.attempts(out)
                wait_for(
                    lambda: not Path(f"/proc/{first.pid}").exists(),
                    timeout=60,
                    what="the driver to stop",
                )
                blackout.restore()
                (out / job.STOP).touch()
                client.wait("beats", timeout=120)
        finally:
            local.stop()
    log = (tmp_path / "rt" / "drivers" / "beats" / "attempt-1.log").read_text()
    (stop_line,) = [line for line in log.splitlines() if "stops itself" in line]
    stopped = datetime.strptime(stop_line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    assert stopped - cut_at < SESSION_TIMEOUT, "stopped before its session could expire"
