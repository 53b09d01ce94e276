"""The leader's single thread: one queue of events and actions, fenced by leadership.

Kazoo listeners, watches, timers and a job's own threads never act themselves: they put an event
on this loop, and the loop's thread (the daemon's main thread) does every piece of leader work.
An action is stamped with the leadership it was scheduled under; if that leadership has ended by
the time the action comes up, it is dropped.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zkstore.ops import Fence

logger = logging.getLogger(__name__)


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


class LeaderContext:
    """What a job's own threads get once leadership is granted: a fenced way into the loop.

    Per-job coordinators exist before leadership; when it is granted they receive a context
    (lazily, as Flink's operator coordinators do), and any thread may then hand work to the
    leader's thread through :meth:`execute`. Work handed over under a leadership that has ended
    is dropped, never run.
    """

    def __init__(self, loop: Loop, leadership: Leadership) -> None:
        self._loop = loop
        self.leadership = leadership

    @property
    def active(self) -> bool:
        return self.leadership.active

    def execute(self, action: Callable[[], None]) -> bool:
        """Run ``action`` on the leader's thread under this leadership; False if it has ended."""
        if not self.leadership.active:
            return False
        self._loop.call(action, self.leadership)
        return True


class Loop:
    """A queue of events and fenced actions, plus timers, served by one thread."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Event | None, Callable[[], None] | None, Leadership | None]]
        self._queue = queue.Queue()
        self._timers: list[tuple[float, int, Event]] = []
        self._timer_lock = threading.Lock()
        self._counter = itertools.count()
        self.dropped = 0

    def post(self, event: Event) -> None:
        """Hand an event to the loop (safe from any thread, never blocks)."""
        self._queue.put((event, None, None))

    def call(self, action: Callable[[], None], leadership: Leadership) -> None:
        """Run ``action`` on the loop's thread if ``leadership`` is still active by then."""
        self._queue.put((None, action, leadership))

    def post_at(self, when: float, event: Event) -> None:
        """Post ``event`` at monotonic time ``when``."""
        with self._timer_lock:
            heapq.heappush(self._timers, (when, next(self._counter), event))

    def next_events(self, timeout: float) -> list[Event]:
        """Wait up to ``timeout`` for work; run due fenced actions; return the events.

        Actions run here, on the calling thread, in order with the events around them.
        """
        deadline = time.monotonic() + timeout
        with self._timer_lock:
            if self._timers:
                deadline = min(deadline, self._timers[0][0])
        events: list[Event] = []
        try:
            item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            while True:
                event, action, leadership = item
                if event is not None:
                    events.append(event)
                elif action is not None and leadership is not None:
                    self._run(action, leadership)
                item = self._queue.get_nowait()
        except queue.Empty:
            pass
        now = time.monotonic()
        with self._timer_lock:
            while self._timers and self._timers[0][0] <= now:
                events.append(heapq.heappop(self._timers)[2])
        return events

    def _run(self, action: Callable[[], None], leadership: Leadership) -> None:
        if not leadership.active:
            self.dropped += 1
            logger.debug("dropped an action of an ended leadership: %r", action)
            return
        action()
