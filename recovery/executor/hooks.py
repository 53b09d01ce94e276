"""When a process closes its resources: idle, on its way out, and when it is told to stop.

How PySpark (4.x, ``pyspark/daemon.py``) ends a forked Python worker, and what is done about it:

- **Exit.** A worker leaves with ``os._exit``: after every task when
  ``spark.python.worker.reuse=false``, after a task that failed, and when the JVM closes its
  socket (an idle worker unused for a minute; every idle worker when the SparkContext stops).
  ``atexit`` never runs there, so in a worker ``os._exit`` is wrapped: the wrapper closes this
  process's resources (bounded in time) and then calls the real ``os._exit``. ``atexit`` is
  registered too, for processes that exit normally (non-daemon workers, drivers).
- **Stop.** When the SparkContext stops (or the executor goes), the daemon sends SIGHUP to its
  process group, right after the JVM closed the idle workers' sockets; SIGTERM may come from
  outside. A handler is installed for each of them that is at its default, on the main thread of
  a worker while it has a resource open: it closes the resources and dies of the same signal with
  the default action, as the worker would have. A disposition somebody else chose (a handler, or
  ignore) is left alone. pyspark sets both back to their default action (die at once) each time
  a worker starts waiting for its next task (``signal.signal(SIGHUP, SIG_DFL)`` in
  ``daemon.worker``); in a worker, ``signal.signal`` is wrapped so that such a reset installs
  that handler instead: the worker still dies of the signal, after closing, and no SIGHUP finds
  the default action in between (the soak saw one do so when the handler was put back by a
  thread, which a loaded machine did not schedule in time). The watcher thread stays the
  fallback for a reset that bypasses ``signal.signal`` (and for a first open off the main
  thread, where no handler can be installed): it sends the main thread SIGURG (whose default
  action is to be ignored), whose handler re-installs them within :data:`WATCH_EVERY`. A handler
  that finds a close under way on another thread (the watcher's idle close, the ``os._exit``
  wrapper's helper) waits for it, within the same bound, before the process dies (seen: the
  stop's SIGHUP met the idle close of the last instance and the process died before that close
  wrote anything).
- **Idle.** The watcher thread closes each resource that no task has used for its idle timeout
  (20 s by default, always under the minute after which Spark drops idle workers).
- **SIGKILL, a crash, the machine going away**: nothing runs. A resource must not hold anything
  that a crash could leak (temporary state on a server that nothing else cleans up).

Nothing here runs in a process that never opened a resource; signal handlers and the
``os._exit`` and ``signal.signal`` wrappers are only installed in Spark Python workers (an open
inside a Spark task).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from recovery.executor.registry import PerProcess, Registry, current_registry
from recovery.executor.tasks import current_task, current_task_id

__all__ = [
    "EXIT_CLOSE_BOUND",
    "REARM_SIGNAL",
    "STOP_SIGNALS",
    "WATCH_EVERY",
    "ProcessHooks",
    "close_everything",
    "process_hooks",
]

logger = logging.getLogger(__name__)

#: the longest a process on its way out waits for its resources to close
EXIT_CLOSE_BOUND = 10.0
#: how often the watcher closes idle resources and checks the stop handlers
WATCH_EVERY = 0.1
STOP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)
#: sent by the watcher to the main thread to have it re-install the stop handlers
REARM_SIGNAL = signal.SIGURG
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
#: ``signal.signal`` itself, whoever wraps it later (this module does, in a worker)
_set_disposition = signal.signal


def close_everything(reason: str) -> None:
    """Close every resource of this process, waiting at most :data:`EXIT_CLOSE_BOUND`."""
    registry = current_registry()
    if registry is not None:
        registry.close_where(lambda _key: True, reason, bound=EXIT_CLOSE_BOUND)


class ProcessHooks:
    """The per-process machinery that closes resources: armed by the first open."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed = False
        self._in_worker = False
        self._refreshed_for: int | None = None

    def arm(self, registry: Registry, task: int | None) -> None:
        """Called after every successful use; cheap once armed.

        The first call starts the watcher and registers ``atexit``; the first call inside a
        Spark task also wraps ``os._exit`` and ``signal.signal``; every new task re-installs the
        stop handlers.
        """
        if not self._armed or (task is not None and not self._in_worker):
            with self._lock:
                if not self._armed:
                    atexit.register(close_everything, "process exit")
                    _start_watcher(registry, self)
                    self._armed = True
                if task is not None and not self._in_worker:
                    _wrap_os_exit()
                    _wrap_signal()
                    self._in_worker = True
        if task is not None and task != self._refreshed_for:
            self._refreshed_for = task
            self.refresh()

    def refresh(self) -> None:
        """Re-install the handlers that pyspark reset (main thread of a worker, resources open)."""
        if not self._in_worker or threading.current_thread() is not threading.main_thread():
            return
        registry = current_registry()
        if registry is None or not registry.open_keys():
            return
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) == signal.SIG_DFL:
                signal.signal(signum, _close_and_die)
        if signal.getsignal(REARM_SIGNAL) == signal.SIG_DFL:
            signal.signal(REARM_SIGNAL, _rearm)

    def poke_if_disarmed(self, registry: Registry) -> None:
        """From the watcher: if a waiting worker lost its stop handlers, have them put back."""
        if not self._in_worker or current_task() is not None or not registry.open_keys():
            return
        if signal.getsignal(REARM_SIGNAL) is not _rearm:
            return
        if any(signal.getsignal(signum) == signal.SIG_DFL for signum in STOP_SIGNALS):
            main = threading.main_thread().ident
            if main is not None:
                signal.pthread_kill(main, REARM_SIGNAL)


