"""The reference to a job resource that tasks carry: ``ref.get()`` on an executor.

A :class:`ResourceRef` is small and picklable: the job id, attempt and name, the idle timeout,
the ``open``/``close`` callables cloudpickled by value when the resource was declared (so the
executors need the job's code no more than Spark does), and the accumulator its counts go to.
Tasks get it through their closures and call :meth:`ResourceRef.get` as often as they like: the
first call in a process opens the resource, every later one returns the same instance.
"""

from __future__ import annotations

import functools
import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from recovery.executor.hooks import process_hooks
from recovery.executor.registry import COUNTS, ResourceKey, process_registry
from recovery.executor.tasks import current_task_id

__all__ = ["DEFAULT_IDLE_TIMEOUT", "SPARK_IDLE_KILL", "CountsParam", "ResourceRef"]

#: seconds a resource may stay unused in a worker before it is closed; Spark SIGKILLs Python
#: workers idle for a minute, so the close must come well before that
DEFAULT_IDLE_TIMEOUT = 20.0
SPARK_IDLE_KILL = 60.0


class CountsParam:
    """The ``AccumulatorParam`` of a dict of counts (pyspark only calls these two methods)."""

    def zero(self, value: dict[str, int]) -> dict[str, int]:
        return {}

    def addInPlace(self, first: dict[str, int], second: dict[str, int]) -> dict[str, int]:
        merged = dict(first)  # a new dict: the driver reads it from another thread
        for name, count in second.items():
            merged[name] = merged.get(name, 0) + count
        return merged


@dataclass(frozen=True, eq=False)
class ResourceRef:
    """A job-scoped resource, opened at most once per worker process and attempt."""

    job_id: str
    attempt: int
    name: str
    payload: bytes  # cloudpickled (open, close), by value
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    accumulator: Any = None  # a pyspark Accumulator of a dict of counts, or None

    @property
    def key(self) -> ResourceKey:
        return ResourceKey(self.job_id, self.attempt, self.name)

    def get(self) -> Any:
        """The resource, opened in this process on first use; shared by every task after that.

        Raises what ``open`` raised (with a note naming the resource): the task fails with the
        original error, and the next ``get`` tries to open again.
        """
        task = current_task_id()
        registry = process_registry()
        value = registry.acquire(
            self.key, self._open, idle_timeout=self.idle_timeout, task=task, sink=self.accumulator
        )
        process_hooks().arm(registry, task)
        return value

    def _open(self) -> tuple[Any, Callable[[], object]]:
        try:
            open_, close = pickle.loads(self.payload)  # our own bytes, from the driver
            resource = open_()
            if close is not None:
                return resource, functools.partial(close, resource)
            if hasattr(type(resource), "__enter__") and hasattr(type(resource), "__exit__"):
                return type(resource).__enter__(resource), functools.partial(
                    type(resource).__exit__, resource, None, None, None
                )
            return resource, _nothing_to_close
        except BaseException as exc:
            exc.add_note(f"while opening {self.key} in pid {os.getpid()}")
            raise

    def counts(self) -> dict[str, int]:
        """On the driver: opens, closes, failed opens and uses reported by finished tasks."""
        value = self.accumulator.value if self.accumulator is not None else {}
        return {name: int(value.get(name, 0)) for name in COUNTS}

    def __reduce__(self) -> tuple[Callable[..., ResourceRef], tuple[Any, ...]]:
        return _restore, (
            self.job_id,
            self.attempt,
            self.name,
            self.payload,
            self.idle_timeout,
            self.accumulator,
        )

    def __repr__(self) -> str:
        return f"ResourceRef({self.name!r}, job={self.job_id!r}, attempt={self.attempt})"


def _restore(*fields: Any) -> ResourceRef:
    """Unpickling a reference starts a task that uses it: pyspark has just reset the signal
    dispositions, so put back the handlers that close this process's resources."""
    process_hooks().refresh()
    return ResourceRef(*fields)


def _nothing_to_close() -> None:
    return None
