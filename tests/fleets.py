"""Fleets shared by the tests that disturb nothing (issue 57).

A test that asks for :func:`~tests.conftest.local` starts its own daemons: a new interpreter, a
fork server and a log shipper per daemon, and a leader election, before it submits anything.
Most end-to-end tests only submit, follow and read jobs; those run on a fleet that each test
process keeps for them (:class:`SharedFleet`, one per shape: the ids of its daemons), marked
``@pytest.mark.shared_fleet`` (a module's ``pytestmark``). A test that kills, stops, pauses,
cuts, restarts or reconfigures something is marked ``@pytest.mark.disturbs`` and gets a fleet of
its own, as before.

No test sees another's jobs: each shared test begins on an empty fleet and, when it ends, every
job it left is cancelled, waited for and forgotten (``zkstore jobs forget``: its records, result
and logs gone, its id free again), and the fleet is compared with what it was when it started
(:meth:`SharedFleet.changes`): a daemon gone or restarted, another leader, a schedule, a pool,
a setting, a drain mark, a quarantined job. A test that leaves any of those fails at its
teardown, naming what it changed, and the fleet is replaced for the next test.

The daemons of a shape may have an environment of their own (``Shape.env``: the ``web``
fixture's API tokens, :func:`~tests.conftest.web_env`), whose values must reach no log: each
test's part of every daemon's log is read for them after the test (:meth:`SharedFleet.leaks`),
and the whole log when the fleet closes.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recovery.dev.localcluster import DaemonProcess, LocalCluster
from tests.helpers import MONITOR_ID, SECRET, SESSION_TIMEOUT, http_status, wait_for
from zkstore.cluster import Cluster
from zkstore.cluster.triage import cancel, forget
from zkstore.config import StoreConfig, ZkAuth, parse_read_acl
from zkstore.errors import HandleNotFound, ZkStoreError
from zkstore.layout import Layout
from zkstore.zookeeper.zk import ZooKeeper

#: what a test leaves for the reset to end: every job of it is gone within this (its driver
#: told to stop, its cleanup done); a job still there is reported, not waited for longer
RESET_DEADLINE = 60.0


@dataclass(frozen=True)
class Shape:
    """What a shared fleet is: its daemons (started in this order, the first leads), their
    restart backoff and session timeout, whether they serve HTTP (each on a free loopback
    port, answering ``/health`` before the first test), the arguments every one of them is
    started with, and whether the cluster has ZooKeeper credentials (:func:`secured`: every
    test of the module then has them, on a shared fleet or its own) (``@pytest.mark.
    shared_fleet("d1", "d2", restart_backoff=1.0, session_timeout=4.0, http=True,
    args=("--end-grace", "5s"), credentials=True)``; a test of the module marked ``disturbs``
    starts its own daemons with the same options). ``env`` is the daemons' environment beyond
    the cluster's, as pairs (a shape is a key: hashable), whose values are secrets that no log
    may show: a ``web`` module's (``@pytest.mark.web("d1", "d2")`` with its ``web_env``) is
    ``Shape(("d1", "d2"), http=True, env=(("ZKSTORE_API_TOKEN", ...),))``."""

    daemons: tuple[str, ...] = ("d1",)
    restart_backoff: float = 0.2
    session_timeout: float = SESSION_TIMEOUT
    http: bool = False
    args: tuple[str, ...] = ()
    credentials: bool = False
    env: tuple[tuple[str, str], ...] = ()


def secured(config: StoreConfig) -> StoreConfig:
    """``config`` with ZooKeeper credentials (``alice``) and a read ACL (``monitor``)."""
    return config.with_changes(
        zk_auth=ZkAuth.parse(f"alice:{SECRET}"), zk_read_acl=parse_read_acl(MONITOR_ID)
    )


class FleetDaemon(DaemonProcess):
    """A daemon of a shared fleet as one test sees it: its log from that test's start on."""

    log_from: int = 0

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.log_from)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""


