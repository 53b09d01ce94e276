"""kazoo's threading handler, with a ``select`` that costs one system call.

kazoo's connection loop waits on its socket and its wake-up pipe through ``handler.select``
about twice a second while idle, and once per answer while busy. The threading handler's
``select`` (``kazoo.handlers.utils.selector_select``) builds an epoll object, registers both
descriptors and closes it on every call: four system calls and a few Python objects each time,
about a quarter of a kazoo I/O thread's CPU (profiled in every daemon and driver: issue 28).
:func:`poll_select` answers the same question with one ``poll(2)`` (no descriptor limit, unlike
``select(2)``), with the same answer: a descriptor that is readable, hung up or in error is
listed as readable, one that is only writable as writable, and a descriptor that is not open
raises ``ValueError`` as kazoo's does.

It also bounds the TCP connect to one server (``connect_timeout``): kazoo waits up to the whole
session timeout for a server that does not answer (a host cut off drops the SYN silently),
while it gives the handshake after it the session timeout shared among the servers. A client
leaving a silent server for the next one would lose its session's time on the first connect.
"""

from __future__ import annotations

import select
from collections.abc import Sequence
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import fileobj_to_fd

__all__ = ["PollingHandler", "poll_select"]

_READ = select.POLLIN | select.POLLPRI
_WRITE = select.POLLOUT


def poll_select(
    rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any], timeout: float | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """``select.select``'s contract for any descriptor number, in one ``poll(2)``."""
    if timeout is not None:
        if not isinstance(timeout, int | float):
            raise TypeError("timeout must be a number")
        if timeout < 0:
            raise ValueError("timeout must be non-negative")
    masks: dict[int, int] = {}
    objects: dict[int, list[Any]] = {}
    for mask, fileobjs in ((_READ, rlist), (_WRITE, wlist)):
        for fileobj in fileobjs:
            fd = fileobj_to_fd(fileobj)
            masks[fd] = masks.get(fd, 0) | mask
            objects.setdefault(fd, []).append(fileobj)
    poller = select.poll()
    for fd, mask in masks.items():
        poller.register(fd, mask)
    ready = poller.poll(None if timeout is None else timeout * 1000.0)
    readable: list[Any] = []
    writable: list[Any] = []
    for fd, events in ready:
        if events & select.POLLNVAL:
            raise ValueError("Invalid event mask or fd")
        if events & ~_WRITE:  # readable, hung up, in error: the reader finds out which
            readable.extend(objects[fd])
        elif events & _WRITE:
            writable.extend(objects[fd])
    return readable, writable, []


class PollingHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's threading handler (its threads, queues and timeouts) with :func:`poll_select`,
    and a TCP connect of at most ``connect_timeout`` seconds (None: kazoo's own)."""

    def __init__(self, *, connect_timeout: float | None = None) -> None:
        super().__init__()
        self.connect_timeout = connect_timeout

    def select(self, *args: Any, **kwargs: Any) -> tuple[list[Any], list[Any], list[Any]]:
        return poll_select(*args, **kwargs)

    def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        timeout = kwargs.get("timeout")
        if self.connect_timeout is not None and timeout is not None:
            kwargs["timeout"] = min(timeout, self.connect_timeout)
        return super().create_connection(*args, **kwargs)
