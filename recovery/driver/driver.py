"""The driver of one attempt of one job (``python -m recovery.driver.driver --job-id J ...``).

It runs in its own OS process and its own ZooKeeper session, so it outlives a daemon crash:

1. take the EPHEMERAL ``running`` node, in one transaction with a check of the status version
   the leader wrote for this attempt (refuse if another driver holds it or a newer attempt was
   assigned);
2. load and verify the definition (a broken one is reported as BROKEN, for quarantine);
3. lay out the job's shipped files in the attempt's working directory (its current directory,
   see :mod:`recovery.driver.workdir`), take the job's control values and acknowledge them (a paused
   job waits here, see :mod:`recovery.driver.job_control`), then run the script as ``__main__``, or
   load and call ``FUNCTION(ctx, *args)``; once a SparkContext is up, publish its application id and
   UI address in the EPHEMERAL ``spark`` record (fenced on the attempt);
4. report the outcome and release ``running`` in one transaction, fenced on the attempt, and
   remove the working directory.

A cancel request interrupts the job (and its Spark jobs); after a grace period the driver reports
CANCELLED and exits regardless. When its session lease runs out (:mod:`recovery.driver.lease`: no
answer from ZooKeeper for the session timeout less a margin, counted from the last answered
heartbeat), or its session expired, the driver kills its Spark JVM and exits without an outcome:
by the time the session could expire and another attempt start, this one has stopped. That stop
comes from a thread of its own, which only reads the clock: no write that waits for ZooKeeper can
hold it back.

Why its name repeats its package's: ``python -m recovery.driver.driver`` is the command line
that every daemon spawns a driver with, a daemon of the previous release too; during a rolling
upgrade that daemon runs on while the new package is installed under it, and a renamed module
would fail each driver it starts until it is restarted.

Why one module: steps 1-4 are one sequence with one exit path (every way out reports or
withholds the outcome and releases ``running`` the same way), and their order is the design.
What stands alone already lives apart: the lease, the heartbeat, the working directory, the
control values, the Spark application's record, the resources.
"""

from __future__ import annotations

import _thread
import argparse
import builtins
import contextlib
import functools
import logging
import os
import shlex
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from recovery.driver import sparkapp, workdir
from recovery.driver.artifact_registry import JobArtifacts
from recovery.driver.context import (
    AttemptSuperseded,
    JobCancelled,
    JobContext,
)
from recovery.driver.heartbeat import HeartbeatGate
from recovery.driver.job_control import JobControl
from recovery.driver.lease import SessionLease
from recovery.driver.output_staging import JobOutputs
from recovery.driver.warm_jvm import SparkJvm
from recovery.proctitle import driver_title, set_title
from recovery.settings import spark_master_from_env
from recovery.shared import processes
from recovery.shared.jvm_settings import WarmAsk, WarmOffer
from recovery.shared.sparkconf import spark_submit_args
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import (
    ConfigError,
    CorruptHandle,
    CorruptRecord,
    FenceLost,
    HandleExists,
    HandleNotFound,
    OutcomeUnknown,
    PayloadError,
    StoreUnavailable,
    VersionConflict,
    ZkStoreError,
)
from zkstore.jobs.definition import SCRIPT, JobDefinition
from zkstore.jobs.resources import ResourceReports
from zkstore.jobs.stops import Heartbeat
from zkstore.lifecycle.attempt_limits import least_heartbeat_interval
from zkstore.lifecycle.lifecycle_ops import heartbeat_ops
from zkstore.records.job_records import Outcome, RunningInfo
from zkstore.records.job_states import BROKEN, CANCELLED, FAILED, SUCCEEDED, DriverExit
from zkstore.records.record import read_record, short_error
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.ops import Check, Create, Deadline, Delete, Fence, SetData
from zkstore.zookeeper.retry import RACES, WHILE_STANDING, TryAgain
from zkstore.zookeeper.watch import NodeWatch, WatchedValue

__all__ = ["EXIT_CODES", "LOG_LEVELS", "WATCH", "Driver", "main", "set_up_logging", "warm"]

logger = logging.getLogger("recovery.driver.driver")

#: How often the attempt looks whether its lease ended (a clock read).
WATCH = 0.1

EXIT_CODES: dict[str, DriverExit] = {
    SUCCEEDED: DriverExit.SUCCEEDED,
    FAILED: DriverExit.FAILED,
    CANCELLED: DriverExit.CANCELLED,
    BROKEN: DriverExit.BROKEN,
}


