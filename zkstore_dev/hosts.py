"""Hosts on one machine that really fail: network namespaces behind a router, and the network's
faults between them (Linux, root, iproute2's ``ip``; nothing else).

Each host is a network namespace with one address of its own (``10.X.<n>.2``), linked to a
router namespace by a veth pair; the router forwards between them, and this process reaches every
host through one more link of the router's (a route to ``10.X.0.0/16`` on that link is all it
adds here). Processes are started inside a host with :meth:`Host.command` (``ip netns exec
NAME``, which keeps the pid: the process's own ``/proc`` entries, signals and parent-death
signal apply as on the machine itself). Only the network is a host's own: processes share the
machine's filesystem, clock, pids and boot, as a host's processes would share its own.

The faults are the router's rules, so a cut drops packets silently and touches no process:
``blackhole`` rules for the forwarded packets of a pair, one way or both, or of a host to and
from everybody (this process included). :meth:`Network.isolate` (a host from everybody, or from
some hosts), :meth:`Network.one_way` (one direction of a pair), :meth:`Network.flap` (a host cut
and restored every ``period`` seconds until healed) and :meth:`Network.heal` (every cut
restored at once).

Cleanup: :meth:`Network.close` kills every process left in its namespaces and deletes them and
its links, whatever happened before; a :class:`Network` that is started first removes what a
killed earlier run left (its namespaces and links are named after the pid that made them,
``zkp<pid><letter>...``, and removed only once that process is gone: another run of this machine
keeps its own). :func:`unavailable` says in one line why namespaces cannot be made here.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Self

from recovery.shared.processes import exists
from zkstore.closing import Closeable

__all__ = [
    "PREFIX",
    "Cut",
    "Host",
    "Network",
    "NetworkError",
    "ip",
    "remove_leftovers",
    "unavailable",
]

logger = logging.getLogger(__name__)

PREFIX = "zkp"
#: Names this module makes: ``zkp<pid><letter>`` (the link here) and ``zkp<pid><letter>-<host>``
#: (the namespaces, the router's ``...-router``).
_NAME = re.compile(rf"^{PREFIX}(\d+)([a-z])(-[\w.-]+)?$")
#: The second octets tried for a network's ``10.X.0.0/16``; one overlapping an address or a route
#: of this machine is skipped.
_OCTETS = range(160, 250)
#: The router's rules of cuts are numbered from here (before its ``main`` table's, 32766).
_FIRST_RULE = 1000
_letters = itertools.cycle("abcdefghijklmnopqrstuvwxyz")
_letters_lock = threading.Lock()


def unavailable() -> str | None:
    """Why network namespaces cannot be made here (one line), or None if they can."""
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    return None


class NetworkError(RuntimeError):
    """An ``ip`` command failed: its command line and what it said."""


def ip(*args: str, check: bool = True) -> str:
    """Run ``ip ARGS`` and return its output; :class:`NetworkError` if it fails and ``check``."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)
    if check and done.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


@dataclass(frozen=True)
class Host:
    """One host: its name in the harness, its namespace and its address."""

    name: str
    netns: str
    address: str

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host (the process keeps the pid it is started with)."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def pids(self) -> list[int]:
        """Every process in this host's namespace now."""
        return sorted(int(p) for p in ip("netns", "pids", self.netns, check=False).split())


@dataclass
class Cut:
    """Rules of the router in force: :meth:`restore` removes them (once)."""

    network: Network
    description: str
    rules: list[int] = field(default_factory=list)

    def restore(self) -> None:
        self.network._remove(self.rules)
        self.rules = []


