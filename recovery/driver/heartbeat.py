"""The driver's gate on heartbeat writes: ``ctx.heartbeat()`` costs a clock read, not a write.

``ctx.heartbeat()`` calls :meth:`HeartbeatGate.beat`, from any thread, as often as the
job likes; the driver's monitor thread (which already looks every 0.1 s) calls
:meth:`HeartbeatGate.due` and, when it says so, writes the heartbeat node
(:func:`zkstore.lifecycle.lifecycle_ops.heartbeat_ops`, fenced on the attempt), then
:meth:`HeartbeatGate.written`. A write goes out only for a job with a progress timeout, only if
the job beat since the last write, at most once per :func:`~zkstore.lifecycle.attempt_limits.
heartbeat_interval`, and not when a checkpoint was written within that interval (a checkpoint
is progress the leader sees already). So ZooKeeper carries at most one small write per job every
5 to 60 seconds, whatever the job does.

A beat deliberately comes from the job's own code: the monitor thread never beats by itself,
or a deadlocked job would look alive.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from zkstore.lifecycle.attempt_limits import MIN_HEARTBEAT_INTERVAL, heartbeat_interval

__all__ = ["HeartbeatGate"]


@dataclass
class HeartbeatGate:
    """Thread-safe; times are ``time.monotonic()`` seconds given by the caller."""

    progress_timeout: float | None
    #: the least time between writes: the product's, lower only where the tests lowered it
    least_interval: float = MIN_HEARTBEAT_INTERVAL
    beats: int = 0
    _last_beat: float | None = None
    _last_write: float | None = None
    _last_checkpoint: float | None = None
    _written_beats: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def interval(self) -> float | None:
        """The least time between two writes (None: this job writes none)."""
        if self.progress_timeout is None:
            return None
        return heartbeat_interval(self.progress_timeout, self.least_interval)

    def beat(self, now: float) -> None:
        """The job made progress (``ctx.heartbeat()``)."""
        with self._lock:
            self.beats += 1
            self._last_beat = now

    def checkpointed(self, now: float) -> None:
        """A checkpoint was written: progress the leader sees without a heartbeat."""
        with self._lock:
            self._last_checkpoint = now

    def due(self, now: float) -> bool:
        """Whether a heartbeat write should go out now."""
        interval = self.interval
        with self._lock:
            if interval is None or self._last_beat is None or self.beats == self._written_beats:
                return False
            last_progress_seen = max(
                (t for t in (self._last_write, self._last_checkpoint) if t is not None),
                default=None,
            )
            return last_progress_seen is None or now - last_progress_seen >= interval

    def written(self, now: float, beats: int) -> None:
        """A heartbeat carrying ``beats`` (the count read before the write) is in ZooKeeper."""
        with self._lock:
            self._last_write = now
            self._written_beats = max(self._written_beats, beats)
