"""Log lines that repeat while something stays broken, said once per interval with a count.

A ZooKeeper outage makes the daemon fail the same way every second; an operator needs the first
line, a reminder now and then with how many were held back, and the line saying it is over.
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["Throttle"]


class Throttle:
    """At most one line per ``interval`` seconds for each key; the next one says how many of
    that key were held back meanwhile. Thread-safe."""

    def __init__(self, logger: logging.Logger, interval: float = 60.0) -> None:
        self.logger = logger
        self.interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def log(self, key: str, level: int, message: str, *args: object) -> bool:
        """Log ``message`` unless a line of ``key`` went out less than ``interval`` ago;
        returns True if it was logged."""
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                self._held[key] = self._held.get(key, 0) + 1
                return False
            self._last[key] = now
            held = self._held.pop(key, 0)
        if held:
            message += " (%d more like it in the last %.0f s)"
            args = (*args, held, now - last if last is not None else 0.0)
        self.logger.log(level, message, *args)
        return True

    def warning(self, key: str, message: str, *args: object) -> bool:
        return self.log(key, logging.WARNING, message, *args)

    def clear(self, key: str, message: str | None = None, *args: object) -> None:
        """``key`` is fine again: say so (at INFO) if any line of it went out, and reset it."""
        with self._lock:
            was_logged = self._last.pop(key, None) is not None
            self._held.pop(key, None)
        if was_logged and message is not None:
            self.logger.info(message, *args)
