"""The driver of one attempt of one job: ``python -m recovery.driver --job-id J --attempt N ...``.

It runs in its own OS process and its own ZooKeeper session, so it outlives a daemon crash:

1. take the EPHEMERAL ``running`` node, in one transaction with a check of the status version
   the leader wrote for this attempt (refuse if another driver holds it or a newer attempt was
   assigned);
2. load and verify the definition (a broken one is reported as BROKEN, for quarantine);
3. run the script as ``__main__``, or call ``FUNCTION(ctx, *args)``;
4. report the outcome and release ``running`` in one transaction, fenced on the attempt.

A cancel request interrupts the job (and its Spark jobs); after a grace period the driver reports
CANCELLED and exits regardless. If the session is suspended past a safe bound the driver kills
its Spark JVM and exits without an outcome: by the time the session could expire and another
attempt start, this one has stopped.
"""

from __future__ import annotations

import _thread
import argparse
import builtins
import logging
import os
import shlex
import socket
import sys
import threading
import time
import traceback
from typing import Any

from recovery.context import (
    AttemptSuperseded,
    DynamicConfig,
    JobCancelled,
    JobContext,
    spark_conf_args,
)
from recovery.launcher import (
    DRIVER_CONFIG_ENV,
    EXIT_BROKEN,
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_REFUSED,
    EXIT_SUCCEEDED,
    EXIT_SUSPENDED,
)
from recovery.settings import spark_master_from_env
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import (
    ConfigError,
    CorruptHandle,
    HandleExists,
    HandleNotFound,
    OutcomeUnknown,
    PayloadError,
    VersionConflict,
    ZkStoreError,
)
from zkstore.handle import utc_now
from zkstore.jobs.definition import SCRIPT, JobDefinition
from zkstore.jobs.records import (
    BROKEN,
    CANCELLED,
    FAILED,
    SUCCEEDED,
    Outcome,
    RunningInfo,
    short_error,
)
from zkstore.jobs.resources import ResourceReports
from zkstore.ops import Check, Create, Delete, Fence, SetData

logger = logging.getLogger("recovery.driver")

