"""The driver's session lease: renewed by answered heartbeats, over when they stop or when its
``running`` node belongs to another session."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from recovery.client import Client
from recovery.dev.chaos import job
from recovery.dev.localcluster import LocalCluster
from recovery.lease import SessionLease, default_margin
from tests.helpers import SESSION_TIMEOUT, expire_session, holds_for, wait_for
from zkstore.config import DEFAULT_SESSION_TIMEOUT, StoreConfig
from zkstore.dev.blackout import Blackout
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.jobs.states import SUCCEEDED
from zkstore.zk import ZooKeeper


@pytest.fixture
def private_server() -> Iterator[EmbeddedZooKeeper]:
    with EmbeddedZooKeeper() as server:
        yield server


def test_margin_is_a_quarter_of_the_session() -> None:
    assert default_margin(10.0) == 2.5
    assert default_margin(4.0) == 1.0


def test_the_lease_lasts_what_the_server_granted_not_what_was_asked() -> None:
    """A server whose maxSessionTimeout is 4 s grants 4 s to a driver that asked for 10 s: a
    lease computed from 10 s would outlive the session."""
    with EmbeddedZooKeeper(max_session_timeout_ms=4000) as server:
        zk = ZooKeeper(server.connect_string, session_timeout=10.0, timeout=3.0).start()
        try:
            assert zk.granted_session_timeout == 4.0
            zk.create("/running", b"{}", ephemeral=True)
            assert SessionLease(zk, "/running").length == 3.0
        finally:
            zk.stop()


def test_heartbeats_renew_the_lease_and_stop_renewing_it_in_an_outage(
    private_server: EmbeddedZooKeeper,
) -> None:
    zk = ZooKeeper(private_server.connect_string, session_timeout=2.0, timeout=1.0).start()
    try:
        zk.create("/running", b"{}", ephemeral=True)
        lease = SessionLease(zk, "/running", interval=0.1).start()
        assert lease.length == 1.5
        # Renewed while ZooKeeper answers: it never runs out over twice its length.
        holds_for(lambda: lease.remaining() > 0, 2 * lease.length, what="lease renewed")
        last_answer_before = time.monotonic()  # the last heartbeat answered was sent after
        private_server.stop()  # about this moment minus one interval
        wait_for(lambda: lease.remaining() < 0, timeout=60, what="the lease to run out")
        elapsed = time.monotonic() - last_answer_before
        assert elapsed >= lease.length - lease.interval - 0.1, "never before its length"
        lease.stop()
    finally:
        zk.stop()


def test_lease_is_lost_at_once_when_the_session_expired(config: StoreConfig) -> None:
    zk = ZooKeeper(config.zk_hosts, session_timeout=4.0, timeout=3.0).start()
    try:
        path = f"{config.root}-running"
        zk.create(path, b"{}", ephemeral=True)
        lease = SessionLease(zk, path, interval=0.1).start()
        assert lease.remaining() > 0 and not lease.lost
        expire_session(zk)  # kazoo reconnects at once with a new session; the node is gone
        wait_for(lambda: lease.lost, timeout=30, what="the lease to be lost")
        assert lease.remaining() == float("-inf")
        lease.stop()
    finally:
        zk.stop()


@pytest.mark.slow
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
            with Client(config) as client:  # around the blackout: it sees the cluster throughout
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


@pytest.mark.slow
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
            with Client(config) as client:
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
