"""ZooKeeper's time: what a leader decides by, whatever its own host's clock says.

A schedule's windows are instants: a leader whose clock is an hour off would fire them an hour
early or late; so would it expire results, back off retries and time out starts (issue 60.1).
Every time a leader writes or decides by is ZooKeeper's. ZooKeeper stamps every write with its
own clock (the ``mtime`` of a node, set by the ZooKeeper leader when it commits the write, the
same for every client). :class:`ServerClock` writes one node of its own, ``R/leader/clock``, and
takes the difference between that stamp and the middle of its local send and answer times as the
offset of ZooKeeper's clock from the local one (known to within half the round trip). Its
:meth:`~ServerClock.now` is the local clock plus that offset: measured again when a minute old,
so that a clock stepped or drifting meanwhile is followed. A local clock off by more than a
second is said (once a minute), since everything else on the host (its logs, its drivers' times)
is off as much.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from zkstore.errors import HandleExists, HandleNotFound, StoreUnavailable
from zkstore.zookeeper.throttle import Throttle

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["REFRESH", "WARN_OFF_BY", "ServerClock"]

logger = logging.getLogger(__name__)

#: seconds a measured offset is used before it is measured again
REFRESH = 60.0
#: a local clock further off than this (beyond the measurement's own uncertainty) is said
WARN_OFF_BY = 1.0


class ServerClock:
    """ZooKeeper's time, read through the local clock and a measured offset. Thread-safe."""

    def __init__(
        self,
        zk: ZooKeeper,
        path: str,
        *,
        refresh: float = REFRESH,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.zk = zk
        self.path = path
        self.refresh = refresh
        self._wall = wall
        self._monotonic = monotonic
        self._lock = threading.Lock()
        #: (offset in seconds, its uncertainty, the monotonic time it was measured)
        self._measured: tuple[float, float, float] | None = None
        self._throttle = Throttle(logger)

    def now(self) -> datetime:
        """ZooKeeper's time now (measuring the offset first if it is stale). Outages raise,
        as any write's: a leader that cannot reach ZooKeeper decides nothing."""
        return datetime.fromtimestamp(self._wall() + self.offset(), UTC)

    def recent(self) -> datetime:
        """ZooKeeper's time now by the offset last measured, measured again only when stale
        and ZooKeeper answers (for a thread that must not stop on an outage: the notifier)."""
        try:
            return self.now()
        except StoreUnavailable:
            with self._lock:
                measured = self._measured
            if measured is None:
                raise
            return datetime.fromtimestamp(self._wall() + measured[0], UTC)

    def moment(self) -> datetime:
        """ZooKeeper's time now, to the millisecond (what a typed record keeps of it: read
        back, it equals the one written)."""
        now = self.now()
        return now.replace(microsecond=now.microsecond // 1000 * 1000)

    def stamp(self) -> str:
        """ZooKeeper's time now in the timestamp format of zkstore (what a leader writes in its
        records: a job's status, its history, a result's ``finished``)."""
        return self.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def offset(self) -> float:
        """Seconds to add to the local clock to read ZooKeeper's (measured if stale)."""
        with self._lock:
            measured = self._measured
            if measured is None or self._monotonic() - measured[2] >= self.refresh:
                measured = self._measure()
                self._measured = measured
            return measured[0]

    def _measure(self) -> tuple[float, float, float]:
        sent = self._wall()
        try:
            stat = self.zk.set(self.path, b"")
        except HandleNotFound:  # the first measurement of this cluster: made once
            with contextlib.suppress(HandleExists):
                self.zk.create(self.path, b"", makepath=True)
            sent = self._wall()
            stat = self.zk.set(self.path, b"")
        answered = self._wall()
        offset = stat.mtime / 1000.0 - (sent + answered) / 2
        uncertainty = (answered - sent) / 2 + 0.001  # the stamp is in whole milliseconds
        if abs(offset) - uncertainty > WARN_OFF_BY:
            self._throttle.warning(
                "off",
                "this host's clock is %.1f s %s ZooKeeper's: what a leader decides (schedule "
                "windows, retries, retention) follows ZooKeeper's; the host's own logs and its "
                "drivers' times do not (check its time synchronization)",
                abs(offset),
                "behind" if offset > 0 else "ahead of",
            )
        else:
            self._throttle.clear("off", "this host's clock agrees with ZooKeeper's again")
        return offset, uncertainty, self._monotonic()
