"""A watch that stays armed, built on the deadline-bound session of :mod:`zkstore.zookeeper.zk`.

Why not kazoo's ``DataWatch``/``ChildrenWatch``: ``DataWatch`` retries its reads forever
(``KazooRetry(max_tries=None)``), so creating one while ZooKeeper is unreachable hangs the caller,
and both raise kazoo's own exceptions. ``ChildrenWatch`` stops for good when its node is deleted.

Here every read is deadline-bound and raises only zkstore errors; a one-shot ZooKeeper watch is
re-armed after it fires, and after a reconnect (kazoo fires pending watches with a session event
on SUSPENDED instead of restoring them). ``on_change`` runs on kazoo's threads after the first
call: like every kazoo callback it must only hand the news over (set an event, enqueue).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from zkstore.errors import AccessDenied, HandleNotFound, StoreUnavailable

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["Listing", "NodeWatch", "WatchedValue"]

logger = logging.getLogger(__name__)

_UNREAD = object()


class Listing(NamedTuple):
    """A node's sorted children and their version (its ``cversion``: one more for each child
    created or deleted), as one listing read them, and the node's creation (``czxid``: a
    node deleted and made again counts its version from 0 again)."""

    names: list[str]
    version: int
    created: int


#: What a watch reports: the node's data or its children (or their :class:`Listing`), ``None``
#: while the node does not exist.
WatchedValue = bytes | list[str] | Listing | AccessDenied | None
_DENIED = ("denied",)


class NodeWatch:
    """Report ``path``'s data (or, with ``children``, its sorted children) whenever it changes.

    With ``listing`` (and ``children``), the value is a :class:`Listing`: what the children
    were and how many creations and deletions made them.

    ``on_change(value)`` is called once from the creating thread (which raises
    :class:`~zkstore.errors.StoreUnavailable` if the first read fails; with ``report_first``
    False, that first read only arms the watch: for a caller that reads the value itself after
    the watch is set, so that no change can fall in between), then from kazoo's threads each
    time the value changed. A read that fails on kazoo's threads is retried when the session
    is CONNECTED again; nothing ever raises there. :meth:`stop` ends the reports.
    """

    def __init__(
        self,
        zk: ZooKeeper,
        path: str,
        on_change: Callable[[WatchedValue], None],
        *,
        children: bool = False,
        listing: bool = False,
        report_first: bool = True,
        denied: bool = False,
    ) -> None:
        self._zk = zk
        self.path = path
        self._on_change = on_change
        self._children = children
        self._listing = listing
        self._report_first = report_first
        #: a node that may not be read is reported as its AccessDenied (else it raises)
        self._denied = denied
        self._lock = threading.Lock()
        self._stopped = False
        self._last: Any = _UNREAD
        #: whether the last read found no node (a record watched: nothing to read)
        self.absent = False
        zk.add_listener(self._on_state)
        try:
            self._arm()
        except BaseException:
            zk.remove_listener(self._on_state)
            raise

    def stop(self, *, forget: bool = True) -> None:
        """No report starts after this returns, and the watches still set are taken back
        (a watch of a node never made again, such as a finished attempt's ``end`` node, would
        otherwise hold this object for the life of the session). ``forget=False``: left to
        the session, for a process whose session ends with the watch (a driver's: no request
        for what its exit drops anyway)."""
        with self._lock:
            self._stopped = True
        self._zk.remove_listener(self._on_state)
        if not forget:
            return
        self._zk.forget_watches({self.path: self._fired})
        if self._children:
            self._zk.forget_watches({self.path: self._fired}, children=True)

    def _read(self) -> tuple[WatchedValue, Any]:
        """The current value and what identifies it (for children, also the count of children
        changes, so that a child deleted and made again is a change), with a one-shot watch set
        on whatever tells the next change."""
        while True:
            if self._children:
                try:
                    names, stat = self._zk.children_and_stat(self.path, watch=self._fired)
                    if self._listing:
                        listed = Listing(sorted(names), stat.cversion, stat.czxid)
                        return listed, (stat.czxid, stat.cversion)
                    return sorted(names), (stat.czxid, stat.cversion)
                except HandleNotFound:
                    pass
            # A watched record is absent most of the time (a cancel, an end, a control object):
            # one request tells so and watches for its creation; its data is read only if it is
            # there (both watches are one watcher: it fires once per change).
            try:
                self.absent = self._zk.exists(self.path, watch=self._fired) is None
            except AccessDenied as exc:  # a server that checks READ on exists (3.9)
                if not self._denied:
                    raise
                return exc, _DENIED
            if self.absent:
                return None, None
            if self._children:
                continue  # it appeared after the listing failed: list it
            try:
                data, _ = self._zk.get(self.path, watch=self._fired)
                return data, data
            except HandleNotFound:
                continue  # deleted in between: look again
            except AccessDenied as exc:
                if not self._denied:
                    raise
                return exc, _DENIED  # its exists watch is set: a change is still reported

    def _arm(self) -> None:
        with self._lock:
            if self._stopped:
                return
            value, identity = self._read()
            if identity == self._last:
                return
            first, self._last = self._last is _UNREAD, identity
            if self._report_first or not first:
                self._on_change(value)

    def _rearm_quietly(self) -> None:
        try:
            self._arm()
        except StoreUnavailable as exc:
            logger.debug("watch on %s not re-armed (%s): retried on reconnect", self.path, exc)

    def _fired(self, event: Any) -> None:
        # A session event (type NONE) consumed the watch: _on_state re-arms on CONNECTED.
        if getattr(event, "type", None) != "NONE":
            self._rearm_quietly()

    def _on_state(self, state: str) -> None:
        # Kazoo's I/O thread must not wait on ZooKeeper: re-arm from a thread of kazoo's handler.
        if state == "CONNECTED" and not self._stopped:
            self._zk.kazoo.handler.spawn(self._rearm_quietly)
