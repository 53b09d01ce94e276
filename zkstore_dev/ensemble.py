"""A three-server ZooKeeper ensemble on loopback ports, for the chaos tests and the outage tests.

Each member is ``QuorumPeerMain`` from the pyspark wheel's jars (the same launcher as
:class:`~zkstore.dev.embedded.EmbeddedZooKeeper`), with its own ``myid``, data directory and free
127.0.0.1 ports for clients, quorum traffic and leader election. Any member can be stopped,
crashed (SIGKILL), paused (SIGSTOP) and brought back; :meth:`ZooKeeperEnsemble.leader` asks
every member with the ``srvr`` four-letter word which one leads.

The ensemble serves while a majority (two of three) is up and agrees on a leader. Every member
dies with the process that started it.

Its members can also run on hosts of their own (``hosts``: each one's address and the command
prefix that runs a process there, ``ip netns exec NAME``): then each serves on its host's
address at ZooKeeper's usual ports (2181, 2888, 3888), and the network between them can be cut.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from zkstore.closing import Closeable
from zkstore.dev.embedded import EmbeddedZooKeeper, four_letter_word, free_port
from zkstore.errors import StoreUnavailable

__all__ = ["FOLLOWER", "LEADER", "PORTS", "QUORUM_MAIN", "ZooKeeperEnsemble"]

logger = logging.getLogger(__name__)

QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
LEADER = "leader"
FOLLOWER = "follower"

#: ZooKeeper's usual ports (client, quorum, election): a member on a host of its own uses them.
PORTS = (2181, 2888, 3888)

_MODE_RE = re.compile(r"^Mode: (\w+)", re.MULTILINE)


class ZooKeeperEnsemble(Closeable):
    """``size`` ZooKeeper servers forming one ensemble; members are numbered from 1.

    ``tick_time_ms`` is ZooKeeper's tick: sessions may last 2 to 20 ticks (the default 2000 ms
    allows the daemon's default 10 s session), and a member that loses the leader for
    ``sync_limit`` ticks starts an election.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        tick_time_ms: int = 2000,
        work_dir: str | Path | None = None,
        init_limit: int = 10,
        sync_limit: int = 5,
        short_jvm: bool = True,
        hosts: Sequence[tuple[str, Sequence[str]]] = (),
    ) -> None:
        if hosts:
            size = len(hosts)
        if size < 1:
            raise ValueError("an ensemble needs at least one server")
        self._owns_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="zkstore-ensemble-"))
        self.tick_time_ms = tick_time_ms
        where = {n: hosts[n - 1] if hosts else ("127.0.0.1", ()) for n in range(1, size + 1)}
        peers = {n: PORTS if hosts else (0, free_port(), free_port()) for n in where}
        quorum = [
            f"server.{n}={where[n][0]}:{quorum_port}:{election_port}"
            for n, (_, quorum_port, election_port) in peers.items()
        ]
        self.members: dict[int, EmbeddedZooKeeper] = {}
        for n in peers:
            member = EmbeddedZooKeeper(
                port=peers[n][0],  # 0: a free one of its choosing
                address=where[n][0],
                command_prefix=where[n][1],
                data_dir=self.work_dir / f"zk{n}",
                tick_time_ms=tick_time_ms,
                max_session_timeout_ms=20 * tick_time_ms,
                extra_config=[f"initLimit={init_limit}", f"syncLimit={sync_limit}", *quorum],
                main_class=QUORUM_MAIN,
                short_jvm=short_jvm,
            )
            (member.data_dir / "data").mkdir(parents=True, exist_ok=True)
            (member.data_dir / "data" / "myid").write_text(f"{n}\n")
            self.members[n] = member

    @property
    def connect_string(self) -> str:
        return ",".join(m.connect_string for m in self.members.values())

    # -- the whole ensemble --------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> ZooKeeperEnsemble:
        """Start every member and wait until the ensemble serves with one leader."""
        for member in self.members.values():
            member.start(timeout=timeout)
        self.wait_serving(timeout=timeout)
        return self

    def close(self) -> None:
        for member in self.members.values():
            member.kill()
        if self._owns_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def mode(self, n: int) -> str | None:
        """``leader``, ``follower`` (``standalone``), or None: down, paused, or not serving."""
        member = self.members[n]
        if not member.running:
            return None
        with contextlib.suppress(OSError):
            match = _MODE_RE.search(four_letter_word(member.address, member.port, "srvr", 0.5))
            return match.group(1) if match else None
        return None

    def modes(self) -> dict[int, str | None]:
        return {n: self.mode(n) for n in self.members}

    def leader(self) -> int | None:
        """The number of the member that leads now, if exactly one does."""
        leaders = [n for n, mode in self.modes().items() if mode == LEADER]
        return leaders[0] if len(leaders) == 1 else None

    def followers(self) -> list[int]:
        return [n for n, mode in self.modes().items() if mode == FOLLOWER]

    def wait_serving(self, timeout: float = 60.0) -> int:
        """Wait until one leader leads and every running member serves; returns the leader."""
        end = time.monotonic() + timeout
        while True:
            modes = {n: m for n, m in self.modes().items() if self.members[n].running}
            leaders = [n for n, mode in modes.items() if mode == LEADER]
            if len(leaders) == 1 and all(mode is not None for mode in modes.values()):
                return leaders[0]
            if time.monotonic() > end:
                raise StoreUnavailable(
                    f"ZooKeeper ensemble not serving within {timeout:g} s: modes {modes}"
                )
            time.sleep(0.1)

    # -- one member ----------------------------------------------------------------------------

    def start_member(self, n: int, timeout: float = 60.0) -> None:
        self.members[n].start(timeout=timeout)

    def stop_member(self, n: int) -> None:
        """Stop member ``n`` cleanly (SIGTERM); its data stays for :meth:`start_member`."""
        self.members[n].stop()

    def kill_member(self, n: int) -> None:
        """Crash member ``n`` (SIGKILL); its data stays for :meth:`start_member`."""
        self.members[n].kill()

    def pause_member(self, n: int) -> None:
        """Freeze member ``n`` (SIGSTOP): its sockets stay open but nothing answers."""
        self.members[n].signal(signal.SIGSTOP)

    def resume_member(self, n: int) -> None:
        self.members[n].signal(signal.SIGCONT)

    def log_tail(self, n: int, lines: int = 20) -> str:
        return self.members[n].log_tail(lines)
