"""Starting driver processes: one OS process per attempt, in its own session.

A driver is started with ``start_new_session=True``, so it is not in the daemon's process group:
a signal to the daemon (Ctrl-C, SIGTERM, SIGKILL) does not reach it, and it outlives a daemon
crash. Its output goes to a log file per attempt, which the daemon's log shipper (one process
for all its drivers) stores in object storage as it grows (:mod:`recovery.member.log_shipper`); it
runs in a fresh
working directory per attempt (``<work dir>/<job>-attempt-<n>``, see
:mod:`recovery.driver.workdir`), which its daemon removes when it sees the driver exit.

Its store configuration comes through a pipe (``--config-fd``) that the driver reads once and
closes: never through its environment or command line, which the Spark JVM and the Python
workers that run job code inherit or can read. It holds its own job's signing key, never the
cluster's (:meth:`zkstore.config.StoreConfig.for_job`), so that job code reading the driver's
memory can sign nothing of another job. The daemon's own secret variables (the cluster's signing
key, the API tokens) are removed from the driver's environment.

With ``--driver-user`` (:mod:`recovery.member.driveruser`), each driver runs as a user of the
daemon's pool, in a directory owned by that user (mode 0700), with that user's ``HOME``,
``USER`` and ``LOGNAME``; its log file stays the daemon's (mode 0600, opened before the driver
changes its user).

Its Spark JVM (:mod:`recovery.member.warm_jvms`): the environment names the class-data archive
once the daemon has verified it, and the deployment's ``spark-defaults.conf``; with
``--warm-drivers``, an attempt may take a warm JVM the first time its job asks for Spark: its
driver gets the warm JVMs' settings through its configuration pipe (a second line) and its end
of a channel to ask for one as ``--warm-fd`` (:mod:`recovery.member.warm_jvms.asks`), nothing
of any JVM. With ``--driver-user`` an attempt takes one at its launch if one is ready (the
driver runs as the JVM's user): its directory and log become the attempt's, and the driver
gets the JVM's gateway through its configuration pipe and the JVM's standard input as
``--warm-fd``. An attempt whose job's
summary shows a JVM-level setting the warm JVMs lack takes none; its driver is told why (the
pipe's third line).

Why one module: everything a driver's start must get right meets in one call (its
environment and configuration pipe, its descriptors, its user, its log, its warm JVM, forked or
a new process); what stands alone (the fork server, the driver users, the log's shipping, the
class data) lives apart.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from recovery.member import driveruser
from recovery.member.adoption import LAUNCHES
from recovery.member.driveruser import DriverUserPool
from recovery.member.forkserver import ForkedProcess, ForkServer
from recovery.member.log_shipping import SHIPPER_NICENESS, Shipping, start_process
from recovery.member.warm_jvms.asks import WarmAsks
from recovery.member.warm_jvms.class_data import ClassData
from recovery.member.warm_jvms.pool import PoolSetup, Taken, WarmPool
from recovery.settings import DaemonSettings, DriverUser
from recovery.shared import attemptdir
from recovery.shared.jvm_settings import WARM_ENV, WarmAsk
from recovery.shared.processes import (
    EXIT_NOT_SEEN,
    ProcessIdentity,
    boot_id,
    spawn_with_config,
    start_ticks,
)
from zkstore.config import ENV_VARS, SECRET_ENV_VARS
from zkstore.errors import ConfigError
from zkstore.jobs.runspec import RunSpec
from zkstore.records.job_states import DriverExit
from zkstore.zookeeper import identity

__all__ = [
    "DRIVER_MEMBER_ENV",
    "DRIVER_OF_ENV",
    "EXIT_MEANINGS",
    "LOGS",
    "SHIPPER_FINISH",
    "DriverLauncher",
    "DriverProcess",
    "Launch",
    "class_data_dir",
    "default_work_root",
    "describe_exit",
    "open_log",
    "storage_modules",
]

logger = logging.getLogger(__name__)

#: Names the cluster (its ZooKeeper base path) a driver belongs to, so that tools can find the
#: drivers of a cluster on a host; not a secret.
DRIVER_OF_ENV = "ZKSTORE_DRIVER_OF"
#: Names the daemon (fleet member) that launched a driver.
DRIVER_MEMBER_ENV = "ZKSTORE_DRIVER_MEMBER"
#: the drivers' logs, in the work directory, without --log-dir
LOGS = ".logs"
#: how long a stopping daemon waits for its log shipper to store the last lines (seconds)
SHIPPER_FINISH = 10.0

#: What each exit of a driver process means (:class:`zkstore.records.job_states.DriverExit`).
EXIT_MEANINGS: dict[int, str] = {
    DriverExit.SUCCEEDED: "succeeded",
    DriverExit.FAILED: "failed",
    # A driver exits 3 when it could not take its attempt; a job's own code may exit 3 after it
    # ran for a while, so it is not told as "refused to start" (issue 27).
    DriverExit.REFUSED: "exited with code 3 (a driver's code for an attempt it could not take: "
    "superseded, or another attempt holds it; or the job's own exit code)",
    DriverExit.CANCELLED: "cancelled",
    DriverExit.BROKEN: "could not load its definition",
    DriverExit.SUSPENDED: "stopped itself: ZooKeeper session suspended",
}


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code == EXIT_NOT_SEEN:
        return "ended (adopted after its daemon restarted: how is not known)"
    if code < 0:
        return f"killed by signal {-code}"
    return EXIT_MEANINGS.get(code, f"exited with code {code}")


class DriverProcess(Protocol):
    """What a launch needs of a driver process: a ``subprocess.Popen``, or a driver forked by
    the fork server (:class:`recovery.member.forkserver.ForkedProcess`)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...

    def kill(self) -> None: ...