class Network(Closeable):
    """Hosts named ``names``, each in its own namespace; :meth:`start` makes them."""

    def __init__(self, names: Sequence[str]) -> None:
        if len(set(names)) != len(names) or not names:
            raise ValueError(f"host names must be given and distinct: {names}")
        with _letters_lock:
            self.tag = f"{PREFIX}{os.getpid()}{next(_letters)}"
        self.names = list(names)
        self.router = f"{self.tag}-router"
        self.hosts: dict[str, Host] = {}
        self.subnet: ipaddress.IPv4Network | None = None
        self._made: list[str] = []
        self._lock = threading.Lock()
        self._rules: set[int] = set()
        self._next_rule = _FIRST_RULE
        self._flaps: list[tuple[threading.Thread, threading.Event]] = []

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    # -- making and removing -------------------------------------------------------------------

    def start(self) -> Self:
        """Make the router, this process's link to it and every host; remove first what dead
        runs left. On any failure, whatever was made is removed again."""
        why = unavailable()
        if why is not None:
            raise NetworkError(why)
        remove_leftovers()
        try:
            self._make_router()
            for n, name in enumerate(self.names, start=1):
                self._make_host(n, name)
        except BaseException:
            self.close()
            raise
        return self

    def _namespace(self, name: str) -> None:
        ip("netns", "add", name)
        self._made.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def _make_router(self) -> None:
        self._namespace(self.router)
        ip("netns", "exec", self.router, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward")
        ip("link", "add", self.tag, "type", "veth", "peer", "name", "outside", "netns", self.router)
        ip("-n", self.router, "link", "set", "outside", "up")
        ip("link", "set", self.tag, "up")
        for octet in _free_octets():
            subnet = ipaddress.IPv4Network(f"10.{octet}.0.0/16")
            router, here = f"10.{octet}.0.1", f"10.{octet}.0.2"
            ip("-n", self.router, "addr", "add", f"{router}/24", "dev", "outside")
            ip("addr", "add", f"{here}/24", "dev", self.tag)
            try:  # the claim: another run that chose the same octet meanwhile holds the route
                ip("route", "add", str(subnet), "via", router, "dev", self.tag)
            except NetworkError:
                ip("addr", "del", f"{here}/24", "dev", self.tag, check=False)
                ip("-n", self.router, "addr", "del", f"{router}/24", "dev", "outside", check=False)
                continue
            self.subnet = subnet
            return
        raise NetworkError("no free 10.X.0.0/16 for the hosts' network")

    def _make_host(self, n: int, name: str) -> None:
        assert self.subnet is not None
        octet = self.subnet.network_address.packed[1]
        netns = f"{self.tag}-{name}"
        self._namespace(netns)
        link = f"h{n}"
        ip("-n", self.router, "link", "add", link, "type", "veth", "peer", "name", "eth0",
           "netns", netns)  # fmt: skip
        ip("-n", self.router, "addr", "add", f"10.{octet}.{n}.1/24", "dev", link)
        ip("-n", self.router, "link", "set", link, "up")
        address = f"10.{octet}.{n}.2"
        ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", netns, "link", "set", "eth0", "up")
        ip("-n", netns, "route", "add", "default", "via", f"10.{octet}.{n}.1")
        self.hosts[name] = Host(name, netns, address)

    def close(self) -> None:
        """Heal, kill every process left in the hosts, remove the namespaces and the link."""
        self._stop_flaps()
        for netns in reversed(self._made):
            _kill_all(netns)
        ip("link", "del", self.tag, check=False)
        for netns in reversed(self._made):
            ip("netns", "del", netns, check=False)
        self._made = []
        self.hosts = {}
        with self._lock:
            self._rules.clear()

    # -- faults --------------------------------------------------------------------------------

    def isolate(self, host: str, from_: str | Iterable[str] | None = None) -> Cut:
        """Cut ``host`` off from every host and this process (``from_`` None), or from the
        hosts named in ``from_`` only, both ways."""
        me = self.hosts[host].address
        if from_ is None:
            return self._cut(f"{host} isolated", [("from", me), ("to", me)])
        others = [from_] if isinstance(from_, str) else list(from_)
        selectors = []
        for other in others:
            them = self.hosts[other].address
            selectors += [("from", me, "to", them), ("from", them, "to", me)]
        return self._cut(f"{host} cut off from {', '.join(others)}", selectors)

    def one_way(self, source: str, target: str) -> Cut:
        """Drop what ``source`` sends to ``target`` (and only that: ``target``'s packets still
        reach ``source``)."""
        a, b = self.hosts[source].address, self.hosts[target].address
        return self._cut(f"{source} -> {target} dropped", [("from", a, "to", b)])

    def flap(self, host: str, period: float) -> None:
        """Cut ``host`` off from everybody for ``period`` seconds, restore it for ``period``,
        and so on until :meth:`heal`."""
        stop = threading.Event()

        def flapping() -> None:
            while not stop.is_set():
                cut = self.isolate(host)
                stop.wait(period)
                cut.restore()
                stop.wait(period)

        thread = threading.Thread(target=flapping, name=f"flap-{host}", daemon=True)
        self._flaps.append((thread, stop))
        thread.start()

    def heal(self) -> None:
        """Stop every flap and restore every cut."""
        self._stop_flaps()
        with self._lock:
            rules = sorted(self._rules)
        self._remove(rules)

    def _stop_flaps(self) -> None:
        flaps, self._flaps = self._flaps, []
        for _, stop in flaps:
            stop.set()
        for thread, _ in flaps:
            thread.join()

    def _cut(self, description: str, selectors: Sequence[Sequence[str]]) -> Cut:
        cut = Cut(self, description)
        for selector in selectors:
            with self._lock:
                rule = self._next_rule
                self._next_rule += 1
                self._rules.add(rule)
            ip("-n", self.router, "rule", "add", *selector, "blackhole", "pref", str(rule))
            cut.rules.append(rule)
        return cut

    def _remove(self, rules: Iterable[int]) -> None:
        for rule in rules:
            with self._lock:
                if rule not in self._rules:
                    continue
                self._rules.discard(rule)
            ip("-n", self.router, "rule", "del", "pref", str(rule), check=False)

    def host_of(self, pid: int) -> str | None:
        """The name of the host whose namespace process ``pid`` is in (None: none of them, or
        the process is gone)."""
        try:
            inode = os.stat(f"/proc/{pid}/ns/net").st_ino
        except OSError:
            return None
        for name, host in self.hosts.items():
            with contextlib.suppress(OSError):
                if os.stat(f"/var/run/netns/{host.netns}").st_ino == inode:
                    return name
        return None

    @property
    def cuts(self) -> int:
        """How many rules of cuts are in force."""
        with self._lock:
            return len(self._rules)


def _free_octets() -> list[int]:
    """The octets X whose ``10.X.0.0/16`` overlaps no address or route of this machine."""
    taken = []
    for line in ip("-4", "-o", "addr", "show").splitlines() + ip("-4", "route").splitlines():
        for word in line.split():
            with contextlib.suppress(ValueError):
                taken.append(ipaddress.IPv4Network(word, strict=False))
    return [
        octet
        for octet in _OCTETS
        if not any(ipaddress.IPv4Network(f"10.{octet}.0.0/16").overlaps(t) for t in taken)
    ]


def _kill_all(netns: str) -> None:
    for pid in ip("netns", "pids", netns, check=False).split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def remove_leftovers() -> list[str]:
    """Remove the namespaces and links of runs whose process is gone (killed before its
    cleanup); returns their names. Those of a live process are its own, and stay."""
    if unavailable() is not None:
        return []
    removed = []
    links = [
        line.split(":")[1].strip().split("@")[0]
        for line in ip("-o", "link", "show").splitlines()
        if line.count(":") >= 2
    ]
    namespaces = [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]
    for name in links:
        match = _NAME.match(name)
        if match and match.group(3) is None and not exists(int(match.group(1))):
            ip("link", "del", name, check=False)
            removed.append(name)
    for name in namespaces:
        match = _NAME.match(name)
        if match and match.group(3) is not None and not exists(int(match.group(1))):
            _kill_all(name)
            ip("netns", "del", name, check=False)
            removed.append(name)
    if removed:
        logger.warning("removed what a killed run left: %s", ", ".join(removed))
    return removed