def _close_and_die(signum: int, frame: FrameType | None) -> None:
    """Close everything, then die of ``signum`` with its default action."""
    close_everything(f"signal {signal.Signals(signum).name}")
    _set_disposition(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _rearm(signum: int, frame: FrameType | None) -> None:
    process_hooks().refresh()


def _wrap_os_exit() -> None:
    real_exit: Callable[[int], Any] = os._exit
    if getattr(real_exit, "zkstore_wrapped", False):
        return

    def exit_closing(status: int) -> Any:
        with contextlib.suppress(BaseException):  # whatever happens, the process must leave
            close_everything("worker exit")
        return real_exit(status)

    exit_closing.zkstore_wrapped = True  # type: ignore[attr-defined]
    os._exit = exit_closing


def _wrap_signal() -> None:
    """Make a reset of SIGHUP or SIGTERM to the default action (pyspark's, before each task)
    install :func:`_close_and_die` instead: the same death, after the close."""
    if getattr(signal.signal, "zkstore_wrapped", False):
        return

    def signal_closing(signalnum: int | signal.Signals, handler: _Handler) -> _Handler:
        if signalnum in STOP_SIGNALS and handler == signal.SIG_DFL:
            handler = _close_and_die
        return _set_disposition(signalnum, handler)

    signal_closing.zkstore_wrapped = True  # type: ignore[attr-defined]
    signal.signal = signal_closing


def _start_watcher(registry: Registry, hooks: ProcessHooks) -> None:
    def watch() -> None:
        while registry is current_registry():
            time.sleep(WATCH_EVERY)
            try:
                registry.close_idle(current_task_id())
                hooks.poke_if_disarmed(registry)
            except Exception:  # the watcher must outlive one bad close
                logger.exception("resource watcher")

    threading.Thread(target=watch, name="zkstore-resource-watcher", daemon=True).start()


# -- the hooks of this process -----------------------------------------------------------------

_hooks: PerProcess[ProcessHooks] = PerProcess(ProcessHooks)


def process_hooks() -> ProcessHooks:
    """This process's hooks (a forked child gets fresh ones: threads do not survive a fork)."""
    return _hooks.get()