EXIT_CODES = {
    SUCCEEDED: EXIT_SUCCEEDED,
    FAILED: EXIT_FAILED,
    CANCELLED: EXIT_CANCELLED,
    BROKEN: EXIT_BROKEN,
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
    ) -> None:
        self.config = config
        self.job_id = job_id
        self.attempt = attempt
        self.status_version = status_version
        self.spark_master = spark_master
        self.cancel_grace = cancel_grace
        self.suspend_bound = config.session_timeout / 4
        self.cluster = Cluster(config)
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
        self._job_name = job_id
        self._job_context: JobContext | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def run(self) -> int:
        self.cluster.start()
        try:
            if not self._take_running():
                return EXIT_REFUSED
            self.cluster.zk.add_listener(self._on_state)
            threading.Thread(target=self._monitor, name="driver-monitor", daemon=True).start()
            self._watch_cancel()
            outcome, error = self._run_job()
            self._conclude(outcome, error)
            return EXIT_CODES[outcome]
        finally:
            self._finished.set()
            self.cluster.close()

    def _conclude(self, outcome: str, error: str | None) -> None:
        """Stop Spark and report the outcome. A cancel interrupt sent just as the job ended can
        still arrive here (even inside a lock acquire): it must not lose the outcome."""
        for _ in range(3):
            try:
                with self._interrupt_lock:
                    self._finished.set()  # from here on the monitor interrupts nothing
                if self._job_context is not None:
                    self._job_context.close()  # final resource counts, while still fenced
                _stop_spark(kill=False)
                self._report(outcome, error)
                return
            except KeyboardInterrupt:
                logger.info("late interrupt while concluding; going on")

    def _take_running(self) -> bool:
        info = RunningInfo(
            version=None,
            attempt=self.attempt,
            host=socket.gethostname(),
            pid=os.getpid(),
            started=utc_now(),
        )
        try:
            self.cluster.zk.commit(
                [
                    Check(self.status_path, self.status_version),
                    Create(self.running_path, info.to_bytes(), ephemeral=True),
                ]
            )
        except HandleExists:
            logger.error(
                "another driver of %s holds its running node: refusing to start", self.job_id
            )
            return False
        except (VersionConflict, HandleNotFound):
            logger.error(
                "attempt %d of %s was superseded before it started", self.attempt, self.job_id
            )
            return False
        logger.info(
            "attempt %d of %s: running node taken (pid %d)", self.attempt, self.job_id, os.getpid()
        )
        return True

    # -- running the job -----------------------------------------------------------------------

    def _run_job(self) -> tuple[str, str | None]:
        try:
            definition = self.cluster.jobs.recover(self.job_id).state
        except (PayloadError, CorruptHandle) as exc:
            logger.error("cannot load the definition of %s: %s", self.job_id, exc)
            return BROKEN, f"{type(exc).__name__}: {exc}"
        except ZkStoreError as exc:
            logger.error("cannot read the definition of %s: %s", self.job_id, exc)
            return FAILED, f"{type(exc).__name__}: {exc}"
        self._job_name = definition.name
        context = self._context(definition)
        logger.info(
            "attempt %d of %s (%s): running %s",
            self.attempt,
            self.job_id,
            definition.name,
            definition.entry_point,
        )
        try:
            if definition.kind == SCRIPT:
                self._run_script(definition, context)
            else:
                assert definition.function is not None
                definition.function(context, *definition.args)
        except SystemExit as exc:
            if exc.code in (0, None):
                return SUCCEEDED, None
            if self.cancelled.is_set():
                return CANCELLED, "cancelled"
            return FAILED, f"exited with code {exc.code}"
        except (JobCancelled, KeyboardInterrupt):
            if self.cancelled.is_set():
                return CANCELLED, "cancelled"
            return FAILED, "interrupted"
        except AttemptSuperseded as exc:
            return FAILED, str(exc)
        except BaseException as exc:  # noqa: BLE001 - the job's own failure, reported as its outcome
            if self.cancelled.is_set():
                return CANCELLED, f"cancelled ({type(exc).__name__})"
            logger.error("job %s failed:\n%s", self.job_id, traceback.format_exc())
            return FAILED, _summarize(exc)
        return SUCCEEDED, None

    def _context(self, definition: JobDefinition) -> JobContext:
        checkpoints = self.cluster.checkpoints(self.job_id)
        config = DynamicConfig(lambda: self.cluster.state.control(self.job_id)[0])
        self.cluster.zk.kazoo.DataWatch(
            self.cluster.layout.control(self.job_id), lambda *_: config.invalidate()
        )
        self._job_context = JobContext(
            job_id=self.job_id,
            name=definition.name,
            attempt=self.attempt,
            spark_master=self.spark_master,
            spark_conf=definition.spark_conf,
            checkpoints=checkpoints,
            fence=self.fence,
            config=config,
            cancelled=self.cancelled,
            resource_reports=ResourceReports(self.cluster.zk, self.cluster.layout, self.job_id),
        )
        return self._job_context

    def _run_script(self, definition: JobDefinition, context: JobContext) -> None:
        """Run an unmodified script as ``__main__``: its SparkSession gets our master and conf."""
        assert definition.source is not None
        filename = definition.filename or f"{self.job_id}.py"
        master = definition.spark_conf.get("spark.master", self.spark_master)
        submit_args = spark_conf_args(master, definition.spark_conf, context.app_name)
        os.environ["PYSPARK_SUBMIT_ARGS"] = shlex.join([*submit_args, "pyspark-shell"])
        script_dir = os.path.dirname(os.path.abspath(filename))
        if os.path.isdir(script_dir) and script_dir not in sys.path:
            sys.path.insert(0, script_dir)
        sys.argv = [filename, *map(str, definition.args)]
        code = compile(definition.source, filename, "exec")
        exec(code, {"__name__": "__main__", "__file__": filename, "__builtins__": builtins})

    # -- cancel and suspension -----------------------------------------------------------------

    def _watch_cancel(self) -> None:
        def on_cancel(data: bytes | None, stat: Any) -> bool | None:
            if stat is not None and not self.cancelled.is_set():
                logger.warning("cancel requested for %s: stopping", self.job_id)
                self.cancelled.set()
            return False if self.cancelled.is_set() else None

        self.cluster.zk.kazoo.DataWatch(self.cluster.layout.cancel(self.job_id), on_cancel)

    def _on_state(self, state: str) -> None:
        """Kazoo listener (I/O thread): only records the time; the monitor thread acts."""
        if state == "CONNECTED":
            self._suspended_at = None
        elif state == "SUSPENDED":
            self._suspended_at = time.monotonic()
        else:  # LOST: the session expired, ``running`` is gone, another attempt may start
            self._suspended_at = float("-inf")

    def _monitor(self) -> None:
        cancel_seen: float | None = None
        while not self._finished.wait(0.1):
            suspended = self._suspended_at
            if suspended is not None and time.monotonic() - suspended > self.suspend_bound:
                self._stop_now("ZooKeeper session suspended past the safe bound")
            if self.cancelled.is_set() and cancel_seen is None:
                cancel_seen = time.monotonic()
                _cancel_spark_jobs()
                with self._interrupt_lock:
                    if not self._finished.is_set():
                        _thread.interrupt_main()
            if cancel_seen is not None and time.monotonic() - cancel_seen > self.cancel_grace:
                logger.error(
                    "job %s ignored the cancel for %g s: stopping it",
                    self.job_id,
                    self.cancel_grace,
                )
                _stop_spark(kill=True)
                self._report(CANCELLED, f"cancelled (forced after {self.cancel_grace:g} s)")
                os._exit(EXIT_CANCELLED)

    def _stop_now(self, why: str) -> None:
        logger.error("attempt %d of %s stops itself: %s", self.attempt, self.job_id, why)
        _stop_spark(kill=True)
        logging.shutdown()
        os._exit(EXIT_SUSPENDED)

    # -- outcome -------------------------------------------------------------------------------

    def _report(self, outcome: str, error: str | None) -> None:
        """Record the outcome and release ``running`` in one transaction fenced on the attempt.

        Idempotent; a lost answer is resolved by reading the outcome back.
        """
        with self._report_lock:
            if self._reported:
                return
            record = Outcome(
                version=None,
                attempt=self.attempt,
                outcome=outcome,
                finished=utc_now(),
                error=short_error(error),
                host=socket.gethostname(),
            )
            for _ in range(3):
                try:
                    self._write_outcome(record)
                except (OutcomeUnknown, HandleExists, HandleNotFound):
                    if not self._recorded(record):
                        continue  # the outcome node changed meanwhile, or the answer was lost
                except ZkStoreError as exc:  # the fence included: another attempt owns the job
                    logger.error(
                        "outcome %s of attempt %d not recorded: %s", outcome, self.attempt, exc
                    )
                    break
                logger.info("attempt %d of %s: %s", self.attempt, self.job_id, outcome)
                break
            self._reported = True

    def _write_outcome(self, record: Outcome) -> None:
        path = self.cluster.layout.outcome(self.job_id)
        data = record.to_bytes()
        write = (
            SetData(path, data) if self.cluster.zk.exists(path) is not None else Create(path, data)
        )
        self.cluster.zk.commit([write, Delete(self.running_path)], fence=self.fence)

    def _recorded(self, record: Outcome) -> bool:
        try:
            found = self.cluster.state.outcome(self.job_id)
        except ZkStoreError:
            return False
        return found is not None and found.with_version(None) == record


