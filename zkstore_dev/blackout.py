"""TCP proxies in front of ZooKeeper servers that can take every server away at once.

Restarting a whole ensemble takes its JVMs' start-up and an election (several seconds here), so
it cannot produce a short full outage. :class:`Blackout` can: clients connect to its loopback
ports, and :meth:`Blackout.cut` closes every connection and refuses new ones until
:meth:`Blackout.restore`, which is what clients see when every server is down. (The servers
themselves keep running, so sessions keep ageing on their side: like a network partition.)
:meth:`Blackout.silence` makes one proxy a server gone silent instead: its connections stay
open but carry nothing either way (a cut that drops packets), and it refuses new ones.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Sequence

from zkstore.closing import Closeable
from zkstore.dev.embedded import free_port

__all__ = ["Blackout"]


class _Proxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self.silent = threading.Event()
        self._pumping = 0

    @property
    def busy(self) -> bool:
        """Whether a connection through this proxy is open."""
        with self._lock:
            return self._pumping > 0

    def silence(self) -> None:
        self.silent.set()
        self._close_listener()

    def open(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by cut()
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._connections += [client, server]
                self._pumping += 2
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if not self.silent.is_set():  # silent: dropped, as a cut drops packets
                    sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
        with self._lock:
            self._pumping -= 1

    def _close_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):  # wakes the accept() blocked on it (Linux)
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()

    def close(self) -> None:
        self._close_listener()
        self.silent.clear()
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()


class Blackout(Closeable):
    """One proxy per ``host:port`` of ``connect_string``; use :attr:`connect_string`."""

    def __init__(self, connect_string: str) -> None:
        targets: Sequence[tuple[str, int]] = [
            (host, int(port))
            for host, _, port in (item.rpartition(":") for item in connect_string.split(","))
        ]
        self._proxies = [_Proxy(target) for target in targets]
        for proxy in self._proxies:
            proxy.open()

    @property
    def connect_string(self) -> str:
        return ",".join(f"127.0.0.1:{p.port}" for p in self._proxies)

    def cut(self) -> None:
        """Drop every connection and refuse new ones."""
        for proxy in self._proxies:
            proxy.close()

    def restore(self) -> None:
        for proxy in self._proxies:
            if proxy.silent.is_set():
                proxy.close()
            proxy.open()

    def silence(self, index: int) -> None:
        """Proxy ``index`` goes silent (see the module) until :meth:`restore`."""
        self._proxies[index].silence()

    def busy(self) -> list[int]:
        """The indices of the proxies with an open connection."""
        return [n for n, proxy in enumerate(self._proxies) if proxy.busy]

    def cut_for(self, seconds: float) -> float:
        """An outage of ``seconds``: cut, hold, restore; returns how long it lasted."""
        start = time.monotonic()
        self.cut()
        time.sleep(seconds)
        self.restore()
        return time.monotonic() - start

    def close(self) -> None:
        self.cut()
