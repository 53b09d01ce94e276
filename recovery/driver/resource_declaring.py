"""The driver's side of job resources: declaring them, decorating tasks, reporting the counts.

``ctx.resource``, ``ctx.decorate`` and ``ctx.task`` land here (one :class:`JobResources` per
attempt); what happens on the executors is in :mod:`recovery.executor`.

Counts travel back with Spark accumulators: a task adds what it did (and what its process did
since the last task that used the resource there) to its accumulator, and Spark merges those
updates on the driver when the task succeeds. So the driver knows, per resource:

- **opens** and **uses** (task attempts that called ``get``) of every successful task;
- **closes** that happened inside a task (at the end of a task when workers are not reused, of a
  superseded attempt's instance) or between two tasks that used the resource in that process
  (idle closes), reported by the later task;
- **failed opens** of tasks that went on to succeed (they caught the error and tried again).

It cannot know about what no successful task reports: a close after the last task of a process
(idle, exit, SIGHUP when the SparkContext stops: usually after the job's last action), and the
failed open of a task that failed with it (Spark drops a failed task's accumulator updates; the
error itself reaches the driver with the task's failure). A publisher thread writes the counts to
``R/jobs/<job>/resources`` when they change, fenced on the attempt; the last write, when the job
function has returned, is marked ``final``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import cloudpickle

from recovery.executor.ref import (
    DEFAULT_IDLE_TIMEOUT,
    SPARK_IDLE_KILL,
    CountsParam,
    ResourceRef,
)
from recovery.executor.tasks import Decorator, TaskFunction
from recovery.shared.pickling import is_user_module, pickled_by_value
from zkstore.config import validate_id
from zkstore.errors import ConfigError, FenceLost, SerializationError, ZkStoreError
from zkstore.jobs.resources import MAX_RESOURCES, ResourceReport, ResourceReports
from zkstore.zookeeper.ops import Fence

__all__ = ["PUBLISH_EVERY", "JobResources", "pickle_by_value"]

logger = logging.getLogger(__name__)

#: how often the driver looks at the counts and, if they changed, writes them to ZooKeeper
PUBLISH_EVERY = 2.0


def pickle_by_value(values: tuple[Any, ...], what: str) -> bytes:
    """``values`` cloudpickled, the code of user modules (not installed ones) by value."""
    with contextlib.ExitStack() as stack:
        for module in _user_modules(values):
            stack.enter_context(pickled_by_value(module))
        try:
            return bytes(cloudpickle.dumps(values))
        except Exception as exc:
            raise SerializationError(
                f"{what} cannot be serialized: {type(exc).__name__}: {exc}"
            ) from exc


def _user_modules(values: tuple[Any, ...]) -> list[ModuleType]:
    """The modules that define ``values`` (seen through ``functools.partial``) and that the
    executors may not have: neither installed nor in the standard library."""
    found: dict[str, ModuleType] = {}
    for value in values:
        inner = value
        while isinstance(inner, functools.partial):
            inner = inner.func
        name = getattr(inner, "__module__", None)
        if not isinstance(name, str) or name.partition(".")[0] in sys.stdlib_module_names:
            continue
        module = sys.modules.get(name)
        if module is None:
            continue
        if is_user_module(module):
            found[module.__name__] = module
    return list(found.values())


class JobResources:
    """The resources and task decorators of one job attempt, on its driver."""

    def __init__(
        self,
        job_id: str,
        attempt: int,
        spark_context: Callable[[], Any],
        *,
        reports: ResourceReports | None = None,
        fence: Fence | None = None,
        publish_every: float = PUBLISH_EVERY,
    ) -> None:
        self.job_id = job_id
        self.attempt = attempt
        self._spark_context = spark_context
        self._reports = reports
        self._fence = fence or Fence()
        self._publish_every = publish_every
        self._refs: dict[str, ResourceRef] = {}
        self._decorators: list[Decorator] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._publisher: threading.Thread | None = None
        self._published: dict[str, dict[str, int]] | None = None

    # -- declaring -------------------------------------------------------------------------------

    def declare(
        self,
        name: str,
        open: Callable[[], Any],  # shadows the builtin: the word users read in the API
        close: Callable[[Any], object] | None = None,
        *,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        counts: bool = True,
    ) -> ResourceRef:
        """A reference to a new resource (see ``JobContext.resource``); raises ConfigError for
        a bad or taken name, too many resources or a bad timeout, SerializationError if ``open``
        or ``close`` cannot be pickled. Without ``counts``, tasks report nothing (no accumulator:
        Spark sends each task's accumulator updates to the driver before its next task starts)."""
        validate_id(name, "resource name")
        if not 0 < idle_timeout < SPARK_IDLE_KILL:
            raise ConfigError(
                f"resource {name!r}: idle_timeout must be over 0 and under {SPARK_IDLE_KILL:g} s "
                "(Spark kills Python workers idle for a minute, without any cleanup)"
            )
        if not callable(open) or (close is not None and not callable(close)):
            raise ConfigError(f"resource {name!r}: open and close must be callables")
        payload = pickle_by_value((open, close), f"resource {name!r}: open/close")
        with self._lock:
            if name in self._refs:
                raise ConfigError(f"resource {name!r} is declared already in this attempt")
            if len(self._refs) >= MAX_RESOURCES:
                raise ConfigError(f"a job declares at most {MAX_RESOURCES} resources")
            accumulator = self._spark_context().accumulator({}, CountsParam()) if counts else None
            ref = ResourceRef(self.job_id, self.attempt, name, payload, idle_timeout, accumulator)
            self._refs[name] = ref
        self._start_publisher()
        return ref

    def decorate(self, decorator: Decorator) -> None:
        """Run ``decorator(task_info)`` (a context manager) around every ``task``-wrapped task."""
        if not callable(decorator):
            raise ConfigError("a task decorator must be a callable returning a context manager")
        pickle_by_value((decorator,), "task decorator")
        self._decorators.append(decorator)

    def task(self, function: Callable[..., Any]) -> TaskFunction:
        """``function`` (of a partition) wrapped in the task scope of this attempt."""
        if not callable(function):
            raise ConfigError("ctx.task wraps a callable")
        return TaskFunction(function, self.job_id, self.attempt, self._decorators)

    # -- counts ----------------------------------------------------------------------------------

    def counts(self) -> dict[str, dict[str, int]]:
        """``{name: {opens, closes, failed_opens, uses}}`` as reported by finished tasks, for
        the resources declared with counts."""
        with self._lock:
            refs = {name: ref for name, ref in self._refs.items() if ref.accumulator is not None}
        return {name: ref.counts() for name, ref in sorted(refs.items())}

    def _start_publisher(self) -> None:
        with self._lock:
            if self._reports is None or self._publisher is not None:
                return
            self._publisher = threading.Thread(
                target=self._publish_loop, name="zkstore-resource-report", daemon=True
            )
        self._publisher.start()

    def _publish_loop(self) -> None:
        while not self._stop.wait(self._publish_every):
            self.publish(final=False)

    def publish(self, *, final: bool) -> None:
        """Write the counts if they changed (always when ``final``); never raises.

        A lost fence stops publishing for good: another attempt owns the job now.
        """
        if self._reports is None:
            return
        counts = self.counts()
        if not counts or (counts == self._published and not final):
            return
        try:
            self._reports.write(
                ResourceReport.build(self.attempt, counts, final=final), fence=self._fence
            )
        except FenceLost as exc:
            logger.warning("resource counts of attempt %d not written: %s", self.attempt, exc)
            self._stop.set()
            return
        except ZkStoreError as exc:
            logger.warning("resource counts not written (will retry): %s", exc)
            return
        self._published = counts

    def finish(self) -> None:
        """The job function is over: stop the publisher and write the final counts."""
        self._stop.set()
        if self._publisher is not None:
            self._publisher.join(timeout=30)
        if self._refs:
            self.publish(final=True)
            logger.info("resource counts of attempt %d: %s", self.attempt, self.counts())