class Driver:
    """One attempt. :meth:`run` returns the process exit code."""

    def __init__(
        self,
        config: StoreConfig,
        *,
        job_id: str,
        attempt: int,
        status_version: int,
        spark_master: str,
        cancel_grace: float = 30.0,
        work_dir: Path | None = None,
        log: str | None = None,
        on_step: Callable[[str], None] | None = None,
        spark_jvm: SparkJvm | None = None,
    ) -> None:
        self.config = config
        #: the attempt's Spark JVM: a warm one its daemon handed over, or its own
        self.spark_jvm = spark_jvm or SparkJvm(None, None)
        self.job_id = job_id
        self.attempt = attempt
        self.status_version = status_version
        self.spark_master = spark_master
        self.cancel_grace = cancel_grace
        self.cluster = Cluster(config, on_step=on_step)  # on_step: crash points, for tests
        self.lease: SessionLease | None = None
        layout = self.cluster.layout
        self.status_path = layout.status(job_id)
        self.running_path = layout.running(job_id)
        self.fence = Fence.check(
            self.status_path, status_version, description=f"attempt {attempt} superseded"
        ) + Fence.check(self.running_path, 0, description=f"attempt {attempt} lost its session")
        self.cancelled = threading.Event()
        self._suspended_at: float | None = None
        self._finished = threading.Event()
        self._interrupt_lock = threading.Lock()
        self._report_lock = threading.Lock()
        self._reported = False
        self._started: datetime | None = None  # when this attempt took ``running``
        #: when the transaction that took ``running`` was sent (monotonic): its answer is the
        #: lease's first, no heartbeat needed to start it
        self._took_running_at = 0.0
        #: whether an outcome write was tried (a try again looks whether the node is there)
        self._outcome_tried = False
        self._beats: HeartbeatGate | None = None  # ctx.heartbeat()'s gate (progress timeout)
        self._beat_version: int | None = None  # the heartbeat node's, once written
        self._job_name = job_id
        self.work_dir = work_dir or Path.cwd()
        self.log = log
        self.spark_app = sparkapp.SparkAppRecord(
            self.cluster.zk, layout.spark(job_id), attempt, self.fence, lambda: self.spark_jvm.how
        )
        self._job_context: JobContext | None = None
        self._control: JobControl | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def run(self) -> int:
        self.cluster.start(ensure_layout=False)  # its job's nodes exist, or it has no job
        took_running = False
        try:
            if not self._take_running():
                return DriverExit.REFUSED
            took_running = True
            self.lease = SessionLease(self.cluster.zk, self.running_path).start(
                answered=self._took_running_at
            )
            self.cluster.zk.add_listener(self._on_state)
            threading.Thread(target=self._watch_session, name="driver-lease", daemon=True).start()
            threading.Thread(target=self._monitor, name="driver-monitor", daemon=True).start()
            self._watch_cancel()
            outcome, error = self._run_job()
            self._conclude(outcome, error)
            return EXIT_CODES[outcome]
        finally:
            self._finished.set()
            self.spark_jvm.close()
            self.cluster.close()
            if took_running:  # else the directory may be the live driver's of this attempt
                workdir.remove(self.work_dir)

    def _conclude(self, outcome: str, error: str | None) -> None:
        """Stop Spark and report the outcome. A cancel interrupt sent just as the job ended can
        still arrive here (even inside a lock acquire): it must not lose the outcome. (The
        monitor interrupts at most once, never after ``_finished``: a second try always ends.)"""

        def conclude_once() -> None:
            with self._interrupt_lock:
                self._finished.set()  # from here on the monitor interrupts nothing
            if self._job_context is not None:
                self._job_context.close()  # final resource counts, while still fenced
            if self._control is not None:
                self._control.stop()  # its last acknowledgement, while still fenced
            sparkapp.stop(kill=False)
            self._report(outcome, error)

        RACES.call(
            conclude_once,
            what=f"concluding attempt {self.attempt}",
            retry_on=(KeyboardInterrupt,),
            error=ZkStoreError,
        )

    def _take_running(self) -> bool:
        me = processes.this_process()
        self._started = utc_moment()
        info = RunningInfo(
            version=None,
            attempt=self.attempt,
            host=me.host,
            pid=me.pid,
            started=self._started,
            log=self.log,
            start_ticks=me.start_ticks,
            boot_id=me.boot_id,
        )
        # The definition's lock is taken with the node: its payload stays while the driver
        # reads it, and one write to ZooKeeper's log instead of two.
        handles = self.cluster.jobs.handles
        lock = handles.lock_op(self.job_id)
        self._took_running_at = time.monotonic()
        try:
            self.cluster.zk.commit(
                [
                    Check(self.status_path, self.status_version),
                    Create(self.running_path, info.to_bytes(), ephemeral=True),
                    lock,
                ]
            )
        except HandleExists:
            logger.error(
                "another driver of %s holds its running node: refusing to start", self.job_id
            )
            return False
        except HandleNotFound as exc:
            if exc.path == lock.path:
                logger.error("the definition of %s is gone: refusing to start", self.job_id)
            else:
                logger.error(
                    "attempt %d of %s was superseded before it started", self.attempt, self.job_id
                )
            return False
        except VersionConflict:
            logger.error(
                "attempt %d of %s was superseded before it started", self.attempt, self.job_id
            )
            return False
        handles.taken(self.job_id)
        logger.info(
            "attempt %d of %s: running node taken (pid %d)", self.attempt, self.job_id, os.getpid()
        )
        return True

    # -- running the job -----------------------------------------------------------------------

    def _run_job(self) -> tuple[str, str | None]:
        try:
            definition, files, call = self._prepare()
        except _CannotRun as exc:
            return exc.outcome, exc.error
        context = self._context(definition, files.spark_conf)
        master = files.spark_conf.get("spark.master", self.spark_master)
        script_args = None
        if call is None:  # a script: its SparkSession gets what spark-submit would give it
            options = spark_submit_args(master, files.spark_conf, context.app_name)
            script_args = shlex.join([*self.spark_jvm.submit_args(), *options, "pyspark-shell"])
        self.spark_jvm.prepare(files.spark_conf, master, script_args)
        logger.info(
            "attempt %d of %s (%s): running %s in %s",
            self.attempt,
            self.job_id,
            definition.name,
            definition.entry_point,
            self.work_dir,
        )
        try:
            context.pause_point()  # a paused job stays paused across a restart of its driver
            if call is None:
                self._run_script(definition, context, files)
            else:
                function, args = call
                function(context, *args)
        except BaseException as exc:  # noqa: BLE001 - the job's own failure, reported as its outcome
            return self._outcome_of(exc)
        return SUCCEEDED, None

    def _outcome_of(self, exc: BaseException) -> tuple[str, str | None]:
        """How the attempt ended, from what its job raised (called in the ``except`` block)."""
        cancelled = self.cancelled.is_set()
        if isinstance(exc, SystemExit):
            if exc.code in (0, None):
                return SUCCEEDED, None
            return (
                (CANCELLED, "cancelled") if cancelled else (FAILED, f"exited with code {exc.code}")
            )
        if isinstance(exc, JobCancelled | KeyboardInterrupt):
            return (CANCELLED, "cancelled") if cancelled else (FAILED, "interrupted")
        if isinstance(exc, AttemptSuperseded):
            return FAILED, str(exc)
        if cancelled:
            return CANCELLED, f"cancelled ({type(exc).__name__})"
        logger.error("job %s failed:\n%s", self.job_id, traceback.format_exc())
        if isinstance(exc, CorruptHandle | CorruptRecord | PayloadError):
            # The job's own stored state (a checkpoint, say) is broken and the job let it
            # escape: every next attempt would meet it again. Quarantine material.
            return BROKEN, f"its stored state is broken: {type(exc).__name__}: {exc}"
        return FAILED, _summarize(exc)

    def _prepare(
        self,
    ) -> tuple[JobDefinition, workdir.AttemptDirectory, tuple[Any, tuple[Any, ...]] | None]:
        """Load the verified definition, lay out its files, load a function job's code.

        Raises :class:`_CannotRun` with BROKEN (quarantine material: the definition cannot be
        loaded here) or FAILED (worth another attempt: storage or disk trouble).
        """
        try:
            definition = self.cluster.jobs.recover(self.job_id, lock=False).state  # held
        except (PayloadError, CorruptHandle) as exc:
            self.cluster.jobs.handles.release(self.job_id)
            raise _CannotRun(
                BROKEN, f"cannot load the definition: {type(exc).__name__}: {exc}"
            ) from exc
        except ZkStoreError as exc:
            self.cluster.jobs.handles.release(self.job_id)
            raise _CannotRun(
                FAILED, f"cannot read the definition: {type(exc).__name__}: {exc}"
            ) from exc
        self._job_name = definition.name
        try:
            files = workdir.lay_out(definition, self.work_dir)
        except OSError as exc:
            raise _CannotRun(
                FAILED, f"cannot write the job's files in {self.work_dir}: {exc}"
            ) from exc
        files.activate()
        try:
            call = None if definition.kind == SCRIPT else definition.load_function()
        except PayloadError as exc:
            raise _CannotRun(BROKEN, f"{type(exc).__name__}: {exc}") from exc
        return definition, files, call

    def _context(self, definition: JobDefinition, spark_conf: dict[str, str]) -> JobContext:
        checkpoints = self.cluster.checkpoints(self.job_id)
        lease = self.lease
        self._control = JobControl(
            self.cluster.control(self.job_id),
            checkpoints,
            attempt=self.attempt,
            fence=self.fence,
            cancelled=self.cancelled,
        ).start(give_up=lambda: lease is None or lease.remaining() <= 0)
        artifacts = JobArtifacts(
            self.cluster.artifacts(self.job_id),
            attempt=self.attempt,
            fence=self.fence,
            cancelled=self.cancelled,
        )
        self._job_context = JobContext(
            job_id=self.job_id,
            name=definition.name,
            attempt=self.attempt,
            spark_master=self.spark_master,
            spark_conf=spark_conf,
            checkpoints=checkpoints,
            fence=self.fence,
            config=self._control.config,
            cancelled=self.cancelled,
            lease=self.lease,
            resource_reports=ResourceReports(self.cluster.zk, self.cluster.layout, self.job_id),
            control=self._control,
            heartbeat=self._heartbeat_gate(definition),
            artifacts=artifacts,
            outputs=JobOutputs(
                self.cluster.outputs(self.job_id),
                artifacts,
                attempt=self.attempt,
                fence=self.fence,
                spark=lambda: context.spark,
            ),
        )
        context = self._job_context
        return context

    def _run_script(
        self, definition: JobDefinition, context: JobContext, files: workdir.AttemptDirectory
    ) -> None:
        """Run an unmodified script as ``__main__`` from the attempt's directory: its
        SparkSession gets our master, the job's conf and its shipped files, as spark-submit
        would give them (``PYSPARK_SUBMIT_ARGS``, set by :meth:`SparkJvm.prepare`)."""
        assert definition.source is not None and files.script is not None
        filename = str(files.script)
        sys.argv = [filename, *map(str, definition.args)]
        code = compile(definition.source, filename, "exec")
        exec(code, {"__name__": "__main__", "__file__": filename, "__builtins__": builtins})

    # -- cancel and suspension -----------------------------------------------------------------

    def _watch_cancel(self) -> None:
        def on_cancel(data: WatchedValue) -> None:
            if data is not None and not self.cancelled.is_set():
                logger.warning("cancel requested for %s: stopping", self.job_id)
                self.cancelled.set()

        NodeWatch(self.cluster.zk, self.cluster.layout.cancel(self.job_id), on_cancel)

    def _on_state(self, state: str) -> None:
        """Kazoo listener (I/O thread): only records the time; the monitor thread acts."""
        if state == "CONNECTED":
            self._suspended_at = None
        elif state == "SUSPENDED":
            self._suspended_at = time.monotonic()
        else:  # LOST: the session expired, ``running`` is gone, another attempt may start
            self._suspended_at = float("-inf")

    def _watch_session(self) -> None:
        """Stop the attempt as soon as its lease ends or its session expired, from a thread that
        does nothing else: the monitor's writes (a heartbeat, the Spark application's record)
        wait for their deadline when ZooKeeper does not answer, and a stop behind them came
        after the lease, even after the session could expire."""
        lease = self.lease
        assert lease is not None
        while True:
            if self._suspended_at == float("-inf"):
                self._stop_now("ZooKeeper session expired")
            left = lease.remaining()
            if left < 0:
                self._stop_now("no answer from ZooKeeper for too long: the session may expire")
            if self._finished.wait(min(WATCH, left)):
                return

    def _monitor(self) -> None:
        cancel_seen: float | None = None
        while not self._finished.wait(0.1):
            self._publish_spark_app()
            self._beat()
            if self._control is not None:
                self._control.sync_spark()
            if self.cancelled.is_set() and cancel_seen is None:
                cancel_seen = time.monotonic()
                sparkapp.cancel_jobs()
                with self._interrupt_lock:
                    if not self._finished.is_set():
                        interrupt_main_thread()
            if cancel_seen is not None and time.monotonic() - cancel_seen > self.cancel_grace:
                logger.error(
                    "job %s ignored the cancel for %g s: stopping it",
                    self.job_id,
                    self.cancel_grace,
                )
                sparkapp.stop(kill=True)
                self._report(CANCELLED, f"cancelled (forced after {self.cancel_grace:g} s)")
                os._exit(DriverExit.CANCELLED)

    def _heartbeat_gate(self, definition: JobDefinition) -> HeartbeatGate | None:
        """The gate of ``ctx.heartbeat()``: only for a job with a progress timeout."""
        value = (getattr(definition, "lifecycle", None) or {}).get("progress_timeout")
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            least = least_heartbeat_interval(self.config.lowered_minimums)
            self._beats = HeartbeatGate(float(value), least_interval=least)
        return self._beats

    def _beat(self) -> None:
        """Write the heartbeat node if the gate says it is due (monitor thread): fenced on
        this attempt, EPHEMERAL in its session. A failed write is tried at the next look."""
        gate = self._beats
        if gate is None:
            return
        now = time.monotonic()
        if not gate.due(now):
            return
        beats = gate.beats
        record = Heartbeat(version=None, attempt=self.attempt, at=utc_moment(), beats=beats)
        layout = self.cluster.layout
        try:
            self.cluster.zk.commit(
                heartbeat_ops(layout, self.job_id, record, existing=self._beat_version),
                fence=self.fence,
            )
        except FenceLost:
            return  # the monitor's other checks stop the attempt
        except ZkStoreError as exc:
            logger.debug("heartbeat not written (%s); read again", exc)
            with contextlib.suppress(ZkStoreError):
                stat = self.cluster.zk.exists(layout.heartbeat(self.job_id))
                self._beat_version = stat.version if stat is not None else None
            return
        self._beat_version = 0 if self._beat_version is None else self._beat_version + 1
        gate.written(now, beats)

    def _publish_spark_app(self) -> None:
        with self._report_lock:
            if not self._reported:
                self.spark_app.refresh()

    def _stop_now(self, why: str) -> None:
        logger.error("attempt %d of %s stops itself: %s", self.attempt, self.job_id, why)
        sparkapp.stop(kill=True)
        logging.shutdown()
        os._exit(DriverExit.SUSPENDED)

    # -- outcome -------------------------------------------------------------------------------

    def _report(self, outcome: str, error: str | None) -> None:
        """Record the outcome and release ``running`` in one transaction fenced on the attempt.

        Idempotent. Tried until it is recorded (:data:`~zkstore.zookeeper.retry.WHILE_STANDING`: an
        answer lost is settled by reading the outcome back, a write that did not land is sent
        again), for as long as the attempt's session lease lasts; it stops at once when the fence
        says another attempt owns the job. Either end that is not "recorded" is logged at ERROR.
        """
        with self._report_lock:
            if self._reported:
                return
            self.spark_app.withdraw()
            record = Outcome(
                version=None,
                attempt=self.attempt,
                outcome=outcome,
                finished=utc_moment(),
                error=short_error(error),
                host=socket.gethostname(),
                log=self.log,
                started=self._started,
                jvm=self.spark_jvm.had(),
            )
            try:
                WHILE_STANDING.call(
                    lambda: self._record_once(record),
                    what=f"outcome {outcome} of attempt {self.attempt} not recorded within the "
                    "attempt's session lease",
                    give_up=lambda: self._standing() <= 0,
                    error=OutcomeUnknown,
                )
            except FenceLost as exc:
                logger.error(
                    "outcome %s of attempt %d not recorded: the attempt no longer owns the job "
                    "(%s)",
                    outcome,
                    self.attempt,
                    exc,
                )
            except OutcomeUnknown as exc:  # the lease is over: the session may expire now
                logger.error("%s", exc)
            except ZkStoreError as exc:
                logger.error(
                    "outcome %s of attempt %d not recorded: %s", outcome, self.attempt, exc
                )
            else:
                logger.info("attempt %d of %s: %s", self.attempt, self.job_id, outcome)
            self._reported = True

    def _standing(self) -> float:
        """Seconds left of the attempt's session lease by time (0 without one). Not
        :meth:`SessionLease.remaining`: an earlier try that landed deleted ``running``, which
        loses the lease, and reading the outcome back is what tells. Writes are fenced: a
        session that expired meanwhile writes nothing."""
        return self.lease.time_left() if self.lease is not None else 0.0

    def _record_once(self, record: Outcome) -> None:
        """One try of :meth:`_report`, within what is left of the lease (the monitor, which
        would stop the driver when the lease ends, stopped watching when the job ended): write,
        and settle a lost answer or a refusal by reading the outcome back. Raises
        :class:`TryAgain` while it is not recorded, :class:`FenceLost` once another attempt
        owns the job."""
        deadline = Deadline(min(self.cluster.zk.timeout, max(self._standing(), 0.0)))
        try:
            self._write_outcome(record, deadline)
            return
        except (FenceLost, StoreUnavailable, HandleExists, HandleNotFound) as exc:
            refused: ZkStoreError = exc
        # An earlier try may have landed with its answer lost: then this one found ``running``
        # gone (the fence) or the outcome there already. Only the outcome itself tells.
        try:
            self.cluster.step("outcome:reading-back")
            path = self.cluster.layout.outcome(self.job_id)
            found = read_record(self.cluster.zk, Outcome, path, timeout=deadline.remaining())
        except StoreUnavailable as exc:
            raise TryAgain(f"{refused}; reading back: {exc}") from refused
        except CorruptRecord:
            found = None
        if found is not None and found.with_version(None) == record:
            return
        if isinstance(refused, FenceLost):
            raise refused
        raise TryAgain(str(refused)) from refused

    def _write_outcome(self, record: Outcome, deadline: Deadline) -> None:
        path = self.cluster.layout.outcome(self.job_id)
        data = record.to_bytes()
        # The first attempt's first try creates the job's first outcome without a look (a
        # refusal is read back and tried again, with one); a restart sets its predecessor's.
        exists = False
        if self.attempt > 1 or self._outcome_tried:
            exists = self.cluster.zk.exists(path, timeout=deadline.remaining()) is not None
        self._outcome_tried = True
        write = SetData(path, data) if exists else Create(path, data)
        self.cluster.step("outcome:writing")
        ops = [write, Delete(self.running_path)]
        self.cluster.zk.commit(ops, fence=self.fence, timeout=deadline.remaining())
        self.cluster.step("outcome:written")


