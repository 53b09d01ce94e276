"""The partition scenarios: faults of the network between hosts, not of processes.

They need a world on a :class:`~zkstore_dev.hosts.Network` (root; see :func:`available`). Every
process lives on: only packets are dropped, silently, by the router between the hosts. Each
scenario cuts, holds the cut for a planned time (chosen by the run's seeded generator, a pause
that is the fault itself), restores the network and says what it did:

- ``driver-host-cut``: the host of a running driver cut off from the ZooKeeper servers (storage
  and the other hosts reachable) while its job writes, past its session or, one time in three,
  for less than half its lease;
- ``leader-cut-placing``: the leader's host cut off from ZooKeeper right after a burst of
  submissions, while it places them;
- ``leader-cut-firing``: the leader's host cut off from ZooKeeper around a window of the
  schedule, as it fires;
- ``zk-split``: the ensemble split 2/1 with a daemon on the minority side (the leader's, half
  the time), storage reachable from both sides;
- ``zk-server-cut``: every daemon's host cut off from one ZooKeeper follower (the servers still
  see each other: the ensemble keeps its quorum and its leader), past the session: invisible to
  jobs, nothing may restart;
- ``storage-cut``: a daemon's host cut off from the storage host only, for 12-20 s (longer
  than every storage and ZooKeeper timeout), ZooKeeper reachable;
- ``leader-flap``: the leader's host cut off from everybody and back every second, for 30 s
  (``smoke``: 8 s);
- ``one-way``: one direction only between a daemon's host and every ZooKeeper server, past
  its session.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import UTC, datetime

from zkstore_dev.chaos.faults import Fault, Load, Scenario
from zkstore_dev.chaos.world import DAEMONS, STORAGE_HOST, ZOOKEEPER_HOSTS, RunCluster
from zkstore_dev.hosts import Network

STEP_DELAY = 0.2
#: How long a flap lasts (the issue's 30 s), and in a smoke run.
FLAP_SECONDS = 30.0
FLAP_SMOKE_SECONDS = 8.0
FLAP_PERIOD = 1.0


def _network(run: RunCluster) -> Network:
    network = run.world.network
    if network is None:
        raise RuntimeError("a partition scenario needs a world on a network of hosts")
    return network


def _hold(rng: random.Random, low: float, high: float) -> float:
    """Keep the fault for a planned time (the fault's own duration, not a wait for anything)."""
    seconds = rng.uniform(low, high)
    time.sleep(seconds)
    return seconds


def _past_session(run: RunCluster, rng: random.Random) -> tuple[float, bool]:
    """Hold a cut that outlasts the session (a failover must follow), or one time in three a
    cut shorter than half the lease: True then, nothing may restart for it."""
    timeout = run.config.session_timeout
    if rng.random() < 1 / 3:
        return _hold(rng, 0.5, 0.35 * timeout), True
    return _hold(rng, timeout + 1.0, timeout + 4.0), False


def _driver_host(run: RunCluster, rng: random.Random) -> tuple[str, list[str]]:
    """A daemon host that runs a driver now, and the jobs whose drivers run there."""
    network = _network(run)
    on: dict[str, list[str]] = {}
    for job_id, pid in run.running_drivers().items():
        host = network.host_of(pid)
        if host in DAEMONS:
            on.setdefault(host, []).append(job_id)
    if not on:
        host = rng.choice(DAEMONS)
        return host, []
    host = rng.choice(sorted(on))
    return host, sorted(on[host])


def driver_host_cut(run: RunCluster, rng: random.Random) -> Fault:
    network = _network(run)
    host, jobs = _driver_host(run, rng)
    start = time.time()
    network.isolate(host, from_=ZOOKEEPER_HOSTS)
    held, short = _past_session(run, rng)
    network.heal()
    return Fault(
        f"{host} (drivers of {', '.join(jobs) or 'none'}) cut off from ZooKeeper for {held:.1f} s",
        start,
        time.time(),
        restarts_nothing=short,
        from_start=True,
    )


def leader_cut_placing(run: RunCluster, rng: random.Random) -> Fault:
    network = _network(run)
    leader = run.local.wait_for_leader(timeout=60).daemon_id
    submitted = [run.submit(rng.randint(15, 40), STEP_DELAY) for _ in range(rng.randint(2, 4))]
    time.sleep(rng.uniform(0.0, 0.3))  # the cut lands among the placements (a planned offset)
    start = time.time()
    network.isolate(leader, from_=ZOOKEEPER_HOSTS)
    held, short = _past_session(run, rng)
    network.heal()
    return Fault(
        f"leader {leader} cut off from ZooKeeper for {held:.1f} s while placing "
        f"{len(submitted)} new jobs",
        start,
        time.time(),
        restarts_nothing=short,
        from_start=True,
    )


def leader_cut_firing(run: RunCluster, rng: random.Random) -> Fault:
    network = _network(run)
    leader = run.local.wait_for_leader(timeout=60).daemon_id
    assert run.probe is not None
    window = run.probe.next_window()
    offset = rng.uniform(-0.3, 0.3)
    time.sleep(max(0.0, window + offset - time.time()))  # up to the planned moment of the cut
    start = time.time()
    network.isolate(leader, from_=ZOOKEEPER_HOSTS)
    held, short = _past_session(run, rng)
    network.heal()
    when = datetime.fromtimestamp(window, UTC).strftime("%H:%M:%S")
    return Fault(
        f"leader {leader} cut off from ZooKeeper for {held:.1f} s, {offset:+.2f} s from the "
        f"window of {when}",
        start,
        time.time(),
        restarts_nothing=short,
        from_start=True,
    )


def zk_split(run: RunCluster, rng: random.Random) -> Fault:
    network = _network(run)
    leader = run.local.wait_for_leader(timeout=60).daemon_id
    server = rng.choice(ZOOKEEPER_HOSTS)
    daemon = leader if rng.random() < 0.5 else rng.choice(DAEMONS)
    minority = [server, daemon]
    majority = [h for h in (*ZOOKEEPER_HOSTS, *DAEMONS) if h not in minority]
    start = time.time()
    for host in minority:
        network.isolate(host, from_=majority)
    held, short = _past_session(run, rng)
    network.heal()
    run.world.ensemble.wait_serving(timeout=120)
    return Fault(
        f"ensemble split 2/1 for {held:.1f} s: {server} and {daemon}"
        f"{' (leader)' if daemon == leader else ''} apart from the rest",
        start,
        time.time(),
        restarts_nothing=short,
        from_start=True,
    )


def zk_server_cut(run: RunCluster, rng: random.Random) -> Fault:
    network = _network(run)
    ensemble = run.world.ensemble
    followers = ensemble.followers()
    server = ZOOKEEPER_HOSTS[rng.choice(sorted(followers or ensemble.members)) - 1]
    start = time.time()
    network.isolate(server, from_=DAEMONS)
    held = _hold(rng, run.config.session_timeout + 1.0, run.config.session_timeout + 4.0)
    network.heal()
    return Fault(
        f"every daemon host cut off from ZooKeeper server {server} (a follower) for {held:.1f} s",
        start,
        time.time(),
        restarts_nothing=True,
        from_start=True,
    )


def storage_cut(run: RunCluster, rng: random.Random) -> Fault:
    network = _network(run)
    leader = run.local.wait_for_leader(timeout=60).daemon_id
    host, _ = _driver_host(run, rng)
    host = leader if rng.random() < 1 / 3 else host
    start = time.time()
    network.isolate(host, from_=STORAGE_HOST)
    held = _hold(rng, 12.0, 20.0)
    network.heal()
    return Fault(
        f"{host}{' (leader)' if host == leader else ''} cut off from storage for {held:.1f} s",
        start,
        time.time(),
        from_start=True,
    )


def leader_flap(run: RunCluster, rng: random.Random, seconds: float = FLAP_SECONDS) -> Fault:
    network = _network(run)
    leader = run.local.wait_for_leader(timeout=60).daemon_id
    start = time.time()
    network.flap(leader, FLAP_PERIOD)
    time.sleep(seconds)  # the flap's planned length
    network.heal()
    return Fault(
        f"leader {leader}'s link down and up every {FLAP_PERIOD:g} s for {seconds:g} s",
        start,
        time.time(),
        from_start=True,
    )


def one_way(run: RunCluster, rng: random.Random) -> Fault:
    network = _network(run)
    leader = run.local.wait_for_leader(timeout=60).daemon_id
    host, _ = _driver_host(run, rng)
    host = leader if rng.random() < 0.5 else host
    outgoing = rng.random() < 0.5
    start = time.time()
    for server in ZOOKEEPER_HOSTS:
        if outgoing:
            network.one_way(host, server)
        else:
            network.one_way(server, host)
    held, short = _past_session(run, rng)
    network.heal()
    direction = f"{host} -> ZooKeeper" if outgoing else f"ZooKeeper -> {host}"
    return Fault(
        f"{direction} dropped (one way) for {held:.1f} s"
        f"{' (the leader)' if host == leader else ''}",
        start,
        time.time(),
        restarts_nothing=short,
        from_start=True,
    )


def scenarios(*, smoke: bool = False) -> dict[str, Scenario]:
    """The partition scenarios (a flap of :data:`FLAP_SMOKE_SECONDS` in a smoke run)."""
    flap_seconds = FLAP_SMOKE_SECONDS if smoke else FLAP_SECONDS

    def flap(run: RunCluster, rng: random.Random) -> Fault:
        return leader_flap(run, rng, flap_seconds)

    found: dict[str, Callable[[RunCluster, random.Random], Fault]] = {
        "driver-host-cut": driver_host_cut,
        "leader-cut-placing": leader_cut_placing,
        "leader-cut-firing": leader_cut_firing,
        "zk-split": zk_split,
        "zk-server-cut": zk_server_cut,
        "storage-cut": storage_cut,
        "leader-flap": flap,
        "one-way": one_way,
    }
    return found


#: Scenarios that need S3 storage (a storage host to cut off).
NEEDS_S3 = frozenset({"storage-cut"})
#: Jobs that outlast the longer faults (a step is 0.2 s).
LOADS = {"leader-flap": Load(jobs=4, steps=200), "storage-cut": Load(jobs=4, steps=150)}
