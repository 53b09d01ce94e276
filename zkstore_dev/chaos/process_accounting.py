"""Every host's processes accounted for, once the network is healed and every job has ended.

On a world of hosts (:mod:`zkstore_dev.hosts`), each namespace must hold exactly what the run
put there, and nothing a fault left behind:

- a ZooKeeper host: its server's JVM; the storage host: the S3 server;
- a daemon's host: that daemon (the process the run started last with its id, and no other
  daemon of any id), at most one fork server and one log shipper of its id, no more warm Spark
  driver JVMs (nor processes warming them) than its daemon keeps, and no driver
  (every job has ended: a driver still there is an orphan, a driver cut off that never
  stopped).

Processes are told apart by their titles (:mod:`recovery.proctitle`): ``zkstore daemon ID``,
``zkstore fork-server ID``, ``zkstore log-shipper ID``, ``zkstore driver JOB attempt N``.
A process can be between its fork and its title for a moment, so the look is repeated until
everything is accounted for or ``timeout`` passes; what is left then is reported.
"""

from __future__ import annotations

import time
from collections import Counter

from zkstore_dev.chaos.world import DAEMONS, STORAGE_HOST, WARM, ZOOKEEPER_HOSTS, RunCluster
from zkstore_dev.hosts import Network

LOOK_EVERY = 0.5


def title(pid: int) -> str:
    """The process's command line as ``ps`` shows it ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def unaccounted(run: RunCluster, network: Network) -> list[str]:
    """One line per process that should not be where it is (see the module)."""
    found = []
    expected = {
        name: {member.pid}
        for name, member in zip(ZOOKEEPER_HOSTS, run.world.ensemble.members.values(), strict=True)
    }
    if run.world.s3 is not None:
        expected[STORAGE_HOST] = {run.world.s3.pid}
    for name in (*ZOOKEEPER_HOSTS, STORAGE_HOST):
        for pid in network[name].pids():
            if pid not in expected.get(name, set()):
                found.append(f"{name}: unexpected process {pid} ({title(pid)[:120]})")
    for name in DAEMONS:
        found += _daemon_host(run, network, name)
    return found


def _daemon_host(run: RunCluster, network: Network, name: str) -> list[str]:
    found = []
    ours = run.local.daemons.get(name)
    roles: Counter[str] = Counter()
    for pid in network[name].pids():
        words = title(pid).split()
        if not words:
            continue  # gone meanwhile
        if words[:2] == ["zkstore", "daemon"]:
            if words[2:] != [name] or ours is None or pid != ours.pid:
                found.append(
                    f"{name}: a daemon that is not this host's own: {pid} {' '.join(words)}"
                )
        elif words[:2] in (["zkstore", "fork-server"], ["zkstore", "log-shipper"]):
            if words[2:] != [name]:
                found.append(f"{name}: another daemon's helper: {pid} {' '.join(words)}")
            roles[words[1]] += 1
        elif words[:2] in (["zkstore", "warm-driver"], ["zkstore", "warm-up"]):
            roles[words[1]] += 1  # the JVMs its daemon keeps ready, and one warming
        elif words[:2] == ["zkstore", "driver"]:
            found.append(f"{name}: a driver after every job ended: {pid} {' '.join(words[2:])}")
        else:
            found.append(f"{name}: unexpected process {pid} ({' '.join(words)[:120]})")
    found += _too_many(name, roles)
    if ours is not None and ours.alive and ours.pid not in network[name].pids():
        found.append(f"{name}: its daemon {ours.pid} is not on its host")
    return found


def _too_many(name: str, roles: Counter[str]) -> list[str]:
    """One fork server and one log shipper at most; as many warm JVMs (and JVMs warming) as
    the host's daemon keeps."""
    found = []
    for role, count in roles.items():
        most = WARM.get(name, 0) if role in ("warm-driver", "warm-up") else 1
        if count > most:
            found.append(f"{name}: {count} processes of the role {role} (at most {most})")
    return found


def account(run: RunCluster, timeout: float) -> list[str]:
    """:func:`unaccounted` once it is empty, or what is left after ``timeout`` seconds."""
    network = run.world.network
    if network is None:
        return []
    end = time.monotonic() + timeout
    while True:
        found = unaccounted(run, network)
        if not found or time.monotonic() > end:
            return [f"processes: {line}" for line in found]
        time.sleep(LOOK_EVERY)