class _CannotRun(Exception):
    """The attempt cannot start the job: how it ends and why (logged as it is raised)."""

    def __init__(self, outcome: str, error: str) -> None:
        super().__init__(error)
        self.outcome, self.error = outcome, error
        logger.error("attempt cannot run the job: %s", error)


def interrupt_main_thread() -> None:
    """Raise KeyboardInterrupt in the main thread, even while it blocks in a wait.

    ``_thread.interrupt_main`` only marks the interrupt as pending: a job blocked in a lock, an
    ``Event.wait()`` or a ``Queue.get()`` without a timeout does not see it until the wait ends
    (so a cancel took the whole grace, and the outcome came before the job's leftovers were
    ended). A real SIGINT to the main thread ends the wait (EINTR) and runs Python's handler at
    once. A job that set SIGINT to SIG_DFL or SIG_IGN would be killed or ignore it, so then
    only the simulated one is sent: the grace ends such a job.
    """
    if callable(signal.getsignal(signal.SIGINT)):
        main = threading.main_thread().ident
        assert main is not None
        signal.pthread_kill(main, signal.SIGINT)
    else:
        _thread.interrupt_main()


def _summarize(exc: BaseException) -> str:
    """The job's traceback, from its own code on (the driver's frames say nothing to users)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb)
    return "".join(lines[-12:]).strip()


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The driver's arguments (built once: the fork server builds it before it forks, so that
    a forked driver only parses; argparse's setup is a tenth of a no-op driver's own CPU)."""
    parser = argparse.ArgumentParser(prog="python -m recovery.driver.driver", description=__doc__)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--status-version", type=int, required=True)
    parser.add_argument("--cancel-grace", type=float, default=30.0)
    parser.add_argument(
        "--config-fd",
        type=int,
        required=True,
        help="file descriptor to read the store configuration from (drivers are started by the "
        "daemon, which passes it through a pipe)",
    )
    parser.add_argument(
        "--work-dir", type=Path, help="the attempt's own directory, removed at the end"
    )
    parser.add_argument("--log-uri", help="where this driver's output goes, for people")
    parser.add_argument(
        "--warm-fd",
        type=int,
        help="file descriptor holding the standard input of the warm Spark JVM this attempt "
        "took (its gateway comes on the configuration pipe's second line; the third says why "
        "the daemon handed none over, when its job's summary said it could not use one)",
    )
    return parser