class SharedCluster(LocalCluster):
    """A :class:`LocalCluster` whose daemons outlive the test: ``start_daemon`` of a daemon of
    the fleet's shape returns the running one; any other daemon, or one with arguments, is a
    change of the fleet (the test is not one that disturbs nothing: mark it ``disturbs``);
    ``stop`` is the fleet's (the test's own ``stop`` leaves it running)."""

    def start_daemon(self, daemon_id: str, *args: str, python: Any = None) -> DaemonProcess:
        if daemon_id in self.daemons and not args and python is None:
            return self.daemons[daemon_id]
        raise AssertionError(
            f"the shared fleet has daemons {sorted(self.daemons)} started without arguments: "
            f"start_daemon({daemon_id!r}, {', '.join(map(repr, args))}) changes it (mark the "
            "test @pytest.mark.disturbs, or give it the shape it needs)"
        )

    def stop(self, *, timeout: float = 20.0) -> None:
        """The test's stop: the fleet's daemons go on (see :meth:`SharedFleet.close`)."""

    def start_all(self, shape: Shape) -> None:
        for daemon_id in shape.daemons:
            LocalCluster.start_daemon(self, daemon_id)
            if daemon_id == shape.daemons[0]:
                self.wait_for_leader()
        for daemon_id, daemon in self.daemons.items():
            self.daemons[daemon_id] = FleetDaemon(
                daemon.daemon_id, daemon.process, daemon.log_path, daemon.url
            )

    def close(self) -> None:
        LocalCluster.stop(self)


class SharedFleet:
    """One shape's fleet in this test process: started on first use, reset after each test,
    replaced when a test changed it."""

    def __init__(self, config: StoreConfig, work_dir: Path, shape: Shape) -> None:
        self.config = config
        self.shape = shape
        self.local = SharedCluster(
            config,
            work_dir / "runtime",
            restart_backoff=shape.restart_backoff,
            http=shape.http,
            extra_args=shape.args,
            extra_env=dict(shape.env),
        )
        self.local.start_all(shape)
        self.layout = Layout(config.base_path)
        self._settled()
        self.before = self.state()

    def _settled(self) -> None:
        """Wait for what the daemons write as they start (each member's record, the leader's
        settings record): written after the state is taken, it would read as a test's change."""
        zk, base = self.local.zk, self.layout.base
        wait_for(
            lambda: (
                len(_children(zk, f"{base}/members")) == len(self.shape.daemons)
                and _data(zk, f"{base}/settings") is not None
            ),
            timeout=60,
            what="the shared fleet's members and the leader's settings record",
        )
        for daemon in self.local.daemons.values() if self.shape.http else ():
            wait_for(
                lambda d=daemon: http_status(d, "/health") == 200,
                timeout=60,
                what=f"HTTP of {daemon.daemon_id} up",
            )

    def begin(self) -> SharedCluster:
        """The fleet as the next test gets it: each daemon's log shown from here on."""
        for daemon in self.local.daemons.values():
            if isinstance(daemon, FleetDaemon):
                daemon.log_from = daemon.log_path.stat().st_size
        return self.local

    def state(self) -> dict[str, Any]:
        """What a test must leave as it found it: the daemons' processes, the leader, and the
        nodes of the fleet's own (members, settings, pools, schedules, drain marks, quarantine,
        the fleet's protocol)."""
        zk = self.local.zk
        leader = self.local.leader()
        seen: dict[str, Any] = {
            "daemons": {d: (p.pid, p.alive) for d, p in self.local.daemons.items()},
            "leader": None if leader is None else (leader.daemon_id, leader.pid),
        }
        for name in ("members", "pools", "schedules", "drained", "quarantine", "conditions"):
            seen[name] = sorted(_children(zk, f"{self.layout.base}/{name}"))
        for name in ("settings", "fleet"):
            seen[name] = _data(zk, f"{self.layout.base}/{name}")
        return seen

    def changes(self) -> list[str]:
        """What differs from the fleet as it started, one line each (none: unchanged)."""
        now = self.state()
        return [
            f"{name}: {self.before[name]!r} -> {now[name]!r}"
            for name in self.before
            if now[name] != self.before[name]
        ]

    def reset(self) -> list[str]:
        """End and forget every job the test left, then return what else it changed."""
        left = self._end_jobs()
        return left + self.changes()

    def _end_jobs(self) -> list[str]:
        deadline = time.monotonic() + RESET_DEADLINE
        with Cluster.open(self.config, zk=self.local.zk) as cluster:
            while True:
                current = _children(cluster.zk, self.layout.current_jobs)
                quarantined = _children(cluster.zk, self.layout.quarantine)
                finished = _children(cluster.zk, self.layout.results)
                stray = _children(cluster.zk, self.layout.jobs) - current - quarantined
                left = current | quarantined | finished | stray
                if not left:
                    return []
                for job_id in current | quarantined:  # a quarantined one is purged
                    with contextlib.suppress(ZkStoreError):
                        cancel(cluster, job_id, reason="the test ended (shared fleet reset)")
                for job_id in finished | stray:  # a race or a cleanup unfinished: again
                    with contextlib.suppress(ZkStoreError):
                        forget(cluster, job_id)
                if time.monotonic() > deadline:
                    return [f"jobs not ended within {RESET_DEADLINE:g} s: {sorted(left)}"]
                time.sleep(0.1)

    def leaks(self, *, whole: bool = False) -> list[str]:
        """The variables of the shape's environment whose value is in a daemon's log, one line
        each (none: no secret shown): in the part of the log since :meth:`begin` (the test's),
        or in the whole log (``whole``: what the fleet's start, the resets between tests and its
        stop wrote too)."""
        found = []
        for daemon in self.local.daemons.values():
            log = DaemonProcess.log(daemon) if whole else daemon.log()
            found += [
                f"{daemon.daemon_id}: the value of {name} is in its log"
                for name, value in self.shape.env
                if value in log
            ]
        return found

    def close(self) -> list[str]:
        """Stop the daemons; return :meth:`leaks` over their whole logs."""
        self.local.close()
        return self.leaks(whole=True)


