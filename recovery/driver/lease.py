"""How long a driver may go on without hearing from ZooKeeper: a lease on its own session.

ZooKeeper expires a session no earlier than one session timeout ``T`` after the server last heard
from the client: the leader rounds expiry times *up* to its next tick, and while the ensemble
has no quorum no session expires at all (a newly elected leader gives every session a full ``T``
again). The server cannot hear a request before it is sent, so if this process records the
moment it *sent* each heartbeat that was answered, its session cannot expire before that moment
plus ``T``. The lease ends ``margin`` earlier: the driver must be gone, its Spark JVM killed,
before another attempt could take the job.

Why not count from SUSPENDED, as a quarter of ``T`` after it: kazoo declares a silently dead
connection SUSPENDED only when a heartbeat stays unanswered, up to two thirds of ``T`` after the
server last heard from us, which leaves only ``T/12`` of margin in that case (0.8 s at 10 s); when
the servers are simply down the connection is refused at once and ``T/4`` is far more cautious
than needed. Counting from the last answered heartbeat is safer in the first case and lets a
driver ride out a longer full outage in the second.

Each heartbeat is a ``sync`` and then a read of the driver's own ``running`` node: if it is gone
or belongs to another session (kazoo silently opened a new session after the old one expired),
the lease is over at once. The ``sync`` is what makes an answer mean the session lives: the
server that expires sessions is the ensemble's leader, and a follower cut off from it answers
reads (and pings) on its own until it notices, up to ``syncLimit`` ticks later, while the
leader hears nothing of the session and expires it on time. A ``sync`` is answered only after
the leader has seen it. (Seen in a chaos run: a follower split from the other two answered a
driver's reads for 4.9 s after the split; the leader expired the driver's 6-s session, the next
attempt started, and the driver, its lease counted from those answers, wrote for 0.7 s more.)

A server that goes silent (cut off from this host, its packets dropped while the other servers
answer) is left for the next one as soon as a quarter of the session timeout passes without an
answer (:data:`SILENT`): the heartbeats themselves would keep kazoo on it until the lease ran out,
since kazoo counts every request as a ping and declares a connection dead only when a ping goes
unanswered (:meth:`zkstore.zookeeper.zk.ZooKeeper.drop_connection`). Half the session timeout (two
thirds of the lease) is then left to connect to another server.

The timeout is the one the server granted (ZooKeeper grants 2 to 20 ticks, whatever was asked
for), as captured on every connect by
:attr:`zkstore.zookeeper.zk.ZooKeeper.granted_session_timeout`.
"""

from __future__ import annotations

import logging
import threading
import time

from zkstore.errors import ZkStoreError
from zkstore.zookeeper.zk import ZooKeeper, is_own_ephemeral

__all__ = ["HEARTBEAT", "RETRY", "SILENT", "SessionLease", "default_margin"]

logger = logging.getLogger(__name__)

HEARTBEAT = 0.5
#: After an unanswered heartbeat, the next goes out this soon: renew as soon as we reconnect.
RETRY = 0.1
#: No answer for this share of the session timeout: the server is left for the next one.
SILENT = 1 / 4


def default_margin(session_timeout: float) -> float:
    """A quarter of the session timeout: time to kill the Spark JVM and exit, the monitor's
    polling and scheduling delays under load. (Three times the worst-case margin of a quarter of
    the timeout counted from SUSPENDED, which is a twelfth.)"""
    return session_timeout / 4


class SessionLease:
    """Heartbeats on ``path`` from a daemon thread; :meth:`remaining` says how long is left.

    Thread-safe. The lease starts from a known answer: the one :meth:`start` is told of, or a
    heartbeat it makes first.
    """

    def __init__(
        self,
        zk: ZooKeeper,
        path: str,
        *,
        margin: float | None = None,
        interval: float = HEARTBEAT,
    ) -> None:
        self.zk = zk
        self.path = path
        self._margin = margin
        self.interval = interval
        self._acknowledged = time.monotonic()
        self._left_server_at = float("-inf")
        self._lost = False
        self._stopped = threading.Event()

    @property
    def length(self) -> float:
        """How long an answered heartbeat lasts: the session timeout the server granted (it
        may be less than the one asked for), less the margin."""
        granted = self.zk.granted_session_timeout
        return granted - (default_margin(granted) if self._margin is None else self._margin)

    def start(self, *, answered: float | None = None) -> SessionLease:
        """Start the heartbeats. ``answered``: when a request that proves the session (the
        creation of ``path``, an ephemeral node of this session) was sent, its answer received;
        the lease counts from it. Without it, a heartbeat first."""
        if answered is None:
            self.beat()
        else:
            self._acknowledged = answered  # not this object's making, later: from the send
        threading.Thread(target=self._run, name="session-lease", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def beat(self) -> bool:
        """One heartbeat; True if it was answered (then the lease is renewed from its send time)."""
        sent = time.monotonic()
        wait = max(self.interval, RETRY)
        try:
            self.zk.sync(self.path, timeout=wait)  # answered through the leader only
            stat = self.zk.exists(self.path, timeout=wait)
        except ZkStoreError as exc:
            logger.debug("heartbeat unanswered: %s", exc)
            return False
        if not is_own_ephemeral(stat, self.zk):
            self._lost = True  # our session's node is gone: another attempt may start now
            return False
        self._acknowledged = max(self._acknowledged, sent)
        return True

    @property
    def lost(self) -> bool:
        """True once a heartbeat found the node gone or owned by another session."""
        return self._lost

    def remaining(self) -> float:
        """Seconds until the lease ends (negative once it has, or once it was lost)."""
        if self._lost:
            return float("-inf")
        return self.time_left()

    def time_left(self) -> float:
        """Seconds until the lease ends by time alone, lost or not: how long the session is
        known to live after the last answered heartbeat. (A driver's own outcome write deletes
        its node, which loses the lease; reading the outcome back still has this long.)"""
        return self._acknowledged + self.length - time.monotonic()

    @property
    def silent_after(self) -> float:
        """How long without an answer before the server is left for the next one."""
        return max(self.zk.granted_session_timeout * SILENT, 2 * self.interval)

    def leave_silent_server(self) -> bool:
        """Drop the connection if no heartbeat was answered for :attr:`silent_after` (since
        the last answered one, or the last drop) while kazoo still takes it for alive; True if
        it did."""
        now = time.monotonic()
        silent_for = now - max(self._acknowledged, self._left_server_at)
        if silent_for < self.silent_after or not self.zk.connected:
            return False
        if not self.zk.drop_connection():
            return False
        self._left_server_at = now
        logger.warning("no answer from ZooKeeper for %.1f s: trying another server", silent_for)
        return True

    def _run(self) -> None:
        wait = self.interval
        while not self._stopped.wait(wait):
            if self.beat():
                wait = self.interval
            else:
                wait = min(RETRY, self.interval)
                self.leave_silent_server()