#: The driver's log levels: its own and zkstore's at INFO, kazoo's at WARNING.
LOG_LEVELS = {"": logging.INFO, "kazoo": logging.WARNING}


def warm() -> None:
    """What a fork server does once before it forks drivers (:mod:`recovery.member.forkserver`):
    the parser built and used once, so that the patterns argparse compiles at its first parse
    are in ``re``'s cache of every driver forked after; the log levels set (no handler: a
    driver adds its own), so that a driver's start sets none (each clears every logger's
    cache)."""
    _parser().parse_args(
        ["--job-id", "j", "--attempt", "1", "--status-version", "0", "--config-fd", "0"]
    )
    for name, level in LOG_LEVELS.items():
        logging.getLogger(name).setLevel(level)


def set_up_logging() -> None:
    """The driver's log (its standard error: the attempt's log) at :data:`LOG_LEVELS`. Each
    ``setLevel`` clears the cache of every logger the process has (hundreds, with pyspark and
    py4j imported): a forked driver finds the levels set by its fork server (:func:`warm`) and
    sets none."""
    logging.basicConfig(
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s", stream=sys.stderr
    )
    for name, level in LOG_LEVELS.items():
        if logging.getLogger(name).level != level:
            logging.getLogger(name).setLevel(level)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    set_title(driver_title(args.job_id, args.attempt))  # a spawned driver too (issue 27)
    set_up_logging()
    try:
        text, _, rest = _read_config(args.config_fd).partition("\n")
        warm, _, declined = rest.partition("\n")
        config = StoreConfig.from_json(text)
    except (OSError, UnicodeDecodeError) as exc:
        parser.error(f"cannot read the configuration from fd {args.config_fd}: {exc}")
    except ConfigError as exc:
        parser.error(str(exc))
    offer, ask = _warm_offer(warm)
    work_dir = _enter(args.work_dir)
    spark_jvm = SparkJvm(
        offer, args.warm_fd, declined=declined.strip() or None, ask=ask, work_dir=work_dir
    )
    driver = Driver(
        config,
        job_id=args.job_id,
        attempt=args.attempt,
        status_version=args.status_version,
        spark_master=spark_master_from_env(None),
        cancel_grace=args.cancel_grace,
        work_dir=work_dir,
        log=args.log_uri,
        spark_jvm=spark_jvm,
    )
    return driver.run()


