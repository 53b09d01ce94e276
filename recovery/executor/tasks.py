"""Around each task: the job's decorators, log records tagged with the task, end-of-task closes.

``ctx.task(function)`` wraps a function that processes a partition (what ``mapPartitions``,
``mapPartitionsWithIndex``, ``foreachPartition``, ``mapInPandas`` or ``mapInArrow`` call) in a
:class:`TaskFunction`. When Spark calls it in a task:

1. the task's :class:`TaskInfo` (job id, attempt, stage, partition, task attempt id) becomes the
   value of a context variable, which :class:`TaskLogFilter` copies into every log record;
2. the job's decorators (``ctx.decorate``) are entered, each a context-manager factory called
   with the :class:`TaskInfo`; then the filter is attached to the root logger's handlers (so a
   handler a decorator adds is tagged too);
3. the function runs; if it returns an iterator, the scope lasts until the iterator is exhausted
   or closed, so it covers the work Spark pulls through it;
4. the decorators exit (innermost first) and, in a Spark task, if the task failed or the worker
   is not reused (``spark.python.worker.reuse=false``: it exits right after), the job's
   resources in this process are closed now, so that their closes are counted with this task.

Pipelined functions of the same task (``rdd.mapPartitions(ctx.task(f)).mapPartitions(ctx.task(g))``
runs ``f`` and ``g`` in one task) share one scope: the decorators run once per task.
"""

from __future__ import annotations

import contextvars
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "LOG_FIELDS",
    "Decorator",
    "TaskFunction",
    "TaskInfo",
    "TaskLogFilter",
    "current_task",
    "current_task_id",
    "current_task_info",
    "tag_root_handlers",
    "worker_reused",
]

#: a job decorator: called with the task's info, returns a context manager run around the task
Decorator = Callable[["TaskInfo"], AbstractContextManager[Any]]

#: the attributes :class:`TaskLogFilter` sets on log records
LOG_FIELDS = ("job_id", "attempt", "stage", "partition", "task_tags")


def current_task() -> Any | None:
    """The running Spark task's ``TaskContext``, or None (on the driver, or between tasks)."""
    module = sys.modules.get("pyspark.taskcontext")
    return None if module is None else module.TaskContext.get()


def current_task_id() -> int | None:
    """The running Spark task attempt's id (unique within the application), or None.

    Also None while pyspark is still building the task's context: it publishes the object
    before filling it in, and another thread (the watcher) may look at that moment.
    """
    task = current_task()
    attempt_id = None if task is None else task.taskAttemptId()
    return None if attempt_id is None else int(attempt_id)


def worker_reused() -> bool:
    """True if this Python worker runs more than one task (``spark.python.worker.reuse``)."""
    return bool(os.environ.get("SPARK_REUSE_WORKER"))


@dataclass(frozen=True)
class TaskInfo:
    """Who runs: the job attempt, and the Spark task (None outside a task)."""

    job_id: str
    attempt: int
    stage: int | None = None
    partition: int | None = None
    task_attempt_id: int | None = None

    @classmethod
    def current(cls, job_id: str, attempt: int) -> TaskInfo:
        task = current_task()
        if task is None:
            return cls(job_id, attempt)
        return cls(job_id, attempt, task.stageId(), task.partitionId(), task.taskAttemptId())

    @property
    def tags(self) -> str:
        """``job=J attempt=A stage=S partition=P``, for log formats."""
        return (
            f"job={self.job_id} attempt={self.attempt} stage={_shown(self.stage)} "
            f"partition={_shown(self.partition)}"
        )


def _shown(value: int | None) -> str:
    return "-" if value is None else str(value)


_current: contextvars.ContextVar[TaskInfo | None] = contextvars.ContextVar(
    "zkstore_task", default=None
)


def current_task_info() -> TaskInfo | None:
    """The :class:`TaskInfo` of the task scope this code runs in, or None."""
    return _current.get()


class TaskLogFilter(logging.Filter):
    """Adds ``job_id``, ``attempt``, ``stage``, ``partition`` and ``task_tags`` to records.

    Values come from the task scope the record is emitted in (``-`` outside one); attributes a
    record already has (``extra=``) are kept. Never drops a record.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        info = _current.get()
        values: dict[str, object] = {name: "-" for name in LOG_FIELDS}
        if info is not None:
            values = {
                "job_id": info.job_id,
                "attempt": info.attempt,
                "stage": _shown(info.stage),
                "partition": _shown(info.partition),
                "task_tags": info.tags,
            }
        for name, value in values.items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


_log_filter = TaskLogFilter()


def tag_root_handlers() -> None:
    """Attach the task filter to every handler of the root logger that lacks one."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, TaskLogFilter) for f in handler.filters):
            handler.addFilter(_log_filter)


@dataclass
class _Scope:
    info: TaskInfo
    token: contextvars.Token[TaskInfo | None]
    stack: ExitStack
    depth: int = 1


_scopes: dict[tuple[int | None, int], _Scope] = {}
_scopes_lock = threading.Lock()


def _enter(job_id: str, attempt: int, decorators: list[Decorator]) -> tuple[int | None, int]:
    """Enter the task scope (or nest in the one this task is in); returns its key."""
    key = (current_task_id(), threading.get_ident())
    with _scopes_lock:
        scope = _scopes.get(key)
        if scope is not None:
            scope.depth += 1
            return key
    info = TaskInfo.current(job_id, attempt)
    token = _current.set(info)
    stack = ExitStack()
    try:
        for decorator in decorators:
            stack.enter_context(decorator(info))
        tag_root_handlers()
    except BaseException:
        stack.close()
        _current.reset(token)
        raise
    with _scopes_lock:
        _scopes[key] = _Scope(info, token, stack)
    return key


def _leave(key: tuple[int | None, int], error: BaseException | None) -> None:
    """Leave the scope; the last one out runs the decorators' exits and the end-of-task close."""
    with _scopes_lock:
        scope = _scopes[key]
        scope.depth -= 1
        if scope.depth > 0:
            return
        del _scopes[key]
    try:
        if error is None:
            scope.stack.close()
        else:
            scope.stack.__exit__(type(error), error, error.__traceback__)
    finally:
        try:
            _current.reset(scope.token)
        except ValueError:  # left from another context than it was entered in
            _current.set(None)
        if key[0] is not None and (error is not None or not worker_reused()):
            _close_at_task_end(scope.info, key[0], error)


def _close_at_task_end(info: TaskInfo, task: int, error: BaseException | None) -> None:
    from recovery.executor.registry import current_registry

    registry = current_registry()
    if registry is None:
        return
    reason = "task failed, the worker exits" if error is not None else "worker not reused"
    registry.close_where(lambda key: key.job_id == info.job_id, reason)
    registry.flush_all(task)


@dataclass(frozen=True, eq=False)
class TaskFunction:
    """A partition function run inside a task scope (see the module docstring). Picklable."""

    function: Callable[..., Any]
    job_id: str
    attempt: int
    decorators: list[Decorator] = field(default_factory=list)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key = _enter(self.job_id, self.attempt, self.decorators)
        try:
            result = self.function(*args, **kwargs)
        except BaseException as exc:
            _leave(key, exc)
            raise
        if isinstance(result, Iterator):
            return _scoped(key, result)
        _leave(key, None)
        return result


def _scoped(key: tuple[int | None, int], iterator: Iterator[Any]) -> Iterator[Any]:
    try:
        yield from iterator
    except GeneratorExit:  # closed early (``take``): not a failure
        _leave(key, None)
        raise
    except BaseException as exc:
        _leave(key, exc)
        raise
    _leave(key, None)
