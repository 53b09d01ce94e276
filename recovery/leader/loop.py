"""The daemon's single acting thread: one queue of events, and timers.

Kazoo listeners, watches, timers, the threads waiting on driver processes and signal handlers
never act themselves: they put an event on this loop, and the loop's thread (the daemon's main
thread) does every piece of work. Leader work is checked against the :class:`Leadership` it runs
under, which the session listener revokes at once on SUSPENDED.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from zkstore.zookeeper.ops import Fence

__all__ = ["Event", "Leadership", "Loop"]


@dataclass(frozen=True)
class Event:
    """Something for the loop's thread to look at: ``kind`` and an optional ``job_id``."""

    kind: str
    job_id: str | None = None
    data: Any = None


@dataclass
class Leadership:
    """One grant of leadership: the fence of its writes, and whether it lasts."""

    fence: Fence
    _active: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._active.set()

    @property
    def active(self) -> bool:
        return self._active.is_set()

    def revoke(self) -> None:
        self._active.clear()


class Loop:
    """A queue of events plus timers, served by one thread."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Event] = queue.Queue()
        self._timers: list[tuple[float, int, Event]] = []
        self._timer_lock = threading.Lock()
        self._counter = itertools.count()

    def post(self, event: Event) -> None:
        """Hand an event to the loop (safe from any thread, never blocks)."""
        self._queue.put(event)

    def post_at(self, when: float, event: Event) -> None:
        """Post ``event`` at monotonic time ``when``."""
        with self._timer_lock:
            heapq.heappush(self._timers, (when, next(self._counter), event))

    def has_events(self) -> bool:
        """Whether an event waits (a timer not counted): the loop's thread has work to come
        back to."""
        return not self._queue.empty()

    def next_events(self, timeout: float) -> list[Event]:
        """Wait up to ``timeout`` for events (or the next timer); return every one pending."""
        deadline = time.monotonic() + timeout
        with self._timer_lock:
            if self._timers:
                deadline = min(deadline, self._timers[0][0])
        events: list[Event] = []
        try:
            events.append(self._queue.get(timeout=max(0.0, deadline - time.monotonic())))
            while True:
                events.append(self._queue.get_nowait())
        except queue.Empty:
            pass
        now = time.monotonic()
        with self._timer_lock:
            while self._timers and self._timers[0][0] <= now:
                events.append(heapq.heappop(self._timers)[2])
        return events
