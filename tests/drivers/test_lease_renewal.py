"""The driver's session lease: renewed by answered heartbeats, over when they stop or when its
``running`` node belongs to another session."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from recovery.driver.lease import SessionLease
from tests.helpers import connected, expire_session, holds_for, requests_sent, wait_for
from zkstore.config import StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.zookeeper.polling import PollingHandler
from zkstore.zookeeper.zk import ZooKeeper
from zkstore_dev.blackout import Blackout
from zkstore_dev.ensemble import ZooKeeperEnsemble

pytestmark = pytest.mark.integration


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
    private_zk_server: EmbeddedZooKeeper,
) -> None:
    zk = connected(private_zk_server.connect_string, session_timeout=2.0, timeout=1.0)
    try:
        zk.create("/running", b"{}", ephemeral=True)
        lease = SessionLease(zk, "/running", interval=0.1).start()
        assert lease.length == 1.5
        # Renewed while ZooKeeper answers: it never runs out over twice its length.
        holds_for(lambda: lease.remaining() > 0, 2 * lease.length, what="lease renewed")
        # When the last answered heartbeat was sent, from the lease's own count (read after
        # the clock, so never later than that send): on a loaded machine it can be several
        # intervals before the stop, so the stop's own moment is no measure of it.
        now = time.monotonic()
        answered_at = now + lease.time_left() - lease.length
        private_zk_server.stop()
        wait_for(lambda: lease.remaining() < 0, timeout=60, what="the lease to run out")
        assert time.monotonic() - answered_at >= lease.length, "never before its length"
        assert not lease.lost, "it ran out by time: a server gone is not a node gone"
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


def test_a_lease_started_from_the_nodes_creation_sends_no_heartbeat_first(
    config: StoreConfig,
) -> None:
    """The driver's transaction that creates its ``running`` node is an answered request of
    its session: the lease counts from when it was sent, without a heartbeat (a request saved
    on every run); the heartbeats come at their interval after."""
    zk = ZooKeeper(config.zk_hosts, session_timeout=4.0, timeout=3.0).start()
    try:
        path = f"{config.root}-running"
        sent = time.monotonic()
        zk.create(path, b"{}", ephemeral=True)
        lease = SessionLease(zk, path, interval=0.2)
        with requests_sent(zk) as first:
            lease.start(answered=sent)
        assert first == [], "no heartbeat first"
        before = time.monotonic()
        assert lease.time_left() <= sent + lease.length - before, "counted from the send"
        assert lease.remaining() > 0
        with requests_sent(zk) as later:
            wait_for(lambda: len(later) >= 2, timeout=10 * lease.interval, what="a heartbeat")
        assert later[:2] == ["Sync", "Exists"], "a heartbeat: through the leader, then a read"
        lease.stop()
    finally:
        zk.stop()


def test_a_server_gone_silent_is_left_for_another_before_the_lease_runs_out(
    private_zk_server: EmbeddedZooKeeper,
) -> None:
    """Two ways to the ensemble; the one the session uses goes silent (its packets dropped, its
    connection open), the other answers. kazoo counts every request as a ping, so the heartbeats
    alone would keep the session on the silent one until the lease ran out (a driver stopped,
    its job restarted, though ZooKeeper answered all along: found by the chaos campaign's
    zk-server-cut). The lease leaves it and is renewed through the other."""
    server = private_zk_server.connect_string
    with Blackout(f"{server},{server}") as ways:
        zk = connected(ways.connect_string, session_timeout=4.0, timeout=1.0)
        try:
            zk.create("/running", b"{}", ephemeral=True)
            session = zk.session_id
            lease = SessionLease(zk, "/running").start()
            (used,) = wait_for(ways.busy, timeout=10, what="a connection")
            ways.silence(used)
            holds_for(lambda: lease.remaining() > 0, 2 * lease.length, what="the lease renewed")
            assert ways.busy() == [1 - used], "the session left the silent server"
            assert zk.session_id == session and not lease.lost, "the same session"
            lease.stop()
        finally:
            zk.stop()


def test_a_connect_to_a_server_that_does_not_answer_waits_its_share_of_the_session() -> None:
    """kazoo gives a server's handshake the session timeout shared among the servers, but waited
    for the TCP connect itself the whole session timeout: a server whose host drops the SYN
    cost a client leaving a silent server for the next one its whole session. The handler
    bounds the connect to the handshake's share."""
    with socket.create_server(("127.0.0.1", 0), backlog=0) as full:
        port = full.getsockname()[1]
        queued = socket.create_connection(("127.0.0.1", port), timeout=5)  # fills the queue:
        try:  # the next SYN is dropped, as a cut drops it
            handler = PollingHandler(connect_timeout=0.5)
            began = time.monotonic()
            with pytest.raises(OSError):
                handler.create_connection(
                    address=("127.0.0.1", port), hostname="127.0.0.1", timeout=60.0
                )
            assert time.monotonic() - began < 30.0, "the connect's bound, not kazoo's 60 s"
        finally:
            queued.close()


def test_a_follower_cut_off_from_the_leader_renews_no_lease(tmp_path: Path) -> None:
    """The leader expires sessions; a follower that lost it answers reads on its own until it
    notices (``syncLimit`` ticks: 10 s here) while the leader hears nothing of the session. A
    heartbeat that only such a follower answered must renew nothing. (A chaos run's ensemble
    split 2/1: the follower answered a driver's reads for 4.9 s, the leader expired its session,
    the next attempt started and the driver wrote for 0.7 s more: zombie writes.)"""
    with ZooKeeperEnsemble(3, work_dir=tmp_path / "zk") as ensemble:
        follower = ensemble.followers()[0]
        others = [n for n in ensemble.members if n != follower]
        zk = ZooKeeper(
            ensemble.members[follower].connect_string, session_timeout=10.0, timeout=3.0
        ).start()
        try:
            zk.create("/running", b"{}", ephemeral=True)
            lease = SessionLease(zk, "/running", interval=0.5)
            assert lease.beat(), "answered through the leader"
            for n in others:
                ensemble.pause_member(n)
            try:
                assert zk.exists("/running") is not None, "the follower still answers reads"
                assert not lease.beat(), "a heartbeat the leader never saw renewed the lease"
            finally:
                for n in others:
                    ensemble.resume_member(n)
            wait_for(lease.beat, timeout=60, what="a heartbeat through the leader again")
        finally:
            zk.stop()
