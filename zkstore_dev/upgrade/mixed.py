"""A fleet of two releases on this machine: an embedded ZooKeeper, local storage, three daemons,
each run by the previous release or by this code, and each release's command line.

The daemons are :class:`~recovery.dev.localcluster.LocalCluster`'s, with the interpreter of the
release they run (the previous release's virtual environment, or this process's). A rolling
restart (:meth:`MixedFleet.roll`) moves them one at a time, the leader last: SIGTERM, wait for
the exit, start the other release with the same ``--id``, wait until its member record names
that release (``zkstore fleet status``), then the next.

Deadlines: a graceful stop is a bounded number of store operations (each within the store
timeout); a daemon's start is an interpreter's start on a loaded machine, which no timeout of
the product bounds: the start deadline only ends a run whose daemon never comes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from recovery.dev.localcluster import DaemonProcess, LocalCluster
from recovery.member.launcher import DRIVER_OF_ENV
from zkstore import __version__
from zkstore.closing import Closeable
from zkstore.config import ENV_VARS, StoreConfig
from zkstore.dev.embedded import SHORT_JVM_OPTIONS, EmbeddedZooKeeper
from zkstore.errors import ZkStoreError
from zkstore.layout import Layout
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.record import read_record
from zkstore.schedules.schedule_limits import MIN_INTERVAL_ENV

__all__ = [
    "DAEMON_IDS",
    "POLL",
    "SESSION_TIMEOUT",
    "START_DEADLINE",
    "STOP_DEADLINE",
    "STORE_TIMEOUT",
    "TAKEOVER_DEADLINE",
    "MixedFleet",
    "Ran",
    "Restart",
    "Side",
    "new_side",
    "wait_until",
]

#: The daemons' ZooKeeper session (the default): a lost leader's successor waits this long.
SESSION_TIMEOUT = 10.0
#: One ZooKeeper or storage operation's deadline (the default).
STORE_TIMEOUT = 5.0
#: A graceful stop: hand leadership over, stop the member, close the session (a few store
#: operations, each bounded by the store timeout).
STOP_DEADLINE = 12 * STORE_TIMEOUT
#: A daemon's or a command line's start on a loaded 2-core machine (not a product timeout).
START_DEADLINE = 180.0
#: A new leader after the last one left: a session timeout at worst (a crash), plus its start.
TAKEOVER_DEADLINE = 3 * SESSION_TIMEOUT + START_DEADLINE
DAEMON_IDS = ("d1", "d2", "d3")
POLL = 0.2


def wait_until(condition: Callable[[], bool], deadline: float, what: str) -> None:
    """Poll ``condition`` until it holds; :class:`TimeoutError` naming ``what`` after
    ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError(f"{what}: not within {deadline:g} s")
        time.sleep(POLL)


@dataclass(frozen=True)
class Side:
    """One release of the fleet: its name, version, interpreter and command line."""

    name: str
    version: str
    python: Path
    zkstore: Path