@dataclass
class Launch:
    """A driver process this daemon started, or adopted (started by an earlier incarnation of
    this daemon, which a restart left running: then not our child, followed through a pidfd)."""

    job_id: str
    attempt: int
    status_version: int
    process: DriverProcess
    log_path: Path
    work_dir: Path
    #: who the driver process is, for ever (see :mod:`recovery.shared.processes`)
    identity: ProcessIdentity
    adopted: bool = False
    started: float = field(default_factory=time.monotonic)
    #: the warm driver JVM the attempt took at its launch, if it took one
    warm_id: str | None = None

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def exit_code(self) -> int | None:
        return self.process.poll()

    @property
    def age(self) -> float:
        return time.monotonic() - self.started


class DriverLauncher:
    """Builds the driver's command and environment and starts it."""

    def __init__(self, settings: DaemonSettings) -> None:
        self.settings = settings
        self.work_root = (
            Path(settings.work_dir) if settings.work_dir else default_work_root(settings)
        )
        #: where the drivers' logs go: --log-dir, else beside the launch records (the same for
        #: every start of the daemon, removed with them: see :meth:`close`)
        self.log_dir = Path(settings.log_dir) if settings.log_dir else self.work_root / LOGS
        #: where Spark is, the deployment's configuration, the class-data archive
        self.class_data = ClassData(
            class_data_dir(settings, self.work_root), self._base_environment
        )
        #: who drivers run as: None, the daemon's user; else its --driver-user pool
        self.driver_users = DriverUserPool(settings.driver_users) if settings.driver_users else None
        #: the users other than ours whose attempt directories this daemon removes
        self.driver_uids = self.driver_users.uids if self.driver_users else frozenset()
        #: this daemon's claims of its driver users on this host (held until it stops)
        self._claims: list[int] = []
        if settings.driver_users:
            self._claims = driveruser.claim_users(settings.driver_users, settings.daemon_id)
            try:
                driveruser.prepare(settings, self.work_root, self.environment)
            except BaseException:
                driveruser.release_users(self._claims, settings.driver_users)
                raise
        #: drivers started so far (a metric)
        self.launched = 0
        self.fork_server: ForkServer | None = (
            ForkServer(
                settings.python,
                self.environment(),
                logger.info,
                storage_modules(settings.store.storage_url),
            )
            if settings.fork_server
            else None
        )
        #: the hand-over of each driver's log to the daemon's log shipper
        self.shipping = Shipping(
            self.work_root, settings.daemon_id, settings.store, self._start_shipper
        )
        #: the warm driver JVMs (--warm-drivers), None without any
        self.warm: WarmPool | None = (
            WarmPool(
                PoolSetup(
                    target=settings.warm_drivers,
                    daemon_id=settings.daemon_id,
                    spark_master=settings.spark_master,
                    python=settings.python,
                    work_root=self.work_root,
                    log_dir=lambda: self.log_dir,
                    environment=self._base_environment,
                    fork_server=self.fork_server,
                    users=self.driver_users,
                    owners=self.driver_uids,
                    passes=settings.warm_up_passes,
                ),
                self.class_data,
            )
            if settings.warm_drivers > 0
            else None
        )
        #: the attempts' channels to take a warm JVM at first use (drivers of the daemon's own
        #: user; with --driver-user an attempt takes one at its launch, as its user is the JVM's)
        self.asks: WarmAsks | None = None

    def start(self) -> None:
        """Start what this daemon does in the background for its drivers: the fork server
        (its imports done before the first launch needs it), the class-data archive, the
        warm JVMs."""
        if self.fork_server is not None:
            try:
                self.fork_server.start()
            except OSError as exc:  # the first fork tries again; until then, new processes
                logger.warning("fork server not started: %s", exc)
        self.class_data.start()
        if self.warm is not None:
            self.warm.start()
            if self.driver_users is None:
                self.asks = WarmAsks(self.warm)

    def _start_shipper(self, argv: list[str], config: str, log: Path) -> int:
        """Start the daemon's log shipper: forked by the fork server (a few milliseconds), or
        as a new process if there is none or it failed."""
        if self.fork_server is not None:
            try:
                shipper = self.fork_server.fork(
                    argv,
                    self.environment(),
                    "/",
                    str(log),
                    config,
                    kind="shipper",
                    nice=SHIPPER_NICENESS,
                )
                logger.info("log shipper started (pid %d)", shipper.pid)
                return shipper.pid
            except OSError as exc:
                logger.warning("fork server: %s; starting the log shipper as a new process", exc)
        pid = start_process(self.settings.python, self.environment())(argv, config, log)
        logger.info("log shipper started (pid %d)", pid)
        return pid

    def environment(self, user: DriverUser | None = None) -> dict[str, str]:
        """The environment of the daemon's children (fork server, log shipper, drivers): the
        daemon's own less every secret variable; a driver of ``user`` gets that user's home and
        name, and what its Spark JVM needs of the class-data setup
        (:meth:`ClassData.environment`)."""
        env = self._base_environment(user)
        env.update(self.class_data.environment(env))
        env[WARM_ENV] = str(self.settings.warm_drivers)
        return env

    def _base_environment(self, user: DriverUser | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV_VARS}
        if user is not None:
            env.update(HOME=user.home, USER=user.name, LOGNAME=user.name)
        env[DRIVER_OF_ENV] = self.settings.store.base_path
        env[DRIVER_MEMBER_ENV] = self.settings.daemon_id
        env[ENV_VARS["spark_master"]] = self.settings.spark_master
        env["PYTHONUNBUFFERED"] = "1"
        # Spark's Python workers run PYSPARK_PYTHON ("python3" if unset, which may lack pyspark
        # and zkstore): by default, the Python that runs the driver.
        env.setdefault("PYSPARK_PYTHON", self.settings.python)
        return env

    def command(
        self,
        job_id: str,
        attempt: int,
        status_version: int,
        config_fd: int,
        work_dir: Path,
        log_path: Path,
        warm_fd: int | None = None,
    ) -> list[str]:
        warm = ["--warm-fd", str(warm_fd)] if warm_fd is not None else []
        return [
            self.settings.python,
            "-P",  # its working directory (the job's files) is not first on the path
            "-m",
            "recovery.driver.driver",
            "--config-fd",
            str(config_fd),
            "--job-id",
            job_id,
            "--attempt",
            str(attempt),
            "--status-version",
            str(status_version),
            "--cancel-grace",
            str(self.settings.cancel_grace),
            "--work-dir",
            str(work_dir),
            "--log-uri",
            f"file://{socket.gethostname()}{log_path.resolve()}",
            *warm,
        ]

    def _fork(
        self,
        job_id: str,
        attempt: int,
        status_version: int,
        paths: tuple[Path, Path],
        config: str,
        user: DriverUser | None,
        warm_fd: int | None,
    ) -> ForkedProcess | None:
        """The driver, forked by the fork server (as ``user``; with ``warm_fd``, the standard
        input of the warm JVM it took); None if there is none or it failed (then it is
        started as a new process)."""
        if self.fork_server is None:
            return None
        work_dir, log_path = paths
        command = self.command(job_id, attempt, status_version, -1, work_dir, log_path, warm_fd)
        argv = command[command.index("recovery.driver.driver") + 1 :]  # the driver's own
        argv[argv.index("--config-fd") + 1] = "{config_fd}"  # the server makes the pipe
        fds = {}
        if warm_fd is not None:
            argv[argv.index("--warm-fd") + 1] = "{warm_fd}"
            fds["{warm_fd}"] = warm_fd
        try:
            driver = self.fork_server.fork(
                argv,
                self.environment(user),
                str(work_dir),
                str(log_path),
                config,
                user=user,
                fds=fds,
            )
        except OSError as exc:
            logger.warning("fork server: %s; starting the driver as a new process", exc)
            return None
        return driver

    def _spawn(
        self,
        job_id: str,
        attempt: int,
        status_version: int,
        paths: tuple[Path, Path],
        config: str,
        user: DriverUser | None,
        warm_fd: int | None,
    ) -> DriverProcess:
        """The driver as a new Python process (its configuration through a pipe), as
        ``user``."""
        work_dir, log_path = paths
        return spawn_with_config(
            lambda fd: self.command(
                job_id, attempt, status_version, fd, work_dir, log_path, warm_fd
            ),
            config,
            log=log_path,
            env=self.environment(user),
            cwd=work_dir,
            user=user,
            extra_fds=(warm_fd,) if warm_fd is not None else (),
            no_new_privileges=True,
        )

    def adopted(self, driver: ProcessIdentity) -> None:
        """A live driver of an earlier life of this daemon is followed again (its user busy)."""
        if self.driver_users is not None:
            self.driver_users.adopted(driver)

    def driver_gone(self, launch: Launch) -> None:
        """The launch's driver has exited: the warm JVM it took is ended; with a pool of
        users, nothing is left running as its user (:meth:`DriverUserPool.ended`)."""
        if self.warm is not None:
            if launch.warm_id is not None:
                self.warm.discard(launch.warm_id)
            else:  # taken at first use, or adopted after a restart: its record names it
                self.warm.attempt_over(launch.job_id, launch.attempt)
        if self.asks is not None:
            self.asks.attempt_over(launch.job_id, launch.attempt)
        ended = self.driver_users.ended(launch.identity) if self.driver_users else None
        if ended is not None and ended[1]:
            logger.warning(
                "job %s: attempt %d: SIGKILL to %d process(es) its driver left running as %s",
                launch.job_id,
                launch.attempt,
                ended[1],
                ended[0],
            )

    def attempt_over(self, job_id: str, attempt: int) -> None:
        """An attempt whose driver is verified gone was found (a restart): the warm JVM it
        took, if any, is ended."""
        if self.warm is not None:
            self.warm.attempt_over(job_id, attempt)

    def close(self) -> None:
        """End the warm JVMs nobody took, stop the fork server (the drivers it forked go on)
        and let the log shipper go once it has stored what it follows. A daemon of the default
        directories whose drivers have all ended (no launch record left) and whose shipper has
        stored everything removes its directory under ``<tmp>/zkstore-<uid>/`` (and that one, if
        it is left empty): a clean stop leaves nothing in /tmp but this user's class-data
        archive (``<tmp>/zkstore-<uid>/class-data``: kept for the next start). With a live
        driver, everything stays for its adoption."""
        self.class_data.stop()
        if self.asks is not None:
            self.asks.close()
        if self.warm is not None:
            self.warm.close()
        if self.fork_server is not None:
            self.fork_server.close()
        self.shipping.close()
        if self._claims:
            driveruser.release_users(self._claims, self.settings.driver_users)
            self._claims = []
        settings = self.settings
        if settings.work_dir or settings.log_dir or settings.driver_users:
            return
        launches = self.work_root / LAUNCHES / settings.daemon_id
        if any(launches.glob("*.json")) or not self.shipping.finished(SHIPPER_FINISH):
            return
        tree = self.work_root.parent  # <tmp>/zkstore-<uid>/<cluster>-<daemon id>
        shutil.rmtree(tree, ignore_errors=True)
        with contextlib.suppress(OSError):
            tree.parent.rmdir()  # other daemons' directories keep it

    def log_path(self, job_id: str, attempt: int) -> Path:
        return self.log_dir / job_id / f"attempt-{attempt}.log"

    def work_dir(self, job_id: str, attempt: int) -> Path:
        return self.work_root / f"{job_id}-attempt-{attempt}"

    def driver_config(self, job_id: str, *, own_identity: bool = False) -> str:
        """What a driver of ``job_id`` is given through its pipe: its job's signing key, and
        with ``own_identity`` its job's ZooKeeper identity instead of the cluster's
        (:mod:`zkstore.zookeeper.identity`; the cluster's digest credentials only)."""
        store = self.settings.store
        driver = (
            identity.driver_identity(store.zk_auth, store.cluster_id, job_id, store.zk_read_acl)
            if own_identity
            else None
        )
        zk_driver = driver.to_json() if driver is not None else None
        return store.for_job(job_id, zk_driver=zk_driver).to_json()

    def launch(
        self,
        job_id: str,
        attempt: int,
        status_version: int,
        *,
        own_identity: bool = False,
        run: RunSpec | None = None,
    ) -> Launch:
        """Start the driver of ``attempt`` (with its job's ZooKeeper identity if
        ``own_identity``; with a warm JVM unless ``run``, its job's run options as its handle
        keeps them, says it cannot use one); raises OSError if the process cannot be
        started.

        The caller has made sure that no driver of the attempt lives on this host (see
        :mod:`recovery.member.adoption`): a working directory left over is a dead driver's.
        """
        config = self.driver_config(job_id, own_identity=own_identity)
        log_path = self.log_path(job_id, attempt)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        work_dir = self.work_dir(job_id, attempt)
        warm, ask_fd, config = self._warm_for(job_id, attempt, (work_dir, log_path), run, config)
        if warm is not None:  # a warm JVM's user is its driver's
            user = warm.user
        else:
            user = self.driver_users.take() if self.driver_users is not None else None
        try:
            if warm is None:
                attemptdir.remove(work_dir, self.driver_uids)  # left by a dead driver of it
                attemptdir.make(work_dir, (user.uid, user.gid) if user is not None else None)
            process, ticks, offset = self._start(
                job_id, attempt, status_version, (work_dir, log_path), config, user, warm, ask_fd
            )
        except BaseException:
            if user is not None and self.driver_users is not None:
                self.driver_users.release(user)
            if warm is not None and self.warm is not None:
                self.warm.discard(warm.offer.warm_id)
            if self.asks is not None:
                self.asks.attempt_over(job_id, attempt)
            raise
        finally:
            if ask_fd is not None:
                os.close(ask_fd)  # the driver's end: the driver holds it now
        if warm is not None and self.warm is not None:
            self.warm.handed(warm.offer.warm_id)  # the driver holds the JVM's input now
        driver = ProcessIdentity(socket.gethostname(), process.pid, ticks, boot_id())
        if user is not None and self.driver_users is not None:
            self.driver_users.started(user, driver)
        logger.debug(
            "started driver of %s attempt %d (pid %d, log %s)",
            job_id,
            attempt,
            process.pid,
            log_path,
        )
        self.launched += 1
        self.shipping.follow(job_id, attempt, log_path, driver, offset=offset)
        launch = Launch(job_id, attempt, status_version, process, log_path, work_dir, driver)
        if warm is not None:
            launch.warm_id = warm.offer.warm_id
            logger.info(
                "job %s: attempt %d took warm driver %s (its Spark JVM, pid %d)",
                job_id,
                attempt,
                warm.offer.warm_id,
                warm.offer.pid,
            )
        return launch

    def _warm_for(
        self,
        job_id: str,
        attempt: int,
        paths: tuple[Path, Path],
        run: RunSpec | None,
        config: str,
    ) -> tuple[Taken | None, int | None, str]:
        """The attempt's warm JVM, as its driver is told of it: taken now (with
        ``--driver-user``), a channel to ask for one at first use (the driver's end), or
        neither (its job's run options rule one out: why, the pipe's third line); and the
        configuration with the lines that say so."""
        if self.warm is None:
            return None, None, config
        declined = self.warm.declines(run)
        if declined is not None:
            logger.info(
                "job %s: attempt %d launched without a warm driver (its run options): %s",
                job_id,
                attempt,
                declined,
            )
            return None, None, f"{config}\n\n{' '.join(declined.splitlines())}"
        if self.asks is not None:  # a JVM at first use
            ask_fd = self.asks.channel(job_id, attempt, paths[0])
            return None, ask_fd, f"{config}\n{WarmAsk(self.warm.defaults()).to_json()}"
        warm = self.warm.take(job_id, attempt, *paths)
        return warm, None, config if warm is None else f"{config}\n{warm.offer.to_json()}"

    def _start(
        self,
        job_id: str,
        attempt: int,
        status_version: int,
        paths: tuple[Path, Path],
        config: str,
        user: DriverUser | None,
        warm: Taken | None,
        ask_fd: int | None = None,
    ) -> tuple[DriverProcess, int | None, int]:
        """Fork (else spawn) the driver; returns it, its start time and where its output
        begins in its log. Its ``--warm-fd`` is the standard input of the warm JVM it took at
        launch, or its end of the channel to ask for one at first use (``ask_fd``)."""
        offset = open_log(paths[1])
        warm_fd = warm.stdin if warm is not None else ask_fd
        forked = self._fork(job_id, attempt, status_version, paths, config, user, warm_fd)
        if forked is not None:
            return forked, forked.start_ticks, offset
        process = self._spawn(job_id, attempt, status_version, paths, config, user, warm_fd)
        return process, start_ticks(process.pid), offset  # our unreaped child: its own pid


