"""Leader election and the fenced single-thread loop, in process, against real ZooKeeper."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from recovery.leader.election import LeaderElection
from recovery.shared import processes
from recovery.shared.processes import boot_id, start_ticks
from tests.helpers import expire_session, pause, wait_for
from zkstore.config import StoreConfig
from zkstore.errors import NotLeader
from zkstore.jobs.job_state_store import JobStateStore
from zkstore.layout import Layout
from zkstore.protocol import PROTOCOL
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.job_records import JobStatus
from zkstore.records.job_states import PENDING
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


@pytest.fixture
def sessions(config: StoreConfig) -> Iterator[list[ZooKeeper]]:
    clients = [ZooKeeper(config.zk_hosts, session_timeout=4, timeout=3).start() for _ in range(3)]
    for client in clients:
        client.ensure_path(f"{config.base_path}/leader/election")
        client.ensure_path(f"{config.base_path}/jobs")
    yield clients
    for client in clients:
        client.stop()


def elections(
    sessions: list[ZooKeeper], config: StoreConfig
) -> tuple[list[LeaderElection], list[threading.Event]]:
    events = [threading.Event() for _ in sessions]
    layout = Layout(config.base_path)
    found = [LeaderElection(zk, layout, f"d{i}", events[i].set) for i, zk in enumerate(sessions)]
    return found, events


def test_first_contender_leads_and_the_next_takes_over_when_it_resigns(
    sessions: list[ZooKeeper], config: StoreConfig
) -> None:
    (a, b, c), (_, b_event, c_event) = elections(sessions, config)
    for election in (a, b, c):
        election.contend()
    assert [a.check(), b.check(), c.check()] == [True, False, False]
    assert [x.daemon_id for x in a.contenders()] == ["d0", "d1", "d2"]
    a.resign()
    assert b_event.wait(5), "the next contender is told its predecessor went away"
    assert b.check() is True
    assert not c_event.is_set(), "only the direct successor is woken"
    assert c.check() is False


def test_contenders_started_at_the_same_moment_elect_exactly_one(
    sessions: list[ZooKeeper], config: StoreConfig
) -> None:
    found, _ = elections(sessions, config)
    barrier = threading.Barrier(len(found))
    results: dict[str, bool] = {}

    def run(election: LeaderElection) -> None:
        barrier.wait()
        election.contend()
        results[election.daemon_id] = election.check()

    threads = [threading.Thread(target=run, args=(e,)) for e in found]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results.values()) == [False, False, True]


def test_deposed_leader_is_fenced_even_after_kazoo_reconnects(
    sessions: list[ZooKeeper], config: StoreConfig
) -> None:
    (a, b, _), (_, b_event, _) = elections(sessions, config)
    a.contend()
    b.contend()
    assert a.check()
    assert not b.check()
    fence = a.fence()
    states = JobStateStore(sessions[0], Layout(config.base_path))
    status = JobStatus(version=None, state=PENDING, updated=parse_time("2026-11-21T00:00:00Z"))
    states.put_status("j1", status, expected_version=None, fence=fence)
    expire_session(sessions[0])  # kazoo silently opens a new session for a
    assert sessions[0].connected
    assert not a.owns_node()
    with pytest.raises(NotLeader):
        states.put_status("j2", status, expected_version=None, fence=fence)
    assert states.status("j2") is None, "nothing was written"
    with pytest.raises(NotLeader):
        a.check()
    assert b_event.wait(5) and b.check(), "the other contender took over"
    a.contend()
    assert a.check() is False, "a re-contends behind the new leader"


def test_leader_info_is_published_fenced(sessions: list[ZooKeeper], config: StoreConfig) -> None:
    (a, b, _), _ = elections(sessions, config)
    a.contend()
    assert a.check()
    a.publish_info()
    data, stat = sessions[1].get(f"{config.base_path}/leader/info")
    assert json.loads(data)["id"] == "d0"
    assert stat.ephemeralOwner == sessions[0].session_id
    b.contend()
    assert b.check() is False


def test_leader_stops_acting_on_suspended_before_its_session_can_expire(
    tmp_path: Any, config: StoreConfig
) -> None:
    """ZooKeeper stops answering: the leader drops leadership long before the session could
    expire on the server (and with it the fence), not after."""
    from recovery.daemon import Daemon
    from recovery.settings import DaemonSettings
    from zkstore.dev.embedded import EmbeddedZooKeeper

    server = EmbeddedZooKeeper().start()
    session_timeout = 8.0
    store = config.with_changes(zk_hosts=server.connect_string, session_timeout=session_timeout)
    settings = DaemonSettings(
        store=store, daemon_id="solo", log_dir=str(tmp_path), work_dir=str(tmp_path / "work")
    )
    daemon = Daemon(settings)  # its directories the test's (by default, kept in /tmp for adoption)
    thread = threading.Thread(target=daemon.run, kwargs={"install_signals": False})
    thread.start()
    try:
        wait_for(lambda: daemon.is_leader, timeout=20, what="leadership")
        pid = server.pid
        assert pid is not None
        paused = time.monotonic()
        pause(pid, timeout=session_timeout)
        wait_for(lambda: not daemon.is_leader, timeout=30, what="step down")
        stepped_down = time.monotonic() - paused
        # The invariant itself is a time: leadership must end before the session can expire
        # (kazoo notices at about 2/3 of the session timeout, 5.3 s here).
        assert stepped_down < session_timeout, f"stepped down after {stepped_down:.1f} s"
        os.kill(pid, signal.SIGCONT)
        wait_for(lambda: daemon.is_leader, timeout=30, what="leadership again after reconnect")
    finally:
        os.kill(server.pid or 0, signal.SIGCONT)
        daemon.request_stop()
        thread.join(timeout=30)
        server.close()


def _member(zk: ZooKeeper, config: StoreConfig, daemon_id: str, speaks: int) -> None:
    """A live daemon's member record (in ``zk``'s session) speaking fleet protocol ``speaks``."""
    layout = Layout(config.base_path)
    zk.ensure_path(layout.members)
    info = MemberInfo(
        version=None,
        daemon_id=daemon_id,
        host="h",
        pid=1,
        started=parse_time(utc_now()),
        speaks=speaks,
        serves_from=1,
        release="9.9.9",
    )
    zk.create(layout.member(daemon_id), info.to_bytes(), ephemeral=True)


def test_a_contender_steps_aside_for_one_of_a_newer_protocol_when_it_would_take_office(
    sessions: list[ZooKeeper], config: StoreConfig
) -> None:
    """Issue 45: a mixed fleet is led by a daemon that reads the newest records. d0 is first
    in line but d1 speaks a newer protocol: d0 contends again behind the others and d1 leads."""
    (a, b, c), (_, b_event, _) = elections(sessions, config)
    for i, election in enumerate((a, b, c)):
        _member(sessions[i], config, election.daemon_id, PROTOCOL + 1 if i == 1 else PROTOCOL)
        election.contend()
    assert [b.check(), c.check()] == [False, False]  # each watches its predecessor
    assert a.check() is False, "d0 leaves the head of the queue to the newer d1"
    assert [x.daemon_id for x in a.contenders()] == ["d1", "d2", "d0"]
    assert b_event.wait(5), "d1 is told its predecessor went away"
    assert b.check() is True
    assert c.check() is False
    b.resign()  # the newer one goes: the older ones lead again, in their order
    wait_for(c.check, 5, "d2 leads once the newer d1 is gone")
    assert a.check() is False


def test_a_leader_is_not_deposed_by_a_newer_contender(
    sessions: list[ZooKeeper], config: StoreConfig
) -> None:
    """A newer daemon wins the next election; a working leader keeps leading."""
    (a, b, _), _ = elections(sessions, config)
    _member(sessions[0], config, "d0", PROTOCOL)
    a.contend()
    assert a.check() is True
    _member(sessions[1], config, "d1", PROTOCOL + 1)
    b.contend()
    assert a.check(leading=True) is True, "the leader stays"
    assert b.check() is False
    assert [x.daemon_id for x in a.contenders()] == ["d0", "d1"]


def _planted_contender(zk: ZooKeeper, config: StoreConfig, daemon_id: str, **data: object) -> str:
    """A contender node of ``daemon_id`` in ``zk``'s session (alive until it is closed), as an
    earlier process of that daemon left it."""
    layout = Layout(config.base_path)
    body = json.dumps({"id": daemon_id, "host": socket.gethostname(), **data}).encode()
    return zk.create(
        f"{layout.election}/{daemon_id}-{'0' * 32}-n_", body, ephemeral=True, sequence=True
    )


def _dead_process() -> tuple[int, int]:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = start_ticks(child.pid)
    child.wait()
    assert ticks is not None
    return child.pid, ticks


def test_a_daemon_restarted_after_its_leader_died_leads_at_once(
    sessions: list[ZooKeeper], config: StoreConfig
) -> None:
    """Issue 50: d1 led, was SIGKILLed and is started again with its id. Its old contender
    node, in a session that has not expired, names a process of this host and boot that is
    dead: the new d1 removes it and leads now, not a session timeout later. A node of a live
    process, or one that names no start time (an older daemon's), is left to its session."""
    old_session, other, mine = sessions
    pid, ticks = _dead_process()
    dead = _planted_contender(
        old_session, config, "d1", pid=pid, start_ticks=ticks, boot_id=boot_id()
    )
    me = processes.this_process()
    live = _planted_contender(
        other, config, "d2", pid=me.pid, start_ticks=me.start_ticks, boot_id=me.boot_id
    )
    restarted = LeaderElection(mine, Layout(config.base_path), "d1", lambda: None)
    restarted.contend()
    assert old_session.exists(dead) is None, "the dead process's node was removed"
    assert other.exists(live) is not None, "d2's (another daemon id) is never touched"
    assert restarted.check() is False, "d2 was there before it"
    other.delete(live)
    assert restarted.check() is True


def test_a_contender_of_its_own_id_that_cannot_be_checked_is_left_to_its_session(
    sessions: list[ZooKeeper], config: StoreConfig
) -> None:
    old_session, _, mine = sessions
    me = processes.this_process()
    alive = _planted_contender(
        old_session, config, "d1", pid=me.pid, start_ticks=me.start_ticks, boot_id=me.boot_id
    )
    older = _planted_contender(old_session, config, "d1", pid=1)  # no start time: unknowable
    LeaderElection(mine, Layout(config.base_path), "d1", lambda: None).contend()
    assert old_session.exists(alive) is not None and old_session.exists(older) is not None
