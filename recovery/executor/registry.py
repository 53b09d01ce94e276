"""The resources open in this process, keyed by (job, attempt, name): opened once, closed once.

One :class:`Registry` per process (:func:`process_registry`): a Python worker that runs many tasks
shares each resource between them. Its rules:

- **Open once.** The first use opens; concurrent first uses wait for that one open (a lock per
  key), other keys are not held up. The registry lock is never held while user code runs.
- **Failed opens are not cached.** An ``open`` that raises leaves nothing behind; the error goes
  to the caller, and the next use tries again.
- **Close exactly once per open.** An instance leaves the registry (under the lock) before it is
  closed, so whoever takes it out is the only one to close it; what was never opened is never
  closed. A close that raises is logged and still counts as the close of that open.
- **A process on its way out waits for the closes under way.** An instance taken out by one
  thread (the watcher closing an idle one, a worker's ``os._exit`` closing on a helper thread)
  is not in the registry any more while it closes; a bounded :meth:`Registry.close_where` (what
  a stop signal and an exit run) waits for those too before it returns, so that the process does
  not die in the middle of another thread's close.
- **Attempts never share.** The key holds the attempt, and opening attempt N of a job closes the
  instances that attempt N-1 (or older) left in this process: they will never be used again.
- **Forks do not inherit.** A child forked from this process starts with an empty registry and
  never closes its parent's instances (a connection shared across a fork is not the child's).

Counts of opens, closes, failed opens and uses are kept per key until a task that uses that key
can hand them to its accumulator (:meth:`Registry.flush`): counts of a close that happens between
tasks travel with the next task that uses the resource in this process.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

__all__ = [
    "COUNTS",
    "Instance",
    "Opener",
    "PerProcess",
    "Registry",
    "ResourceKey",
    "Sink",
    "current_registry",
    "process_registry",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: the counts kept per resource (the same names as ``zkstore.jobs.resources.COUNTS``)
COUNTS = ("opens", "closes", "failed_opens", "uses")

Opener = Callable[[], tuple[Any, Callable[[], object]]]


class Sink(Protocol):
    """Where counts go: a pyspark ``Accumulator`` of a dict of counts."""

    def add(self, term: dict[str, int]) -> None: ...


@dataclass(frozen=True)
class ResourceKey:
    job_id: str
    attempt: int
    name: str

    def __str__(self) -> str:
        return f"resource {self.name!r} of {self.job_id} attempt {self.attempt}"


@dataclass
class Instance:
    """One open resource: its value, how to close it, and when it was last used."""

    key: ResourceKey
    value: Any
    closer: Callable[[], object]
    idle_timeout: float
    pid: int
    last_task: int | None = None
    last_active: float = 0.0


class Registry:
    """The resources open in one process. Thread-safe; see the module docstring for the rules."""

    def __init__(self) -> None:
        # Re-entrant: a signal handler that closes everything runs on the main thread, possibly
        # while that thread is inside a method below.
        self._lock = threading.RLock()
        self._instances: dict[ResourceKey, Instance] = {}
        self._gates: dict[ResourceKey, threading.Lock] = {}
        self._pending: dict[ResourceKey, Counter[str]] = {}
        self._sinks: dict[ResourceKey, tuple[int | None, Sink]] = {}
        #: instances taken out to be closed whose close has not ended yet (any thread's)
        self._in_flight = 0
        self._closes_ended = threading.Condition(self._lock)

    # -- using -----------------------------------------------------------------------------------

    def acquire(
        self,
        key: ResourceKey,
        opener: Opener,
        *,
        idle_timeout: float,
        task: int | None,
        sink: Sink | None = None,
    ) -> Any:
        """The value of ``key`` in this process, opened by ``opener`` if it is not open yet.

        ``task`` is the running Spark task attempt (None outside a task): a use is counted once
        per task (every call outside a task is a use). Raises whatever ``opener`` raised
        (nothing is cached then). The counts pending for ``key`` go to ``sink`` (this task's
        accumulator) before returning or raising, and so do those of other keys whose sink
        this task gave.
        """
        if sink is not None:
            self._sinks[key] = (task, sink)
        try:
            return self._acquire(key, opener, idle_timeout, task)
        finally:
            self.flush_all(task)

    def _acquire(
        self, key: ResourceKey, opener: Opener, idle_timeout: float, task: int | None
    ) -> Any:
        with self._lock:
            instance = self._instances.get(key)
            if instance is not None:
                return self._use(instance, task)
            gate = self._gates.setdefault(key, threading.Lock())
        with gate:
            with self._lock:
                instance = self._instances.get(key)  # opened by a concurrent first use
                if instance is not None:
                    return self._use(instance, task)
            instance = self._open(key, opener, idle_timeout)
            with self._lock:
                self._instances[key] = instance
                value = self._use(instance, task)
                superseded = self._take(
                    lambda k: k.job_id == key.job_id and k.attempt < key.attempt
                )
        self._close_all(superseded, f"superseded by attempt {key.attempt}")
        return value

    def _open(self, key: ResourceKey, opener: Opener, idle_timeout: float) -> Instance:
        try:
            value, closer = opener()
        except BaseException:
            self._count(key, "failed_opens")
            raise
        self._count(key, "opens")
        logger.info("opened %s (pid %d)", key, os.getpid())
        return Instance(key, value, closer, idle_timeout, os.getpid(), None, time.monotonic())

    def _use(self, instance: Instance, task: int | None) -> Any:
        if task is None or task != instance.last_task:
            self._count(instance.key, "uses")
        instance.last_task = task
        instance.last_active = time.monotonic()
        return instance.value

    # -- closing ---------------------------------------------------------------------------------

    def close_where(
        self, selected: Callable[[ResourceKey], bool], reason: str, *, bound: float | None = None
    ) -> int:
        """Close the instances whose key is ``selected``; returns how many were closed.

        With ``bound``, the closes run on a helper thread, and the closes other threads have under
        way are waited for too (a process on its way out must not die in the middle of one); this
        returns after at most ``bound`` seconds all told (nor may it hang on a stuck close).
        """
        with self._lock:
            taken = self._take(selected)
        if bound is None:
            self._close_all(taken, reason)
            return len(taken)
        deadline = time.monotonic() + bound
        if taken:
            _run_bounded(lambda: self._close_all(taken, reason), bound, f"closing ({reason})")
        self._wait_for_closes(deadline, reason)
        return len(taken)

    def _wait_for_closes(self, deadline: float, reason: str) -> None:
        with self._closes_ended:
            while self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    logger.warning(
                        "closing (%s): %d close(s) still under way, going on without them",
                        reason,
                        self._in_flight,
                    )
                    return
                self._closes_ended.wait(left)

    def close_idle(self, running_task: int | None) -> int:
        """Close what has not been used for its idle timeout; returns how many were closed.

        An instance that the running task has used is busy (a task may hold on to a resource
        for longer than the timeout): its idle time starts when that task is over.
        """
        now = time.monotonic()
        with self._lock:
            for instance in self._instances.values():
                if running_task is not None and instance.last_task == running_task:
                    instance.last_active = now
            idle = self._take(
                lambda k: now - self._instances[k].last_active >= self._instances[k].idle_timeout
            )
        self._close_all(idle, "idle")
        return len(idle)

    def _take(self, selected: Callable[[ResourceKey], bool]) -> list[Instance]:
        """Remove the selected instances (under the lock): the caller is now their only closer,
        and must close each (:meth:`_close` ends its flight)."""
        keys = [key for key in self._instances if selected(key)]
        self._in_flight += len(keys)
        return [self._instances.pop(key) for key in keys]

    def _close_all(self, instances: Iterable[Instance], reason: str) -> None:
        for instance in instances:
            self._close(instance, reason)

    def _close(self, instance: Instance, reason: str) -> None:
        try:
            if instance.pid != os.getpid():
                return  # a forked child's copy: the parent closes the real one
            try:
                instance.closer()
            except Exception as exc:  # noqa: BLE001 - a close that fails still ends that open
                logger.warning(
                    "closing %s (%s) failed: %s: %s", instance.key, reason, type(exc).__name__, exc
                )
            else:
                logger.info("closed %s (%s, pid %d)", instance.key, reason, os.getpid())
            self._count(instance.key, "closes")
        finally:
            with self._closes_ended:
                self._in_flight -= 1
                self._closes_ended.notify_all()

    # -- counts ----------------------------------------------------------------------------------

    def _count(self, key: ResourceKey, what: str) -> None:
        with self._lock:
            self._pending.setdefault(key, Counter())[what] += 1

    def flush(self, key: ResourceKey, task: int | None) -> None:
        """Hand the counts pending for ``key`` to the sink the running ``task`` gave for it.

        A sink given by an earlier task is stale (Spark has sent its updates already): the counts
        then wait for the next task that uses ``key`` in this process.
        """
        if key not in self._pending:
            return
        with self._lock:
            given = self._sinks.get(key)
            if given is None or given[0] != task:
                return
            counts = self._pending.pop(key, None)
        if counts:
            given[1].add(dict(counts))

    def flush_all(self, task: int | None) -> None:
        if not self._pending:
            return
        for key in list(self._pending):
            self.flush(key, task)

    # -- inspection ------------------------------------------------------------------------------

    def open_keys(self) -> list[ResourceKey]:
        with self._lock:
            return list(self._instances)


def _run_bounded(action: Callable[[], None], bound: float, what: str) -> None:
    """Run ``action`` on a daemon thread and wait for it at most ``bound`` seconds."""
    thread = threading.Thread(target=action, name="zkstore-resource-close", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no new threads at interpreter shutdown (atexit): close inline
        action()
        return
    thread.join(bound)
    if thread.is_alive():
        logger.warning("%s: still running after %g s, going on without it", what, bound)


# -- one per process ---------------------------------------------------------------------------


class PerProcess(Generic[T]):
    """One ``T`` per process, made on first use. A forked child makes its own on first use and
    drops the parent's without touching it (its threads and locks did not survive the fork)."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._value: T | None = None
        self._pid = 0
        self._lock = threading.Lock()
        self._fork_hook = False

    def get(self) -> T:
        value = self._value
        if value is not None and self._pid == os.getpid():
            return value
        with self._lock:
            if self._value is None or self._pid != os.getpid():
                self._value, self._pid = self._factory(), os.getpid()
            if not self._fork_hook:
                os.register_at_fork(after_in_child=self._forget)
                self._fork_hook = True
            return self._value

    def current(self) -> T | None:
        """This process's ``T`` if it was made (never makes it)."""
        return self._value if self._pid == os.getpid() else None

    def _forget(self) -> None:
        self._value, self._pid, self._lock = None, 0, threading.Lock()


_registries: PerProcess[Registry] = PerProcess(Registry)


def process_registry() -> Registry:
    """This process's registry, created on first use (a forked child gets a fresh one)."""
    return _registries.get()


def current_registry() -> Registry | None:
    """This process's registry if it has one (never creates it)."""
    return _registries.current()