def open_log(path: Path) -> int:
    """Make the log file of a driver if missing, readable by this daemon's user only (its
    log shipper reads it; drivers write into it through the descriptor they are given, never
    by its name); returns where the next output begins in it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def storage_modules(url: str) -> list[str]:
    """The modules fsspec imports at a storage's first use, for the fork server to import once
    instead of every driver (for s3fs, most of a second): the backend ``url`` names
    (``fsspec.implementations.local`` for ``file://``, ``s3fs`` for ``s3://``) and the caching
    layer ``url_to_fs`` imports whatever the protocol."""
    from fsspec.registry import known_implementations

    protocol = url.split("://", 1)[0] if "://" in url else "file"
    known = known_implementations.get(protocol)
    backend = [known["class"].rsplit(".", 1)[0]] if known else []
    # fsspec's url_to_fs imports its caching layer at each first call, whatever the protocol
    return [*backend, "fsspec.implementations.cached"]


def class_data_dir(settings: DaemonSettings, work_root: Path) -> Path | None:
    """Where the class-data archive is made and kept (``--class-data``): None when off; by
    default, with the default directories, this user's cache ``<tmp>/zkstore-<uid>/class-data``
    (kept at a clean stop, shared by the daemons of this user: made once, not at each start),
    else the work directory's ``.class-data``."""
    if settings.class_data == "off":
        return None
    if settings.class_data == "auto":
        if settings.work_dir:
            return work_root / ".class-data"
        return user_directory(settings) / "class-data"
    return Path(settings.class_data)


def default_work_root(settings: DaemonSettings) -> Path:
    """``<tmp>/zkstore-<uid>/<cluster>-<daemon id>/work``: the same for every start of a daemon
    of one id and cluster, so that a restarted daemon finds its launch records (and its live
    drivers' directories) again. The per-user directory must be private: anyone could otherwise
    plant a record (or a symlink) there; with ``--driver-user`` others may pass through it
    (mode 0711) to their attempts' directories, never list or change it."""
    cluster = re.sub(r"[^A-Za-z0-9._-]", "_", settings.store.base_path.strip("/"))
    return user_directory(settings) / f"{cluster}-{settings.daemon_id}" / "work"


def user_directory(settings: DaemonSettings) -> Path:
    """``<tmp>/zkstore-<uid>``, made private if missing (passable with ``--driver-user``);
    raises ConfigError if it is not this user's private directory."""
    base = Path(tempfile.gettempdir()) / f"zkstore-{os.getuid()}"
    passed = 0o711 if settings.driver_users else 0o700
    try:
        base.mkdir(mode=passed, exist_ok=True)
        info = os.lstat(base)
        if stat.S_IMODE(info.st_mode) == 0o700 and passed != 0o700 and info.st_uid == os.getuid():
            base.chmod(passed)
            info = os.lstat(base)
    except OSError as exc:
        raise ConfigError(f"cannot make {base}: {exc}; pass --work-dir") from exc
    private = 0o066 if settings.driver_users else 0o077
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & private:
        raise ConfigError(f"{base} is not a private directory of this user: pass --work-dir")
    return base
