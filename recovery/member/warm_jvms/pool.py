"""Warm drivers: Spark driver JVMs a daemon keeps started and warmed ahead of need
(``zkstore daemon --warm-drivers N``).

A thread of the daemon keeps ``N`` JVMs ready, one start at a time: it runs Spark's launcher for
the daemon's default driver settings (its ``spark-defaults.conf`` and ``SPARK_SUBMIT_OPTS``, the
class-data archive once it is verified: :mod:`.archive`, :mod:`.home`) and starts the ``java``
command it prints, named ``zkstore warm-driver ID`` (``ps``), in a directory of its own, as the
user its drivers run as (``--driver-user``); the JVM runs pyspark's gateway
(``pyspark-shell``), writes the gateway's port and secret into a private file, which is read and
removed at once; then a throw-away context and queries warm it (:mod:`.warmup`) and are stopped.

**One attempt each.** An attempt placed here takes a ready JVM as its driver is launched
(:meth:`WarmPool.take`), unless its job's summary shows a JVM-level setting the warm JVMs lack
(:meth:`WarmPool.declines`: then none is taken, and none is started in its place beside the
job's own JVM): the JVM's directory becomes the attempt's (renamed: the JVM's current
directory is the attempt's, where its shipped files are), its log becomes the attempt's log, its
record names the attempt, and its driver gets the gateway's port and secret through its
configuration pipe and the write end of the JVM's standard input as a descriptor. The driver
connects to it if its job's JVM-level settings match the defaults it was started with
(:mod:`recovery.shared.jvm_settings`), else starts its own JVM and lets this one go. Either way it
serves no other attempt: it is ended once the attempt is over (:meth:`WarmPool.attempt_over`),
and the next is started :data:`REPLACE_AFTER` seconds after it was taken (not beside the
attempt's first Spark work).

**Nothing leaks.** The JVM's standard input is a pipe whose write end the daemon holds until an
attempt takes it, then that attempt's driver: pyspark's gateway exits when its standard input
ends, so a JVM dies with the daemon that started it (SIGKILL included) until it is taken, then
with its driver. A daemon's stop ends the ones not taken; a restarted daemon finds the records
of its earlier life's (:mod:`.warm_jvm_records`), ends those not taken (identified by pid and start
time) and ends each taken one when its attempt is over.

Each one counts against the host's memory (``--warm-drivers``' default: :mod:`recovery.capacity`).

Why one module: a warm JVM changes hands (started, warmed, taken, ended, found again after a
restart) under one lock in one table, and the two rules it must keep (one attempt each; it dies
with whoever holds its standard input) are kept where it changes hands; what stands alone (the
archive, the records, Spark's home, the warm-up) lives apart.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from recovery.member.driveruser import DriverUserPool
from recovery.member.forkserver import ForkedProcess, ForkServer
from recovery.member.warm_jvms import home
from recovery.member.warm_jvms.class_data import ClassData
from recovery.member.warm_jvms.warm_jvm_records import (
    WARM,
    WarmRecord,
    WarmRecords,
)
from recovery.proctitle import fit, warm_driver_title
from recovery.settings import WARM_UP_PASSES, DriverUser
from recovery.shared import attemptdir
from recovery.shared.jvm_settings import (
    ARCHIVE_ENV,
    JVM_LEVEL,
    PROPERTIES_ENV,
    WarmOffer,
    master_reason,
    parse_properties,
    quote_option,
    run_reason,
)
from recovery.shared.processes import (
    Adopted,
    Liveness,
    ProcessIdentity,
    boot_id,
    in_directory,
    probe,
    spawn_with_config,
    start_ticks,
)
from recovery.shared.sparkconf import loopback_ui
from zkstore.jobs.runspec import RunSpec
from zkstore.payloads import secrecy

__all__ = [
    "FIRST_RETRY",
    "JVM_START_TIMEOUT",
    "MAX_RETRY",
    "READY_LINE",
    "REPLACE_AFTER",
    "STOP_GRACE",
    "WARM_UP_TIMEOUT",
    "PoolSetup",
    "Taken",
    "WarmJvm",
    "WarmPool",
    "WarmUpFailed",
    "exchange",
    "idle_wait",
    "parse_connection_info",
]

logger = logging.getLogger(__name__)

#: the log line of a warm JVM ready (``zkstore demo`` reads it: tests/spark/test_demo_lines.py)
READY_LINE = "warm driver %s ready (pid %d, started and warmed in %.1f s%s)"

#: Seconds a warm JVM may take to open its gateway, and its warm-up to run (a loaded host).
JVM_START_TIMEOUT = 180.0
WARM_UP_TIMEOUT = 300.0
#: After a failed start, the next try waits this long, doubling up to the most.
FIRST_RETRY = 10.0
MAX_RETRY = 600.0
#: Seconds the JVMs not taken have to exit at the daemon's stop before they are killed.
STOP_GRACE = 10.0
#: Seconds after an attempt took a warm JVM before the pool starts the next: a JVM's start and
#: warm-up (6 s of a core) run beside the attempt's SparkSession and first action slowed them by
#: 0.1-0.15 s on two cores, which a host loss waits for (docs/benchmarks.md). Each take puts it
#: off again; a failed start's back-off (:data:`FIRST_RETRY`) still applies.
REPLACE_AFTER = 2.0


def idle_wait(due_at: float, now: float) -> float:
    """Seconds the pool's thread sleeps when it has nothing to do: until a start put off is due
    (``due_at``), at most a second; a second once it is past (a change wakes it sooner)."""
    left = due_at - now
    return min(1.0, left) if left > 0 else 1.0


class WarmUpFailed(Exception):
    """A warm JVM could not be started or warmed (why, one line)."""


@dataclass
class WarmJvm:
    """A warm JVM this daemon started."""

    record: WarmRecord
    process: subprocess.Popen[bytes]
    #: the write end of its standard input (-1 once an attempt's driver holds it)
    stdin: int
    user: DriverUser | None
    port: int = 0
    secret: str = field(default="", repr=False)
    warmed: float = 0.0
    #: the class-data archive it maps (None: started before the archive was ready)
    archive: Path | None = None

    @property
    def identity(self) -> ProcessIdentity:
        identity = self.record.identity
        assert identity is not None
        return identity

    def close_stdin(self) -> None:
        if self.stdin >= 0:
            with contextlib.suppress(OSError):
                os.close(self.stdin)
            self.stdin = -1


@dataclass(frozen=True)
class Taken:
    """A warm JVM an attempt took: what its driver is given (:class:`WarmOffer` through its
    configuration pipe, ``stdin`` as a descriptor), and the user it runs as."""

    offer: WarmOffer
    stdin: int
    user: DriverUser | None


@dataclass
class PoolSetup:
    """What the pool needs of its daemon (its launcher's): the work and log directories, the
    drivers' environment for a user, the fork server, the users drivers run as."""

    target: int
    daemon_id: str
    spark_master: str
    python: str
    work_root: Path
    log_dir: Callable[[], Path]
    environment: Callable[[DriverUser | None], dict[str, str]]
    fork_server: ForkServer | None
    users: DriverUserPool | None
    owners: frozenset[int] = frozenset()
    #: how often each warm-up runs its queries (``--warm-up-passes``: :mod:`.warmup`)
    passes: int = WARM_UP_PASSES


class WarmPool:
    """The warm JVMs of one daemon. :meth:`take`, :meth:`handed`, :meth:`discard` and
    :meth:`attempt_over` are called on the daemon's loop thread; the pool's own thread starts
    and warms JVMs."""

    def __init__(self, setup: PoolSetup, class_data: ClassData) -> None:
        self.setup = setup
        self.class_data = class_data
        self.records = WarmRecords(setup.work_root, setup.daemon_id)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._ready: list[WarmJvm] = []
        self._starting: WarmJvm | None = None
        #: JVMs attempts took, by id (this life's)
        self._handed: dict[str, WarmJvm] = {}
        #: records of JVMs attempts took in the daemon's earlier life, still alive then
        self._earlier: dict[str, WarmRecord] = {}
        self._retry = FIRST_RETRY
        self._retry_at = 0.0
        #: no start before this moment (:data:`REPLACE_AFTER` after the last take)
        self._start_after = 0.0
        self._thread: threading.Thread | None = None
        #: warm JVMs started and taken (metrics, tests)
        self.started = 0
        self.taken = 0
        #: when the pool was made (the daemon's start), and the seconds from then to its first
        #: JVM ready (None until then)
        self._made = time.monotonic()
        self.first_ready: float | None = None
        #: called (from any thread; it only posts) when the number of ready JVMs changes: the
        #: member publishes it (the leader prefers a daemon with one ready)
        self.changed: Callable[[], None] = lambda: None

    # -- the pool's thread -------------------------------------------------------------------

    def start(self) -> WarmPool:
        """Look at the earlier life's warm JVMs (at once: before the member's first look at
        its attempts), then start this life's on a thread of its own."""
        mode = 0o711 if self.setup.users is not None else 0o700
        self.records.make_directory(mode)
        self._sweep()
        self._thread = threading.Thread(target=self._run, name="warm-drivers", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self.class_data.startable.wait(1.0):
            if self._stop.is_set():
                return
        reason = self._unusable()
        if reason is not None:
            logger.warning("no warm drivers: %s", reason)
            return
        while not self._stop.is_set():
            self._reap()
            due_at = max(self._retry_at, self._start_after)
            due = time.monotonic() >= due_at
            if self._wanted() and due:
                self._start_one()
                continue
            stale = self._without_archive()
            if stale is not None and due:
                self._replace(stale)
                continue
            with self._changed:
                self._changed.wait(idle_wait(due_at, time.monotonic()))

    def _without_archive(self) -> WarmJvm | None:
        """A ready JVM started before the class-data archive was ready, now that it is."""
        archive = self.class_data.archive
        if archive is None:
            return None
        with self._lock:
            return next((jvm for jvm in self._ready if jvm.archive != archive), None)

    def _replace(self, stale: WarmJvm) -> None:
        """Start a JVM that maps the archive, then end ``stale`` if no attempt took it
        meanwhile (until the new one is ready, ``stale`` serves)."""
        if not self._start_one():
            return
        with self._lock:
            if stale not in self._ready:
                return
            self._ready.remove(stale)
        logger.info(
            "warm driver %s ended: started before the class-data archive, replaced",
            stale.record.warm_id,
        )
        self._end(stale)
        self.changed()

    def _unusable(self) -> str | None:
        plan, spark = self.class_data.conf_plan, self.class_data.spark
        if spark is None:
            return f"Spark cannot start here ({self.class_data.reason})"
        if plan is not None and plan.keep_reason is not None:
            return plan.keep_reason
        return master_reason(self.setup.spark_master)

    def _wanted(self) -> bool:
        with self._lock:
            return len(self._ready) < self.setup.target

    def _reap(self) -> None:
        """Ready JVMs that died (logged and removed), taken ones that ended (reaped)."""
        with self._lock:
            dead = [jvm for jvm in self._ready if jvm.process.poll() is not None]
            self._ready = [jvm for jvm in self._ready if jvm not in dead]
            for jvm in self._handed.values():
                jvm.process.poll()
        if dead:
            self.changed()
        for jvm in dead:
            logger.warning(
                "warm driver %s (pid %d) exited by itself (code %s); see %s",
                jvm.record.warm_id,
                jvm.process.pid,
                jvm.process.returncode,
                jvm.record.log,
            )
            self._end(jvm)

    def _start_one(self) -> bool:
        """Start and warm one JVM, ready for an attempt; False if it could not be (said)."""
        warm_id = uuid.uuid4().hex[:8]
        try:
            user = self.setup.users.take() if self.setup.users is not None else None
        except OSError:
            self._retry_at = time.monotonic() + 1.0  # every user is busy: when one is free
            return False
        jvm: WarmJvm | None = None
        began = time.monotonic()
        archive = self.class_data.archive  # before its environment is made: at worst older
        try:
            jvm = self._launch_jvm(warm_id, user)
            jvm.archive = archive
            with self._lock:
                self._starting = jvm
            jvm.port, jvm.secret = self._wait_for_gateway(jvm)
            jvm.warmed = self._warm_up(jvm)
        except (OSError, WarmUpFailed) as exc:
            if jvm is None and user is not None and self.setup.users is not None:
                self.setup.users.release(user)
            self._failed(warm_id, jvm, str(exc))
            return False
        finally:
            with self._lock:
                self._starting = None
        with self._lock:
            self._ready.append(jvm)
        self._retry = FIRST_RETRY
        self.started += 1
        logger.info(
            READY_LINE,
            warm_id,
            jvm.process.pid,
            time.monotonic() - began,
            "" if archive is not None else ", without the class-data archive",
        )
        if self.first_ready is None:
            self.first_ready = time.monotonic() - self._made
            logger.info("first warm driver ready %.1f s after the daemon started", self.first_ready)
        self.changed()
        return True

    def _failed(self, warm_id: str, jvm: WarmJvm | None, why: str) -> None:
        if self._stop.is_set():
            why = "the daemon is stopping"
        else:
            logger.warning(
                "warm driver %s not ready: %s; next try in %g s", warm_id, why, self._retry
            )
        if jvm is not None:
            self._end(jvm)
        self._retry_at = time.monotonic() + self._retry
        self._retry = min(self._retry * 2, MAX_RETRY)

    # -- starting one -------------------------------------------------------------------------

    def _launch_jvm(self, warm_id: str, user: DriverUser | None) -> WarmJvm:
        """Make its directories and record, then start the JVM (what was made is removed if
        it cannot start)."""
        records, owner = self.records, (user.uid, user.gid) if user is not None else None
        log = self.setup.log_dir() / WARM / f"{warm_id}.log"
        log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        host, boot = socket.gethostname(), boot_id()
        record = WarmRecord(warm_id, host, boot, str(log), user.uid if user else None)
        records.write(record)
        try:
            for place in (records.cwd(warm_id), records.scratch(warm_id), records.conn(warm_id)):
                place.mkdir(mode=0o700)
                if owner is not None:
                    attemptdir.give(place, owner)
            return self._exec_jvm(record, user)
        except BaseException:
            records.remove(record, self.setup.owners)
            raise

    def _exec_jvm(self, record: WarmRecord, user: DriverUser | None) -> WarmJvm:
        """Run Spark's launcher for the warm JVM of ``record`` and start what it prints."""
        records, warm_id, log = self.records, record.warm_id, record.log
        env = self._environment(warm_id, user)
        spark = self.class_data.spark
        assert spark is not None
        args = [*self.class_data.submit_args(), "--master", self.setup.spark_master]
        cwd = str(records.cwd(warm_id))
        command = home.launcher_command(
            spark, env, [*args, "--name", "zkstore warm driver", "pyspark-shell"], cwd=cwd
        )
        read_end, write_end = os.pipe()  # its standard input: it exits when this ends
        output = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        try:
            process = subprocess.Popen(
                [fit(warm_driver_title(warm_id)), *command[1:]],
                executable=command[0],
                stdin=read_end,
                stdout=output,
                stderr=output,
                cwd=cwd,
                env=env,
                start_new_session=True,
                user=user.uid if user is not None else None,
                group=user.gid if user is not None else None,
                extra_groups=list(user.groups) if user is not None else None,
                # what job code runs gains no privilege; the hook calls one C function only
                preexec_fn=secrecy.no_new_privileges_hook(),  # noqa: PLW1509
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
            os.close(output)
        record = replace(record, pid=process.pid, start_ticks=start_ticks(process.pid))
        jvm = WarmJvm(record, process, write_end, user)
        with contextlib.suppress(OSError):
            records.write(record)
        if user is not None and self.setup.users is not None:
            self.setup.users.started(user, jvm.identity)
        return jvm

    def _environment(self, warm_id: str, user: DriverUser | None) -> dict[str, str]:
        """A driver's environment, as its own JVM would get it from pyspark and spark-submit,
        with the archive and the JVM's scratch in its options (before the environment's own:
        an operator's option wins) and where to write its gateway's port and secret."""
        base = self.setup.environment(user)
        env = {**base, **self.class_data.environment(base)}
        archive = env.pop(ARCHIVE_ENV, None)
        env.pop(PROPERTIES_ENV, None)
        options = [quote_option(f"-Djava.io.tmpdir={self.records.scratch(warm_id)}")]
        if archive is not None:
            options.append(quote_option(f"-XX:SharedArchiveFile={archive}"))
        options.append(base.get("SPARK_SUBMIT_OPTS", ""))
        env["SPARK_SUBMIT_OPTS"] = " ".join(o for o in options if o)
        env["_PYSPARK_DRIVER_CONN_INFO_PATH"] = str(self.records.conn(warm_id) / "info")
        env["SPARK_CONNECT_MODE"] = "0"  # as pyspark's launch_gateway sets it
        env["PYTHONHASHSEED"] = "0"  # as spark-submit sets it (the Python workers inherit it)
        env.update(loopback_ui(env, self.setup.spark_master))  # its UI on loopback only
        return env

    def _wait_for_gateway(self, jvm: WarmJvm) -> tuple[int, str]:
        """The port and secret the JVM writes as its gateway comes up; the file is removed."""
        conn = self.records.conn(jvm.record.warm_id)
        info = conn / "info"
        deadline = time.monotonic() + JVM_START_TIMEOUT
        while not info.exists():
            if jvm.process.poll() is not None:
                raise WarmUpFailed(
                    f"its JVM exited with code {jvm.process.returncode} before its gateway was "
                    f"up (its log: {jvm.record.log})"
                )
            if time.monotonic() > deadline:
                raise WarmUpFailed(f"its gateway was not up within {JVM_START_TIMEOUT:g} s")
            if self._stop.wait(0.05):
                raise WarmUpFailed("the daemon is stopping")
        try:
            fd = os.open(info, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                data = f.read(4096)
        finally:
            shutil.rmtree(conn, ignore_errors=True)
        return parse_connection_info(data)

    def _warm_up(self, jvm: WarmJvm) -> float:
        """Run :mod:`.warmup` against the JVM (forked by the fork server, else a new process),
        as its user; returns the seconds it took."""
        warm_id = jvm.record.warm_id
        config = json.dumps({"port": jvm.port, "secret": jvm.secret})
        env = self.setup.environment(jvm.user)
        cwd, log = str(self.records.cwd(warm_id)), jvm.record.log
        began = time.monotonic()
        child: ForkedProcess | subprocess.Popen[bytes] | None = None
        if self.setup.fork_server is not None:
            argv = ["--config-fd", "{config_fd}", "--warm-id", warm_id]
            argv += ["--passes", str(self.setup.passes)]
            with contextlib.suppress(OSError):
                child = self.setup.fork_server.fork(
                    argv, env, cwd, log, config, kind="warm-up", user=jvm.user
                )
        if child is None:
            child = spawn_with_config(
                lambda fd: [
                    *(self.setup.python, "-P", "-m", "recovery.member.warm_jvms.warmup"),
                    *("--config-fd", str(fd), "--warm-id", warm_id),
                    *("--passes", str(self.setup.passes)),
                ],
                config,
                log=Path(log),
                env=env,
                cwd=cwd,
                user=jvm.user,
                no_new_privileges=True,
            )
        deadline = began + WARM_UP_TIMEOUT
        assert child is not None
        while child.poll() is None:
            if time.monotonic() > deadline or self._stop.wait(0.1):
                child.kill()
                child.wait()
                raise WarmUpFailed(f"its warm-up did not end within {WARM_UP_TIMEOUT:g} s")
        if child.poll() != 0:
            raise WarmUpFailed(f"its warm-up failed (exit {child.poll()}; its log: {log})")
        return time.monotonic() - began

    # -- the loop thread's side -------------------------------------------------------------

    def take(self, job_id: str, attempt: int, work_dir: Path, log_path: Path) -> Taken | None:
        """A ready JVM for the attempt about to be launched (None if none is ready): its
        directory becomes ``work_dir``, its log ``log_path``; the pool starts the next later."""
        jvm = self._pop_ready()
        if jvm is None:
            return None
        try:
            self._hand_over_files(jvm, work_dir, log_path)
        except OSError as exc:
            logger.warning("warm driver %s not handed over: %s", jvm.record.warm_id, exc)
            self._end(jvm)
            return None
        return self._handed_to(jvm, job_id, attempt, log_path)

    def take_at_first_use(
        self, job_id: str, attempt: int, work_dir: Path
    ) -> tuple[Taken, int] | str:
        """A ready JVM for the attempt whose driver asks for one as its job first asks for
        Spark (:mod:`.asks`), or why none: the JVM's directory and the attempt's are exchanged
        (the JVM's current directory is the attempt's path from now on; the driver moves in what
        it made there before), the JVM's log stays its own (truncated: its driver copies what
        comes into the attempt's log, through the read descriptor returned with it)."""
        jvm = self._pop_ready()
        if jvm is None:
            return "no warm driver was ready when the job first asked for Spark"
        warm_id = jvm.record.warm_id
        log_fd = -1
        try:
            log = jvm.record.log
            fd = os.open(log, os.O_WRONLY | os.O_NOFOLLOW)
            try:
                os.ftruncate(fd, 0)  # the warm-up's lines; the JVM appends
            finally:
                os.close(fd)
            log_fd = os.open(log, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            exchange(self.records.cwd(warm_id), work_dir)  # last: nothing after it fails
        except OSError as exc:
            logger.warning("warm driver %s not handed over: %s", warm_id, exc)
            if log_fd >= 0:
                os.close(log_fd)
            self._end(jvm)
            return f"warm driver {warm_id} could not be handed over ({exc})"
        return self._handed_to(jvm, job_id, attempt, Path(jvm.record.log)), log_fd

    def _pop_ready(self) -> WarmJvm | None:
        """The first ready JVM still alive, taken out of the pool (which starts the next
        :data:`REPLACE_AFTER` seconds later)."""
        with self._changed:
            jvm = None
            while self._ready and jvm is None:
                candidate = self._ready.pop(0)
                if candidate.process.poll() is None:
                    jvm = candidate
                else:
                    self._ready.append(candidate)  # the pool's thread says why, and ends it
                    break
            if jvm is not None:
                self._start_after = time.monotonic() + REPLACE_AFTER
            self._changed.notify_all()
        if jvm is not None:
            self.changed()
        return jvm

    def _handed_to(self, jvm: WarmJvm, job_id: str, attempt: int, log_path: Path) -> Taken:
        """Record that the attempt took ``jvm``; what its driver is given of it."""
        jvm.record = jvm.record.taken_by(job_id, attempt, log_path)
        with contextlib.suppress(OSError):
            self.records.write(jvm.record)
        with self._lock:
            self._handed[jvm.record.warm_id] = jvm
            self.taken += 1
        offer = WarmOffer(
            warm_id=jvm.record.warm_id,
            pid=jvm.process.pid,
            start_ticks=jvm.record.start_ticks,
            port=jvm.port,
            secret=jvm.secret,
            defaults=self.defaults(),
            warmed=jvm.warmed,
        )
        return Taken(offer, jvm.stdin, jvm.user)

    def _hand_over_files(self, jvm: WarmJvm, work_dir: Path, log_path: Path) -> None:
        """The JVM's directory renamed to the attempt's (and Spark's scratch made beside it for
        a driver of another user, as for any attempt); its log renamed to the attempt's, and
        emptied of the warm-up's lines (the JVM appends: its next line starts the file)."""
        attemptdir.remove(work_dir, self.setup.owners)  # left by a dead driver of the attempt
        os.rename(self.records.cwd(jvm.record.warm_id), work_dir)
        if jvm.user is not None:
            scratch = attemptdir.scratch(work_dir)
            with contextlib.suppress(FileExistsError):
                scratch.mkdir(mode=0o700)
            attemptdir.give(scratch, (jvm.user.uid, jvm.user.gid))
        log_path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(jvm.record.log, log_path)
        fd = os.open(log_path, os.O_WRONLY | os.O_NOFOLLOW)
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)

    def declines(self, run: RunSpec | None) -> str | None:
        """Why an attempt of a job whose handle keeps its run options as ``run`` should not
        take a warm JVM (its driver would let it go and start its own), or None: a hint, its
        driver decides (:func:`~recovery.shared.jvm_settings.run_reason`)."""
        return run_reason(run, self.defaults())

    def defaults(self) -> dict[str, str]:
        """The JVM-level settings the warm JVMs were started with: the deployment's."""
        plan = self.class_data.conf_plan
        path = plan.properties if plan is not None else None
        if path is None and plan is not None:
            candidate = plan.deployment / "spark-defaults.conf"
            path = candidate if candidate.is_file() else None
        if path is None:
            return {}
        try:
            found = parse_properties(path.read_text(errors="replace"))
        except OSError:
            return {}
        return {k: v for k, v in found.items() if k in JVM_LEVEL}

    def handed(self, warm_id: str) -> None:
        """The attempt's driver holds the JVM's standard input now: let ours go."""
        with self._lock:
            jvm = self._handed.get(warm_id)
        if jvm is not None:
            jvm.close_stdin()

    def discard(self, warm_id: str) -> None:
        """The attempt that took ``warm_id`` is over (or its driver could not start): end the
        JVM and remove what it left."""
        with self._lock:
            jvm = self._handed.pop(warm_id, None)
        if jvm is not None:
            self._end(jvm)

    def attempt_over(self, job_id: str, attempt: int) -> None:
        """The attempt's driver is gone: end the JVM it took, in this life or an earlier one."""
        with self._lock:
            mine = [
                w
                for w, j in self._handed.items()
                if (j.record.job_id, j.record.attempt) == (job_id, attempt)
            ]
            earlier = [
                r for r in self._earlier.values() if (r.job_id, r.attempt) == (job_id, attempt)
            ]
        for warm_id in mine:
            self.discard(warm_id)
        for record in earlier:
            with self._lock:
                self._earlier.pop(record.warm_id, None)
            self._end_earlier(record)

    def _end(self, jvm: WarmJvm) -> None:
        """Kill the JVM (our child: reaped), remove its files, free its user."""
        jvm.close_stdin()
        if jvm.process.poll() is None:
            jvm.process.kill()
        jvm.process.wait()
        self.records.remove(jvm.record, self.setup.owners)

    def _end_earlier(self, record: WarmRecord) -> None:
        """Kill a JVM of the daemon's earlier life if it still runs (identified by pid and
        start time, through a pidfd), then remove its files."""
        identity = record.identity
        if identity is not None:
            process = Adopted.open(identity)
            if process is not None:
                process.kill()
                process.wait()
                process.close()
        elif in_directory(self.records.cwd(record.warm_id)):
            return  # started as its daemon died: it ends with that daemon's pipe; next start
        self.records.remove(record, self.setup.owners)

    def _sweep(self) -> None:
        """At the start: the records of the daemon's earlier life. One not taken is ended
        (it should have died with that daemon's pipe); one taken whose JVM is alive waits for
        its attempt to be over; the rest are removed."""
        for warm_id in self.records.listed():
            record = self.records.read(warm_id)
            if record is None:
                continue
            alive = record.identity is not None and probe(record.identity) is Liveness.ALIVE
            if record.taken and alive:
                with self._lock:
                    self._earlier[warm_id] = record
                continue
            self._end_earlier(record)
            logger.info("warm driver %s of this daemon's earlier life: ended", warm_id)

    def close(self) -> None:
        """The daemon stops: end the JVMs nobody took (gently: their standard input ends; the
        ones still there after :data:`STOP_GRACE` are killed). Taken ones are their drivers'."""
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=STOP_GRACE)
        with self._lock:
            ready, self._ready = self._ready, []
            starting = self._starting
        left = [*ready, *([starting] if starting is not None else [])]
        for jvm in left:
            jvm.close_stdin()
        deadline = time.monotonic() + STOP_GRACE
        for jvm in left:
            with contextlib.suppress(subprocess.TimeoutExpired):
                jvm.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            self._end(jvm)
        if left:
            logger.info("%d warm driver(s) ended", len(left))

    @property
    def ready(self) -> int:
        with self._lock:
            return len(self._ready)


def parse_connection_info(data: bytes) -> tuple[int, str]:
    """What pyspark's gateway writes for the process that started it: its port (a 4-byte
    big-endian int), then its secret (a 4-byte length and that many bytes of UTF-8). Raises
    WarmUpFailed if it is not that."""
    try:
        port, length = struct.unpack(">ii", data[:8])
        secret = data[8 : 8 + length].decode()
    except (struct.error, UnicodeDecodeError) as exc:
        raise WarmUpFailed(f"unreadable gateway connection info: {exc}") from exc
    if not 0 < port < 65536 or len(secret) != length or not secret:
        raise WarmUpFailed("unreadable gateway connection info")
    return port, secret


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def exchange(first: Path, second: Path) -> None:
    """Swap two directories of one file system atomically (``renameat2`` with
    ``RENAME_EXCHANGE``: each path names the other's directory after it); raises OSError."""
    libc = ctypes.CDLL(None, use_errno=True)
    done = libc.renameat2(
        _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE
    )
    if done != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"cannot exchange {first} and {second}: {os.strerror(error)}")