def _summarize(exc: BaseException) -> str:
    lines = traceback.format_exception(exc)
    return "".join(lines[-12:]).strip()


def _active_spark_context() -> Any:
    module = sys.modules.get("pyspark")
    if module is None:
        return None
    from pyspark import SparkContext

    return SparkContext._active_spark_context


def _cancel_spark_jobs() -> None:
    context = _active_spark_context()
    if context is not None:
        try:
            context.cancelAllJobs()
        except Exception as exc:  # noqa: BLE001 - best effort while stopping
            logger.warning("could not cancel Spark jobs: %s", exc)


def _stop_spark(*, kill: bool) -> None:
    """Stop the SparkContext (or, when ``kill``, its JVM at once: no time left to be polite)."""
    context = _active_spark_context()
    if context is None:
        return
    if kill:
        gateway = getattr(context, "_gateway", None)
        process = getattr(gateway, "proc", None)
        if process is not None:
            process.kill()
        return
    try:
        context.stop()
    except Exception as exc:  # noqa: BLE001 - the job's result is already known
        logger.warning("stopping Spark: %s", exc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recovery.driver", description=__doc__)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--status-version", type=int, required=True)
    parser.add_argument("--cancel-grace", type=float, default=30.0)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    try:
        config = StoreConfig.from_json(os.environ[DRIVER_CONFIG_ENV])
    except KeyError:
        parser.error(f"{DRIVER_CONFIG_ENV} is not set: drivers are started by the daemon")
    except ConfigError as exc:
        parser.error(str(exc))
    driver = Driver(
        config,
        job_id=args.job_id,
        attempt=args.attempt,
        status_version=args.status_version,
        spark_master=spark_master_from_env(None),
        cancel_grace=args.cancel_grace,
    )
    return driver.run()


if __name__ == "__main__":
    sys.exit(main())