def _warm_offer(text: str) -> tuple[WarmOffer | None, WarmAsk | None]:
    """The configuration pipe's second line: the warm JVM the daemon handed over at launch, or
    the hint that the driver may ask for one at its job's first use of Spark, or neither."""
    if not text.strip():
        return None, None
    try:
        ask = WarmAsk.from_json(text)
        return (WarmOffer.from_json(text) if ask is None else None), ask
    except ValueError as exc:  # nothing a daemon writes: no warm JVM, the attempt starts cold
        logger.warning("the warm driver handed over is unreadable (%s): starting cold", exc)
        return None, None


def _read_config(fd: int) -> str:
    """Read the configuration the daemon wrote into the pipe, and close it: nothing that starts
    later (the Spark JVM, the Python workers running job code) can read it again."""
    with os.fdopen(fd, "rb") as pipe:
        return pipe.read(1 << 20).decode()


def _enter(work_dir: Path | None) -> Path:
    """Make the attempt's directory (a fresh temporary one if none is given) the current one,
    and the place of Spark's temporary files."""
    directory = work_dir or Path(tempfile.mkdtemp(prefix="zkstore-attempt-"))
    directory.mkdir(parents=True, exist_ok=True)
    os.chdir(directory)
    directory = directory.resolve()
    workdir.keep_spark_scratch(directory)  # Spark's temporary files go with the attempt
    return directory


if __name__ == "__main__":
    sys.exit(main())
