"""The recovery daemon: one per host. Every daemon runs drivers; the elected leader places them.

The daemon's main thread is the only thread that acts. Kazoo's state listener and watches, the
threads waiting on driver processes, timers and signal handlers only post events to the loop (the
listener also revokes the current leadership flag, so that a SUSPENDED leader stops acting at
once, before its session can expire). Leadership is re-granted, with a fresh token and a full
reconcile, whenever the session is connected and our contender node is first.

Every daemon is a member of the fleet (:mod:`recovery.member.fleetmember`): it registers itself
with its driver slots and labels, and launches the attempts the leader places on it. A second daemon
with the id of a live one refuses to start; a daemon restarted with its id takes its record over
at once from its own dead predecessor on this host (waits for the session of any other), and
adopts the drivers that predecessor left running.

SIGTERM/SIGINT: stop acting, delete our contender node and close the session, so that another
daemon takes over within moments. Drivers keep running: they are separate processes with their
own sessions; the next leader adopts their jobs, and this daemon, started again with its id,
adopts the drivers themselves.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING

from recovery.leader.election import LeaderElection
from recovery.leader.grant import FLEET_CHANGED, POOLS_CHANGED, LeaderProcess
from recovery.leader.loop import Event, Leadership, Loop
from recovery.leader.retention import RETENTION
from recovery.leader.schedule_firing import SCHEDULES
from recovery.leader.watches import JOB_CHANGED
from recovery.member.fleetmember import FleetMember
from recovery.member.launcher import DriverLauncher
from recovery.observe.metrics import LeadershipStats
from recovery.proctitle import daemon_title, set_title
from recovery.settings import DaemonSettings
from recovery.shared.memory import REPORT_EVERY
from zkstore.admin.acl import check_cluster_root, describe_open
from zkstore.cluster import Cluster
from zkstore.config import TEST_MINIMUMS_ENV
from zkstore.errors import (
    ConfigError,
    FleetVersionError,
    NotLeader,
    StoreUnavailable,
    ZkStoreError,
)
from zkstore.zookeeper.throttle import Throttle

if TYPE_CHECKING:
    from recovery.observe.server import HttpSide
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "ASSIGNMENTS",
    "CONNECT_RETRY",
    "DRIVER_EXITED",
    "ELECTION",
    "JOB_EVENTS",
    "MEMORY",
    "STATE",
    "STOP",
    "WARM",
    "Daemon",
    "say_session",
]

logger = logging.getLogger(__name__)

STATE = "state"
ELECTION = "election"
STOP = "stop"
ASSIGNMENTS = "assignments"
DRIVER_EXITED = "driver-exited"
#: the daemon's own memory, into its member record (:mod:`recovery.shared.memory`)
MEMORY = "memory"
#: the number of warm JVMs ready changed: into the member record (the leader places by it)
WARM = "warm"
#: The events that name a job for the leader to look at.
JOB_EVENTS = (JOB_CHANGED, DRIVER_EXITED)
CONNECT_RETRY = 2.0
#: Seconds between two looks at the driver users out of the pool (a process left running as
#: one, a sweep that failed): one free again is swept and taken back at the next look.
USER_CHECK_INTERVAL = 5.0


class Daemon:
    """Run with :meth:`run` on the main thread; stop with :meth:`request_stop` or a signal."""

    def __init__(self, settings: DaemonSettings) -> None:
        self.settings = settings
        self.loop = Loop()
        self.launcher = DriverLauncher(settings)
        self.cluster: Cluster | None = None
        self.member: FleetMember | None = None
        self.election: LeaderElection | None = None
        self.leader: LeaderProcess | None = None
        self._leadership: Leadership | None = None
        self._stopping = threading.Event()
        self._must_contend = True
        self._last_reconcile = 0.0
        self._last_user_check = 0.0
        self.started = threading.Event()
        self.stats = LeadershipStats()
        self.http: HttpSide | None = None
        self._outage = Throttle(logger)
        #: why the daemon stopped by itself (the fleet no longer admits it), raised by run()
        self._refused: FleetVersionError | None = None

    # -- control -------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask the daemon to hand over and exit (safe from any thread or signal handler)."""
        self._stopping.set()
        self.loop.post(Event(STOP))

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        logger.info("received %s: handing over and stopping", signal.Signals(signum).name)
        self.request_stop()

    @property
    def is_leader(self) -> bool:
        return self.leader is not None and self.leader.active

    # -- main loop -----------------------------------------------------------------------------

    def run(self, *, install_signals: bool = True) -> int:
        """Serve until stopped. Returns the process exit code."""
        if install_signals:  # this process is the daemon (not a test running one inside it)
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
            logger.debug("process title: %s", set_title(daemon_title(self.settings.daemon_id)))
        lowered = self.settings.store.lowered_minimums
        if lowered is not None:  # the test suite's (zkstore.config.TEST_MINIMUMS_ENV): said loudly
            shown = ", ".join(f"{name} {value:g} s" for name, value in lowered.lowered().items())
            logger.warning("%s lowers product minimums (tests only): %s", TEST_MINIMUMS_ENV, shown)
        if self.settings.http is not None:  # aiohttp's server: imported only to serve (0.2 s)
            from recovery.observe.server import start_http

            self.http = start_http(self, self.stats)  # /health says 503 until the session is up
        if not self._connect():
            self._stop_http()
            return 0
        assert self.cluster is not None
        self.member = FleetMember(
            self.cluster,
            self.settings,
            self.launcher,
            lambda: self.loop.post(Event(ASSIGNMENTS)),
            lambda launch: self.loop.post(Event(DRIVER_EXITED, launch.job_id, launch)),
        )
        try:
            self._check_acl()
            registered = self.member.register(stop=self._stopping)
        except BaseException:
            self.cluster.close()
            self._stop_http()
            raise
        if not registered:  # stopped while an earlier holder of our id was still there
            self.cluster.close()
            self._stop_http()
            return 0
        if self.launcher.warm is not None:
            self.launcher.warm.changed = lambda: self.loop.post(Event(WARM))
        self.launcher.start()  # the class-data archive, the warm drivers: in the background
        self.cluster.zk.add_listener(self._on_state)
        self.election = LeaderElection(
            self.cluster.zk,
            self.cluster.layout,
            self.settings.daemon_id,
            lambda: self.loop.post(Event(ELECTION)),
        )
        self.loop.post(Event(ELECTION))
        self.loop.post(Event(MEMORY))
        self.started.set()
        logger.info(
            "daemon %s up (ZooKeeper %s, root %s, storage %s, Spark %s)",
            self.settings.daemon_id,
            self.settings.store.zk_hosts,
            self.cluster.layout.base,
            self.cluster.storage.root_url,
            self.settings.spark_master,
        )
        try:
            while not self._stopping.is_set():
                self._turn()
        finally:
            self._shutdown()
        if self._refused is not None:
            raise self._refused
        return 0

    def _connect(self) -> bool:
        """Open the session, waiting for ZooKeeper as long as it takes (or until stopped)."""
        while not self._stopping.is_set():
            try:
                self.cluster = Cluster.open(
                    self.settings.store, instance_id=self.settings.daemon_id
                )
                say_session(self.cluster.zk)
                return True
            except StoreUnavailable as exc:
                self._outage.warning("store", "%s; retrying every %g s", exc, CONNECT_RETRY)
                self._stopping.wait(CONNECT_RETRY)
        return False

    def _check_acl(self) -> None:
        """Warn loudly (refuse, with ``--strict-acl``) if anyone may change the cluster root.

        Reading the ACLs also proves our credentials early: a wrong password stops the daemon
        here with :class:`~zkstore.errors.AccessDenied` instead of failing every leader write.
        """
        assert self.cluster is not None
        nodes = check_cluster_root(self.cluster.zk, self.cluster.layout)
        auth = self.settings.store.zk_auth
        if auth is not None and auth.scheme != "digest":
            logger.warning(
                "ZooKeeper credentials are SASL: drivers hold the cluster's identity (a job's "
                "own identity is derived from digest credentials only; docs/operating.md)"
            )
        if not any(node.is_open for node in nodes):
            return
        message = describe_open(nodes)
        if self.settings.strict_acl:
            raise ConfigError(f"refusing to start (--strict-acl): {message}")
        logger.warning("SECURITY WARNING: %s (--strict-acl refuses to start)", message)

    def _turn(self) -> None:
        """One pass: wait for events (not while a finished job's cleanup is left to do), handle
        them, reconcile periodically, then clean up finished jobs until an event waits."""
        pending = self.is_leader and self.leader is not None and self.leader.cleanups_pending
        events = self.loop.next_events(timeout=0.0 if pending else 0.5)
        try:
            for event in events:
                if event.kind != JOB_CHANGED:
                    self._handle(event)
            if self.leader is not None and not self.leader.active:
                self._revoke("leadership ended")
            if self.is_leader and self.leader is not None:
                jobs = self.leader.triage(e for e in events if e.kind in JOB_EVENTS)
                if jobs:
                    self.leader.reconcile(jobs)
                if time.monotonic() - self._last_reconcile > self.settings.reconcile_interval:
                    self._last_reconcile = time.monotonic()
                    self.leader.reconcile_all()
                self.leader.clean_up_finished()
            if time.monotonic() - self._last_user_check > USER_CHECK_INTERVAL:
                self._last_user_check = time.monotonic()
                assert self.member is not None
                self.member.check_driver_users()
            if events:
                self._outage.clear("store", "ZooKeeper and storage answer again")
        except NotLeader as exc:
            self._revoke(str(exc))
        except StoreUnavailable as exc:
            self._outage.warning("store", "ZooKeeper or storage unavailable: %s", exc)
            self.loop.post_at(time.monotonic() + 1.0, Event(ELECTION))
        except FleetVersionError as exc:  # re-registering after a new session, finalized past us
            logger.error("stopping: %s", exc)
            self._refused = exc
            self.request_stop()
        except ZkStoreError as exc:
            logger.error("unexpected store error: %s: %s", type(exc).__name__, exc)

    def _handle(self, event: Event) -> None:
        assert self.member is not None
        if event.kind == STATE:
            self._on_state_event(str(event.data))
        elif event.kind == ELECTION:
            self._check_election()
        elif event.kind == ASSIGNMENTS:
            self.member.sync()
        elif event.kind == DRIVER_EXITED:
            self.member.driver_exited(event.data)
        elif event.kind == WARM:
            self.member.report_warm()
        elif event.kind == MEMORY:
            self.member.report_memory()
            self.loop.post_at(time.monotonic() + REPORT_EVERY, Event(MEMORY))
        elif event.kind == FLEET_CHANGED and self.is_leader and self.leader is not None:
            self.leader.fleet_changed()
        elif event.kind == POOLS_CHANGED and self.is_leader and self.leader is not None:
            self.leader.pools_changed()
        elif event.kind == RETENTION and self.is_leader and event.data is self.leader:
            self.leader.retention.run_pass()  # a pass scheduled by an earlier grant is dropped
        elif event.kind == SCHEDULES and self.is_leader and event.data is self.leader:
            self.leader.schedules.run_pass()

    # -- session and election ------------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        """Kazoo's listener (I/O thread): stop acting at once, then tell the loop."""
        if state != "CONNECTED" and self._leadership is not None:
            self._leadership.revoke()
        self.loop.post(Event(STATE, data=state))

    def _on_state_event(self, state: str) -> None:
        if state == "SUSPENDED":
            self._outage.warning("zk", "ZooKeeper connection lost; reconnecting")
            self._revoke("ZooKeeper connection suspended")
        elif state == "LOST":
            self._outage.warning("zk", "ZooKeeper session expired; contending again")
            self._revoke("ZooKeeper session expired")
            self._must_contend = True
        elif state == "CONNECTED":
            self._outage.clear("zk", "ZooKeeper connection back")
            assert self.member is not None
            self.member.ensure_registered()  # a new session lost our ephemeral record
            self.member.sync()
            self._check_election()

    def _check_election(self) -> None:
        assert self.cluster is not None and self.election is not None
        if self._stopping.is_set() or not self.cluster.zk.connected:
            return
        if self._must_contend or not self.election.owns_node():
            self.election.contend()
            self._must_contend = False
        try:
            leading = self.election.check(leading=self.is_leader)
        except NotLeader:
            self._must_contend = True
            self.loop.post(Event(ELECTION))
            return
        if leading and not self.is_leader:
            self._grant()
        elif not leading and self.leader is not None:
            self._revoke("another contender is first")

    def _grant(self) -> None:
        assert self.cluster is not None and self.election is not None
        self._revoke("re-granting")
        leadership = Leadership(fence=self.election.fence())
        self._leadership = leadership
        self.leader = LeaderProcess(
            self.cluster,
            self.settings,
            leadership,
            self.loop,
            self.election,
            refused=self.stats.refused,
            raised=self.stats.conditions,
        )
        logger.info("daemon %s is the leader", self.settings.daemon_id)
        self._last_reconcile = time.monotonic()
        took = time.monotonic()
        self.leader.start()
        self.stats.granted(time.monotonic() - took)

    def _revoke(self, why: str) -> None:
        leader, self.leader = self.leader, None
        if leader is None:
            return
        leader.stop()
        self.stats.revoked()
        logger.warning("daemon %s is no longer the leader: %s", self.settings.daemon_id, why)

    def _shutdown(self) -> None:
        self._revoke("shutting down")
        if self.election is not None:
            try:
                self.election.resign()
            except ZkStoreError as exc:
                logger.warning("could not resign cleanly (%s); the session close will", exc)
        self._stop_http()
        if self.member is not None:
            self.member.stop()
        self.launcher.close()
        if self.cluster is not None:
            self.cluster.close()
        live = self.member.running_drivers if self.member is not None else 0
        logger.info(
            "daemon %s stopped; %d driver(s) keep running and will be adopted",
            self.settings.daemon_id,
            live,
        )

    def _stop_http(self) -> None:
        if self.http is not None:
            self.http.stop()
            self.http = None


def say_session(zk: ZooKeeper) -> None:
    """Say what session the servers granted: more than asked (their ``minSessionTimeout``,
    two ``tickTime`` by default: 4 s) makes every failover take that long; less (their
    ``maxSessionTimeout``) is what the leases and leadership go by."""
    asked, granted = zk.session_timeout, zk.negotiated_session_timeout
    if granted is None:
        return
    if granted > asked * 1.01:
        logger.warning(
            "ZooKeeper granted a %g s session where %g s was asked: a lost host is noticed "
            "only after %g s (set the servers' minSessionTimeout, or tickTime, lower to "
            "get %g s; the leases use the shorter)",
            granted,
            asked,
            granted,
            asked,
        )
    elif granted < asked * 0.99:
        logger.warning(
            "ZooKeeper granted a %g s session where %g s was asked (the servers' "
            "maxSessionTimeout): leases and leadership go by %g s",
            granted,
            asked,
            granted,
        )
    else:
        logger.info("ZooKeeper session of %g s granted as asked", granted)