def _children(zk: ZooKeeper, path: str) -> set[str]:
    try:
        return set(zk.children(path))
    except HandleNotFound:
        return set()


def _data(zk: ZooKeeper, path: str) -> bytes | None:
    try:
        data, _ = zk.get(path)
    except HandleNotFound:
        return None
    return bytes(data)


class Fleets:
    """This test process's shared fleets, by shape (:class:`SharedFleet`)."""

    def __init__(self, config: StoreConfig, work_dir: Path) -> None:
        self.config = config
        self.work_dir = work_dir
        self.fleets: dict[Shape, SharedFleet] = {}

    def of(self, shape: Shape) -> SharedFleet:
        if shape not in self.fleets:
            fleet_id = uuid.uuid4().hex[:8]
            config = self.config.with_changes(
                root=f"/fleet{fleet_id}",
                session_timeout=shape.session_timeout,
                storage_url=f"file://{self.work_dir}/{fleet_id}/storage",
            )
            if shape.credentials:
                config = secured(config)
            self.fleets[shape] = SharedFleet(config, self.work_dir / fleet_id, shape)
        return self.fleets[shape]

    def after_test(self, shape: Shape) -> list[str]:
        """Reset the fleet of ``shape`` after a test; return why the test fails, one line each
        (none: it passes): a value of the shape's ``env`` in the test's part of a daemon's log,
        or a change of the fleet (which is then replaced, and its whole logs read)."""
        fleet = self.fleets[shape]
        changed = fleet.reset()
        leaked = fleet.leaks()
        if changed:
            leaked += self.discard(shape)
        failures = []
        if leaked:
            failures.append("no token reaches a log: " + "; ".join(sorted(set(leaked))))
        if changed:
            failures.append(
                "the test changed the shared fleet (mark it @pytest.mark.disturbs): "
                + "; ".join(changed)
            )
        return failures

    def discard(self, shape: Shape) -> list[str]:
        """Stop a fleet a test changed: the next test of its shape gets a new one. Returns what
        its whole logs showed of its secrets (:meth:`SharedFleet.leaks`)."""
        fleet = self.fleets.pop(shape, None)
        return [] if fleet is None else fleet.close()

    def close(self) -> None:
        """Stop every fleet; raises AssertionError if a daemon's log showed a secret."""
        leaked = [line for shape in list(self.fleets) for line in self.discard(shape)]
        if leaked:
            raise AssertionError("a secret reached a shared fleet's log: " + "; ".join(leaked))
