"""Several recovery daemons on this machine, as real processes: for the demo, tests, benchmarks.

Each daemon is ``zkstore daemon`` in its own process, so it can be killed with a real signal;
it gets SIGTERM when the process that started it dies (:mod:`zkstore.lifeline`).
The cluster knows how to find its leader (``R/leader/info``) and the driver of a job (its
``running`` node), and on :meth:`LocalCluster.stop` it also stops the drivers its daemons left
behind (drivers outlive daemons by design).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recovery.member.launcher import DRIVER_MEMBER_ENV, DRIVER_OF_ENV
from zkstore import lifeline
from zkstore.config import ENV_VARS, StoreConfig
from zkstore.errors import CorruptRecord, HandleNotFound
from zkstore.layout import Layout
from zkstore.lifecycle.destinations import ALLOWED_ENV
from zkstore.records.fleet_records import LeaderInfo
from zkstore.records.job_records import RunningInfo
from zkstore.records.record import read_record
from zkstore.schedules.schedule_limits import MIN_INTERVAL_ENV
from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "PASSED_ON",
    "DaemonProcess",
    "LocalCluster",
    "free_port",
    "installed_script",
    "storage_option_args",
]

logger = logging.getLogger(__name__)


@dataclass
class DaemonProcess:
    daemon_id: str
    process: subprocess.Popen[bytes]
    log_path: Path
    #: the daemon's HTTP base URL (``http://127.0.0.1:<port>``), if it serves HTTP
    url: str | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive:
            os.kill(self.process.pid, signum)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


#: the caller's bounds on submitters and its warm-ups' passes (tests, benchmarks) reach the
#: daemons started here
PASSED_ON = frozenset({MIN_INTERVAL_ENV, ALLOWED_ENV, "ZKSTORE_WARM_UP_PASSES"})


class LocalCluster:
    """Daemons of one cluster config, started and killed on demand."""

    def __init__(
        self,
        config: StoreConfig,
        work_dir: Path,
        *,
        spark_master: str = "local[2]",
        restart_backoff: float = 1.0,
        extra_args: tuple[str, ...] = (),
        http: bool = False,
        extra_env: dict[str, str] | None = None,
        verbose: bool = True,
        python: str = sys.executable,
        user: tuple[int, int] | None = None,
        warm_drivers: int = 0,
        class_data: str = "off",
        daemon_args: dict[str, tuple[str, ...]] | None = None,
        hosts: Mapping[str, Sequence[str]] | None = None,
        jobs_may_read_secrets: bool = True,
    ) -> None:
        self.config = config
        self.work_dir = Path(work_dir)
        self.spark_master = spark_master
        self.restart_backoff = restart_backoff
        self.extra_args = extra_args
        #: serve HTTP on a free loopback port per daemon (never the default port, which other
        #: daemons on this machine may hold)
        self.http = http
        self.extra_env = dict(extra_env or {})
        self.verbose = verbose
        #: the Python that runs the daemons (and so their fork servers and drivers)
        self.python = python
        #: the (uid, gid) the daemons run as (None: this process's; another needs root)
        self.user = user
        #: ``--warm-drivers`` and ``--class-data`` of every daemon, through their variables (a
        #: daemon's own arguments win; an older release ignores them): none and off unless
        #: asked, so that a cluster of many daemons starts no JVM nobody uses, nor makes an
        #: archive per daemon
        self.warm_drivers = warm_drivers
        self.class_data = class_data
        #: more arguments of one daemon (by id), at each of its starts
        self.daemon_args = dict(daemon_args or {})
        #: the command prefix that starts the daemon of an id on a host of its own
        #: (``ip netns exec NAME``, :mod:`zkstore_dev.hosts`); its drivers run there too
        self.hosts = {daemon_id: list(prefix) for daemon_id, prefix in (hosts or {}).items()}
        self.daemons: dict[str, DaemonProcess] = {}
        self._zk: ZooKeeper | None = None
        #: the daemons run their drivers as their own user (unless a test gives them
        #: --driver-user) while they hold the cluster's secrets: accepted explicitly
        #: (``--jobs-may-read-secrets``, through its variable, which an older release ignores)
        self.jobs_may_read_secrets = jobs_may_read_secrets

    @property
    def zk(self) -> ZooKeeper:
        if self._zk is None:
            self._zk = ZooKeeper.from_config(self.config, session_timeout=10.0).start()
        return self._zk

    def environment(self) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("ZKSTORE_") or k in PASSED_ON
        }
        env.update(
            {
                ENV_VARS["zk_hosts"]: self.config.zk_hosts,
                ENV_VARS["root"]: self.config.root,
                ENV_VARS["cluster_id"]: self.config.cluster_id,
                ENV_VARS["storage_url"]: self.config.storage_url,
                ENV_VARS["spark_master"]: self.spark_master,
            }
        )
        if self.config.signing_key is not None:
            env[ENV_VARS["signing_key"]] = self.config.signing_key.decode()
        if self.config.zk_auth is not None:
            env[ENV_VARS["zk_auth"]] = self.config.zk_auth.to_text()
        if self.config.zk_read_acl:
            env[ENV_VARS["zk_read_acl"]] = ",".join(self.config.zk_read_acl)
        if self.config.artifact_roots:
            env[ENV_VARS["artifact_roots"]] = ",".join(self.config.artifact_roots)
        env["ZKSTORE_WARM_DRIVERS"] = str(self.warm_drivers)
        env["ZKSTORE_CLASS_DATA"] = self.class_data
        if self.jobs_may_read_secrets:
            env["ZKSTORE_JOBS_MAY_READ_SECRETS"] = "1"
        env.update(self.extra_env)
        return env

    def start_daemon(
        self, daemon_id: str, *args: str, python: str | os.PathLike[str] | None = None
    ) -> DaemonProcess:
        """Start ``zkstore daemon --id daemon_id [args]`` (its log in ``work_dir/<id>.log``).

        ``python``: the interpreter of another installation of zkstore (a virtual environment
        of an earlier release, for the upgrade test) instead of this process's; its daemon,
        fork server and drivers run that installation's code."""
        log_path = self.work_dir / f"{daemon_id}.log"
        self.work_dir.mkdir(parents=True, exist_ok=True)
        port = free_port() if self.http else None
        command = [
            *self.hosts.get(daemon_id, ()),
            *self.daemon_command(daemon_id, *args, python=python, port=port),
        ]
        as_user = (
            {"user": self.user[0], "group": self.user[1], "extra_groups": []} if self.user else {}
        )
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                # the wrapper is this installation's (another's may have none, or another
                # name for it); it execs the command, which runs the other's interpreter
                lifeline.wrap(command, death_signal=signal.SIGTERM, python=self.python),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                # ``python -m`` (where no script is installed) puts the working directory
                # first on the path (the daemon's and its fork server's): another
                # installation's daemon must not import the checkout this process may run in.
                cwd=self.work_dir if python is not None else None,
                **as_user,  # type: ignore[call-overload]
            )
        url = f"http://127.0.0.1:{port}" if port else None
        daemon = DaemonProcess(daemon_id, process, log_path, url)
        self.daemons[daemon_id] = daemon
        return daemon

    def daemon_command(
        self,
        daemon_id: str,
        *args: str,
        python: str | os.PathLike[str] | None = None,
        port: int | None = None,
    ) -> list[str]:
        """The command line of a daemon of this cluster (HTTP on ``port``, else off): the
        ``zkstore`` script installed beside the interpreter, as a user starts it
        (:func:`installed_script`)."""
        return [
            *installed_script(str(python) if python is not None else self.python),
            *(["-v"] if self.verbose else []),
            "daemon",
            "--id",
            daemon_id,
            "--session-timeout",
            str(self.config.session_timeout),
            "--log-dir",
            str(self.work_dir / "drivers"),
            "--work-dir",
            str(self.work_dir / "attempts"),
            "--restart-backoff",
            str(self.restart_backoff),
            "--http",
            f"127.0.0.1:{port}" if port else "off",
            *self.storage_option_args(),
            *self.extra_args,
            *self.daemon_args.get(daemon_id, ()),
            *args,
        ]

    def storage_option_args(self) -> list[str]:
        return storage_option_args(self.config)

    def leader(self) -> LeaderInfo | None:
        """The published leader record (``id``, ``pid``, ``host``, ``since``), or None (none
        leads, or its record is unreadable)."""
        try:
            return read_record(self.zk, LeaderInfo, Layout(self.config.base_path).leader_info)
        except CorruptRecord:
            return None

    def wait_for_leader(
        self, *, exclude: str | None = None, timeout: float = 60.0
    ) -> DaemonProcess:
        """Block until a daemon other than ``exclude`` leads; return it."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            info = self.leader()
            if info is not None and info.daemon_id != exclude and info.daemon_id in self.daemons:
                return self.daemons[info.daemon_id]
            time.sleep(0.05)
        raise TimeoutError(f"no leader (other than {exclude}) within {timeout:g} s")

    def driver_pid(self, job_id: str) -> int | None:
        """The pid in the job's ``running`` node, if a driver holds it."""
        try:
            running = read_record(
                self.zk, RunningInfo, Layout(self.config.base_path).running(job_id)
            )
        except CorruptRecord:
            return None
        return None if running is None else running.pid

    def kill_host(self, daemon_id: str) -> list[int]:
        """SIGKILL a daemon and everything it started (drivers, log shippers), as the loss of
        its host would; returns the pids of the drivers of the jobs placed on it."""
        layout_base = self.config.base_path
        try:
            placed = self.zk.children(f"{layout_base}/assignments/{daemon_id}")
        except HandleNotFound:
            placed = []
        drivers = [pid for job in placed if (pid := self.driver_pid(job)) is not None]
        started = self.driver_processes(member=daemon_id)
        self.daemons[daemon_id].signal(signal.SIGKILL)
        for pid in sorted(set(drivers) | set(started)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return drivers

    def stop(self, *, timeout: float = 20.0) -> None:
        """SIGTERM every daemon, then stop the drivers left behind."""
        self.stop_daemons(timeout=timeout)
        for pid in self.driver_processes():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        if self._zk is not None:
            self._zk.stop()
            self._zk = None

    def stop_daemons(self, *, timeout: float = 20.0) -> None:
        """SIGTERM every daemon and wait for it (SIGKILL after ``timeout``); their drivers and
        anything else they left are not touched."""
        for daemon in self.daemons.values():
            daemon.signal(signal.SIGTERM)
        for daemon in self.daemons.values():
            try:
                daemon.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                daemon.process.kill()
                daemon.process.wait()

    def spark_jvms(self) -> list[int]:
        """Pids of the Java processes of this cluster still alive here: the Spark JVMs of its
        drivers, its daemons' warm drivers and archive making (their environment names the
        cluster, as a driver's does)."""
        found = []
        for pid in self.driver_processes():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == "java":
                    found.append(pid)
        return found

    def driver_processes(self, member: str | None = None) -> list[int]:
        """Pids of driver processes of this cluster (of one daemon, if ``member`` is given)
        still alive on this machine (Linux)."""
        marker = f"{DRIVER_OF_ENV}={self.config.base_path}\0".encode()
        launched_by = f"{DRIVER_MEMBER_ENV}={member}\0".encode()
        found = []
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if marker in environ and (member is None or launched_by in environ):
                found.append(int(entry.name))
        return found


def installed_script(python: str) -> list[str]:
    """The command that runs ``zkstore`` with ``python``'s installation: the console script
    installed beside that interpreter (``bin/zkstore`` of its virtual environment, through its
    own entry point, as a user runs it); ``python -m recovery.cli.main`` only where none is
    installed there (an interpreter whose scripts went elsewhere, ``pip install --user``)."""
    script = Path(python).with_name("zkstore")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [python, "-m", "recovery.cli.main"]


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _flatten(options: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = []
    for key, value in options.items():
        if isinstance(value, dict):
            pairs += _flatten(value, f"{prefix}{key}.")
        else:
            pairs.append((f"{prefix}{key}", value))
    return pairs


def storage_option_args(config: StoreConfig) -> list[str]:
    """``config``'s storage options as the ``--storage-option key=value`` of a command."""
    args: list[str] = []
    for key, value in _flatten(dict(config.storage_options)):
        args += [
            "--storage-option",
            f"{key}={json.dumps(value) if not isinstance(value, str) else value}",
        ]
    return args
