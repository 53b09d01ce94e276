"""A warm JVM taken at first use: each attempt's channel to its daemon, to ask for one once.

An attempt that may use a warm JVM (its job's summary shows no JVM-level setting the warm JVMs
lack) is launched holding nothing of one: its driver gets one end of a Unix socket pair of its
own (``--warm-fd``; :class:`~recovery.shared.jvm_settings.WarmAsk` through its configuration pipe)
and the daemon keeps the other. The first time the job asks for Spark, the driver writes
``take`` on it; the daemon takes a ready JVM for that attempt
(:meth:`~recovery.member.warm_jvms.pool.WarmPool.take_at_first_use`) and answers one line, the
:class:`~recovery.shared.jvm_settings.WarmOffer` with the JVM's standard input and a read
descriptor of its log (``SCM_RIGHTS``), or ``{"none": why}``; then it closes its end. So a
driver takes at most one JVM (the channel answers once), only its own daemon's (nobody else
holds the channel), and a JVM goes to one attempt only (taken out of the pool under its lock).
A job that never asks for Spark leaves the JVMs in the pool. A channel whose attempt is over,
or whose driver closed it, is closed; so are all at the daemon's stop (a driver that asks after
its daemon is gone starts its own JVM).

One thread serves every channel (``selectors``); a take renames and truncates files only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

from recovery.member.warm_jvms.pool import WarmPool
from recovery.shared.jvm_settings import ASK

__all__ = ["WarmAsks"]

logger = logging.getLogger(__name__)


@dataclass
class _Channel:
    job_id: str
    attempt: int
    work_dir: Path
    sock: socket.socket


class WarmAsks:
    """The channels of the attempts launched without a warm JVM that may ask for one."""

    def __init__(self, pool: WarmPool) -> None:
        self.pool = pool
        self._lock = threading.Lock()
        self._channels: dict[int, _Channel] = {}
        self._selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="warm-asks", daemon=True)
        self._thread.start()

    def channel(self, job_id: str, attempt: int, work_dir: Path) -> int:
        """A new channel for the attempt: returns the driver's end (a descriptor the caller
        passes to the driver, then closes); raises OSError."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ours.setblocking(False)
        with self._lock:
            self._channels[ours.fileno()] = _Channel(job_id, attempt, work_dir, ours)
            self._selector.register(ours, selectors.EVENT_READ)
        self._wake()
        return theirs.detach()

    def attempt_over(self, job_id: str, attempt: int) -> None:
        """The attempt's driver is gone (or never started): close its channel."""
        with self._lock:
            found = [
                c for c in self._channels.values() if (c.job_id, c.attempt) == (job_id, attempt)
            ]
        for channel in found:
            self._close(channel)

    def close(self) -> None:
        """The daemon stops: every channel is closed."""
        self._stop.set()
        self._wake()
        self._thread.join(timeout=5.0)
        with self._lock:
            left = list(self._channels.values())
        for channel in left:
            self._close(channel)
        self._selector.close()
        self._wake_read.close()
        self._wake_write.close()

    @property
    def open(self) -> int:
        with self._lock:
            return len(self._channels)

    # -- the thread ----------------------------------------------------------------------------

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_write.send(b"\0")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                events = self._selector.select(timeout=None)
            except (OSError, ValueError):  # closed as the daemon stops
                return
            for key, _ in events:
                if key.fileobj is self._wake_read:
                    with contextlib.suppress(OSError):
                        self._wake_read.recv(4096)
                    continue
                with self._lock:
                    channel = self._channels.get(key.fd)
                if channel is not None:
                    self._serve(channel)

    def _serve(self, channel: _Channel) -> None:
        """Read what the driver wrote: ``take`` is answered (once), anything else or the end
        of the channel closes it."""
        try:
            data = channel.sock.recv(64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data != ASK:
            self._close(channel)
            return
        answer: dict[str, object]
        fds: list[int] = []
        taken = self.pool.take_at_first_use(channel.job_id, channel.attempt, channel.work_dir)
        if isinstance(taken, str):
            answer = {"none": taken}
        else:
            held, log_fd = taken
            answer = {"offer": json.loads(held.offer.to_json())}
            fds = [held.stdin, log_fd]
            logger.info(
                "job %s: attempt %d took warm driver %s (its Spark JVM, pid %d) at first use",
                channel.job_id,
                channel.attempt,
                held.offer.warm_id,
                held.offer.pid,
            )
        try:
            channel.sock.setblocking(True)
            channel.sock.settimeout(5.0)
            socket.send_fds(channel.sock, [json.dumps(answer).encode() + b"\n"], fds)
        except OSError as exc:  # the driver is gone: its attempt's end ends the JVM
            logger.warning(
                "job %s: attempt %d: the warm driver's answer was not delivered: %s",
                channel.job_id,
                channel.attempt,
                exc,
            )
        finally:
            if not isinstance(taken, str):
                os.close(taken[1])
                self.pool.handed(taken[0].offer.warm_id)  # the driver holds its input now
            self._close(channel)

    def _close(self, channel: _Channel) -> None:
        with self._lock:
            if self._channels.pop(channel.sock.fileno(), None) is None:
                return
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(channel.sock)
        channel.sock.close()
