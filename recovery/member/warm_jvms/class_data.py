"""A daemon's Spark setup (:class:`ClassData`): where Spark and Java are, its deployment's
configuration directory (:mod:`.confdir`) and the class-data archive (:mod:`.archive`),
verified or made on a thread of its own, never blocking a launch; a clean stop ends a making
under way (within :data:`STOP_WAIT`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from recovery.member.warm_jvms import confdir, home
from recovery.member.warm_jvms.archive import (
    ArchiveKey,
    locked,
    make,
    prepare_directory,
    remove_stale,
    remove_unfinished,
    verify,
)
from recovery.shared.jvm_settings import ARCHIVE_ENV, PROPERTIES_ENV

__all__ = ["STOP_WAIT", "ClassData"]

logger = logging.getLogger(__name__)

#: Seconds a clean stop waits for the making to end and its scratch directory to go.
STOP_WAIT = 10.0


class ClassData:
    """A daemon's Spark setup: where Spark and Java are, its deployment's configuration
    directory (:mod:`.confdir`) and, unless ``directory`` is None (``--class-data off``), the
    archive, verified or made on a thread of its own (:meth:`start`). Thread-safe to read."""

    def __init__(self, directory: Path | None, environ: Callable[[], dict[str, str]]) -> None:
        self.directory = directory
        self._environ = environ  # the drivers' environment (the daemon's, less its secrets)
        self.spark: home.SparkHome | None = None
        self.conf_plan: confdir.ConfPlan | None = None
        #: the verified archive, once there is one
        self.archive: Path | None = None
        #: what happened, for the log and the drivers: why there is no archive
        self.reason = "not made yet"
        #: set once the archive is ready or known not to come
        self.settled = threading.Event()
        #: set once a warm driver may start (:mod:`.pool`): the archive verified, or being
        #: made (it starts without it, and is replaced once it is ready), or known not to come
        self.startable = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def conf_dir(self) -> Path | None:
        return self.directory / "conf" if self.directory is not None else None

    def start(self) -> ClassData:
        self._thread = threading.Thread(target=self._run, name="class-data", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop: an archive being made is not (its JVM is killed, its scratch directory goes),
        within :data:`STOP_WAIT`."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(STOP_WAIT)

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """What a Spark driver JVM's environment ``base`` gets: the configuration directory
        (:func:`.confdir.environment`), the properties file and, once verified, the archive
        (the driver puts it in its JVM's options, unless its class path differs)."""
        plan, conf = self.conf_plan, self.conf_dir
        if plan is None or conf is None or plan.keep_reason is not None:
            return {}
        env = confdir.environment(base, plan, conf)
        if plan.properties is not None:
            env[PROPERTIES_ENV] = str(plan.properties)
        if self.archive is not None:
            env[ARCHIVE_ENV] = str(self.archive)
        return env

    def _run(self) -> None:
        began = time.monotonic()
        try:
            self.settle()
        except (OSError, home.SparkNotFound) as exc:
            self.reason = str(exc)
        finally:
            self.startable.set()
            self.settled.set()
        if self.archive is not None:
            logger.info(
                "class-data archive %s: Spark drivers map Spark's classes from it (%s in %.1f s)",
                self.archive,
                self.reason,
                time.monotonic() - began,
            )
        elif self.directory is not None:
            logger.warning(
                "no class-data archive: %s; Spark drivers load their classes from the jars",
                self.reason,
            )

    def settle(self) -> None:
        """Find Spark, plan the configuration directory; verify the archive, or make it (what
        :meth:`start` runs on its thread; the test suite's ``python -m tests.spark_jvm`` runs
        it at once). Raises OSError or :class:`.home.SparkNotFound` when there can be none."""
        base = self._environ()
        self.spark = home.find(base)
        self.conf_plan = confdir.read_plan(base, self.spark.path)
        if self.directory is None:
            self.reason = "off (--class-data off)"
            return
        if self.conf_plan.keep_reason is not None:
            raise OSError(self.conf_plan.keep_reason)
        problem = prepare_directory(self.directory)
        if problem is not None:
            raise OSError(problem)
        env = {**base, **self.environment(base)}
        args = self.submit_args()
        command = home.launcher_command(self.spark, env, [*args, "pyspark-shell"])
        key = self._key(home.class_path(command))
        with locked(self.directory, self._stop):
            left = remove_unfinished(self.directory)
            if left:
                logger.info(
                    "removed %d unfinished class-data archive(s) of a daemon that died", left
                )
            found, why = verify(self.directory, key)
            if found is None and not self._stop.is_set():
                logger.info("making the class-data archive (%s) in %s", why, self.directory)
                self.startable.set()  # Spark is found and planned: warm drivers need not wait
                made = make(self.directory, key, self.spark, env, args, self._stop)
                found, why = made, "made"
            if found is not None:
                removed = remove_stale(self.directory, key)
                if removed:
                    logger.info("removed %d file(s) of older class-data archives", removed)
        self.archive, self.reason = found, why

    def submit_args(self) -> list[str]:
        """What spark-submit gets besides a job's own: the deployment's properties file."""
        plan = self.conf_plan
        if plan is None or plan.properties is None or plan.keep_reason is not None:
            return []
        return ["--properties-file", str(plan.properties)]

    def _key(self, class_path: str) -> ArchiveKey:
        spark = self.spark
        assert spark is not None
        return ArchiveKey(
            java=str(spark.java),
            java_size=spark.java_size,
            java_mtime_ns=spark.java_mtime_ns,
            pyspark=spark.pyspark,
            spark_home=str(spark.path),
            class_path=class_path,
        )
