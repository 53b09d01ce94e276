"""The driver's side of Spark: the active SparkContext, stopping it, and telling the world
which Spark application the attempt runs.

Once the job's SparkContext is up (whoever created it: ``ctx.spark`` or the script itself),
:class:`SparkAppRecord` publishes its application id, master and UI address in the EPHEMERAL
``R/jobs/<job>/spark`` record, fenced on the attempt, so that ``jobs show`` and ``--wait`` can
point at the Spark UI. The record goes with the attempt: withdrawn as it reports its outcome, and
gone with its session anyway.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from zkstore.errors import ZkStoreError
from zkstore.records.job_records import SparkApp
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.ops import Create, Fence, SetData

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

logger = logging.getLogger(__name__)

CHECK_INTERVAL = 1.0


class SparkAppRecord:
    """The ``spark`` record of one attempt. Not thread-safe: the driver serializes the calls."""

    def __init__(
        self,
        zk: ZooKeeper,
        path: str,
        attempt: int,
        fence: Fence,
        jvm: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.zk = zk
        self.path = path
        self.attempt = attempt
        self.fence = fence
        #: which driver JVM the attempt got and why (recovery.driver.warm_jvm), once known
        self.jvm = jvm
        self.published: SparkApp | None = None
        self._checked = 0.0

    def refresh(self) -> None:
        """Publish the running application if it is new (at most once a second). Best effort:
        a failure is logged and tried again at the next call."""
        now = time.monotonic()
        if now - self._checked < CHECK_INTERVAL:
            return
        self._checked = now
        app = current_app(self.attempt)
        if app is None or (self.published is not None and self.published.app_id == app.app_id):
            return
        app = replace(app, jvm=self.jvm())
        data = app.to_bytes()
        write = SetData(self.path, data) if self.published else Create(self.path, data, True)
        try:
            self.zk.commit([write], fence=self.fence)
        except ZkStoreError as exc:
            logger.warning("could not publish the Spark application %s: %s", app.app_id, exc)
            return
        self.published = app
        logger.info("Spark application %s (UI %s)", app.app_id, app.ui or "off")

    def withdraw(self) -> None:
        """The attempt is ending: its application is no longer one to look at."""
        if self.published is None:
            return
        try:
            self.zk.delete(self.path)
        except ZkStoreError as exc:
            logger.info("Spark application record left to the session: %s", exc)
        self.published = None


def current_app(attempt: int) -> SparkApp | None:
    """The active SparkContext's application, or None if there is none (yet)."""
    context = active_context()
    if context is None:
        return None
    try:
        app_id, master, ui = context.applicationId, context.master, context.uiWebUrl
    except Exception:  # noqa: BLE001 - starting or stopping: look again later
        return None
    if not app_id:
        return None
    return SparkApp(
        version=None,
        attempt=attempt,
        app_id=str(app_id),
        master=str(master),
        ui=str(ui) if ui else None,
        started=utc_moment(),
    )


def active_context() -> Any:
    """The active SparkContext, without importing pyspark if the job never did."""
    module = sys.modules.get("pyspark")
    if module is None:
        return None
    from pyspark import SparkContext

    return SparkContext._active_spark_context


def cancel_jobs() -> None:
    context = active_context()
    if context is not None:
        try:
            context.cancelAllJobs()
        except Exception as exc:  # noqa: BLE001 - best effort while stopping
            logger.warning("could not cancel Spark jobs: %s", exc)


def stop(*, kill: bool) -> None:
    """Stop the SparkContext (or, when ``kill``, its JVM at once: no time left to be polite)."""
    context = active_context()
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