@dataclass
class Ran:
    """A command line's run."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def line(self) -> str:
        lines = (self.stderr or self.stdout).strip().splitlines()
        return lines[-1] if lines else ""


@dataclass
class Restart:
    """One daemon moved to another release."""

    daemon_id: str
    was_leader: bool
    to: str
    seconds: float


@dataclass
class MixedFleet(Closeable):
    """The servers and the daemons of one upgrade test."""

    work: Path
    old: Side
    new: Side
    say: Callable[[str], None] = print
    cluster_id: str = field(default_factory=lambda: f"upgrade-{uuid.uuid4().hex[:8]}")
    zookeeper: EmbeddedZooKeeper | None = None
    local: LocalCluster | None = None
    #: every daemon process started, by id (a restart appends)
    started: dict[str, list[tuple[Side, DaemonProcess]]] = field(default_factory=dict)

    # -- the servers ---------------------------------------------------------------------------

    def start_servers(self) -> StoreConfig:
        self.zookeeper = EmbeddedZooKeeper(data_dir=self.work / "zookeeper").start()
        config = StoreConfig(
            zk_hosts=self.zookeeper.connect_string,
            root="/zkstore-upgrade",
            cluster_id=self.cluster_id,
            storage_url=f"file://{self.work / 'storage'}",
            session_timeout=SESSION_TIMEOUT,
            timeout=STORE_TIMEOUT,
        )
        self.local = LocalCluster(
            config,
            self.work / "fleet",
            spark_master="local[1]",
            restart_backoff=0.5,
            extra_args=("--max-drivers", "8"),
            extra_env={
                # Spark drivers with the short JVM of a development server (C1, serial GC).
                "SPARK_SUBMIT_OPTS": " ".join(SHORT_JVM_OPTIONS),
                # The schedule fires every few seconds, under a production cluster's minimum
                # (an environment variable: a release without the bound ignores it).
                MIN_INTERVAL_ENV: "1s",
            },
        )
        return config

    @property
    def config(self) -> StoreConfig:
        return self.cluster.config

    @property
    def cluster(self) -> LocalCluster:
        assert self.local is not None, "start_servers() first"
        return self.local

    # -- command lines -------------------------------------------------------------------------

    def run(self, side: Side, *args: str, deadline: float = START_DEADLINE) -> Ran:
        """``zkstore ARGS`` of ``side``'s release, as an operator runs it (its environment
        names the cluster; run outside the checkout, so that each release runs its own code)."""
        return self.run_process([str(side.zkstore), *args], deadline=deadline)

    def run_process(self, argv: list[str], *, deadline: float = START_DEADLINE) -> Ran:
        """A process of the fleet's environment, run to its end in the fleet's directory."""
        ran = subprocess.run(
            argv,
            env=self.cluster.environment(),
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=deadline,
        )
        return Ran(argv, ran.returncode, ran.stdout, ran.stderr)

    def fleet_status(self) -> dict[str, object]:
        ran = self.run(self.new, "fleet", "status", "--format", "json")
        if ran.returncode != 0:
            raise RuntimeError(f"zkstore fleet status: exit {ran.returncode}: {ran.line()}")
        status: dict[str, object] = json.loads(ran.stdout)
        return status

    # -- daemons -------------------------------------------------------------------------------

    def start_daemon(self, daemon_id: str, side: Side) -> DaemonProcess:
        daemon = self.cluster.start_daemon(daemon_id, python=side.python)
        self.started.setdefault(daemon_id, []).append((side, daemon))
        return daemon

    def side_of(self, daemon_id: str) -> Side:
        return self.started[daemon_id][-1][0]

    def member(self, daemon_id: str) -> MemberInfo | None:
        try:
            return read_record(
                self.cluster.zk, MemberInfo, Layout(self.config.base_path).member(daemon_id)
            )
        except ZkStoreError:
            return None

    def wait_registered(self, daemon_id: str) -> None:
        """Until the daemon started last with this id holds its member record, naming its
        release, and ``zkstore fleet status`` lists it so."""
        side, daemon = self.started[daemon_id][-1]

        def registered() -> bool:
            if not daemon.alive:
                raise RuntimeError(
                    f"daemon {daemon_id} ({side.name} {side.version}) exited "
                    f"{daemon.process.returncode}: {daemon.log()[-2000:]}"
                )
            found = self.member(daemon_id)
            return found is not None and found.pid == daemon.pid

        wait_until(registered, START_DEADLINE, f"daemon {daemon_id} registered")
        listed = {
            d["daemon_id"]: d["release"]
            for d in self.fleet_status()["daemons"]  # type: ignore[attr-defined]
        }
        if listed.get(daemon_id) != side.version:
            raise RuntimeError(
                f"zkstore fleet status lists {daemon_id} as {listed.get(daemon_id)}, "
                f"not {side.version}"
            )

    def leader_id(self) -> str | None:
        info = self.cluster.leader()
        return None if info is None else info.daemon_id

    def wait_leading(self) -> str:
        """Until a live daemon leads and has taken over (its first pass over every job done)."""
        found: list[str] = []

        def leads() -> bool:
            info = self.cluster.leader()
            if info is None or info.recovered is None or info.daemon_id not in self.started:
                return False
            daemon = self.started[info.daemon_id][-1][1]
            if not daemon.alive or daemon.pid != info.pid:
                return False  # the record of a process that has gone (its session closing)
            found.append(info.daemon_id)
            return True

        wait_until(leads, TAKEOVER_DEADLINE, "a leader that has taken over")
        return found[-1]

    def start_fleet(self, side: Side) -> None:
        for daemon_id in DAEMON_IDS:
            self.start_daemon(daemon_id, side)
        for daemon_id in DAEMON_IDS:
            self.wait_registered(daemon_id)
        self.wait_leading()

    def roll(self, to: Side, after_each: Callable[[Restart], None]) -> list[Restart]:
        """Move every daemon to ``to``, one at a time, the leader last; ``after_each`` runs
        once the restarted daemon is registered (and, after the leader's restart, once a
        leader has taken over)."""
        done: list[Restart] = []
        while True:
            left = [d for d in DAEMON_IDS if self.side_of(d) != to]
            if not left:
                return done
            leader = self.wait_leading()
            others = [d for d in left if d != leader]
            daemon_id = others[0] if others else leader
            began = time.monotonic()
            daemon = self.started[daemon_id][-1][1]
            daemon.signal(signal.SIGTERM)
            try:
                daemon.process.wait(timeout=STOP_DEADLINE)
            except subprocess.TimeoutExpired as exc:
                raise RuntimeError(
                    f"daemon {daemon_id} did not stop within {STOP_DEADLINE:g} s of SIGTERM"
                ) from exc
            self.start_daemon(daemon_id, to)
            self.wait_registered(daemon_id)
            if daemon_id == leader:
                self.wait_leading()
            restart = Restart(daemon_id, daemon_id == leader, to.name, time.monotonic() - began)
            done.append(restart)
            self.say(
                f"  {daemon_id}{' (the leader)' if restart.was_leader else ''}: "
                f"{to.name} {to.version}, registered {restart.seconds:.1f} s after its SIGTERM"
            )
            after_each(restart)

    def stop_daemons(self) -> list[str]:
        """SIGTERM every live daemon and wait for each; the ones that did not stop in time."""
        live = [d for runs in self.started.values() for _, d in runs if d.alive]
        for daemon in live:
            daemon.signal(signal.SIGTERM)
        slow = []
        for daemon in live:
            try:
                daemon.process.wait(timeout=STOP_DEADLINE)
            except subprocess.TimeoutExpired:
                slow.append(daemon.daemon_id)
        return slow

    def processes(self) -> dict[str, list[int]]:
        """This cluster's processes still alive on this machine, by kind: daemons, drivers
        (and what they started: Spark's JVM), others (fork servers, log shippers). Found by
        their environment, which names this run's cluster id (Linux)."""
        marker = f"{ENV_VARS['cluster_id']}={self.cluster_id}\0".encode()
        driver = f"{DRIVER_OF_ENV}=".encode()
        found: dict[str, list[int]] = {"daemons": [], "drivers": [], "others": []}
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                environ = (entry / "environ").read_bytes()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker not in environ or int(entry.name) == os.getpid():
                continue
            if driver in environ:
                found["drivers"].append(int(entry.name))
            elif b"\0daemon\0" in cmdline and (
                b"recovery.cli.main\0" in cmdline or b"/zkstore\0" in cmdline
            ):
                found["daemons"].append(int(entry.name))
            else:
                found["others"].append(int(entry.name))
        return found

    def close(self) -> None:
        if self.local is not None:
            self.local.stop()
        if self.zookeeper is not None:
            self.zookeeper.close()


def new_side() -> Side:
    """This code: this process's interpreter and its ``zkstore`` script."""
    return Side("new", __version__, Path(sys.executable), Path(sys.executable).with_name("zkstore"))
