"""The fault scenarios. Each injects its fault into a running run, heals it, and says when.

Every choice (which server, which driver, how long) comes from the run's seeded random
generator, so that ``--seed`` replays the same faults; only the timing of the processes
themselves varies.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from recovery.dev.chaos.world import RunCluster


@dataclass(frozen=True)
class Fault:
    """What was done, from when to when (``time.time()``)."""

    description: str
    start: float
    end: float


Scenario = Callable[[RunCluster, random.Random], Fault]


def _hold(rng: random.Random, low: float, high: float) -> float:
    seconds = rng.uniform(low, high)
    time.sleep(seconds)
    return seconds


def zk_follower_kill(run: RunCluster, rng: random.Random) -> Fault:
    """SIGKILL one ZooKeeper follower; bring it back after a while (quorum stays)."""
    ensemble = run.world.ensemble
    victim = rng.choice(sorted(ensemble.followers()) or sorted(ensemble.members))
    start = time.time()
    ensemble.kill_member(victim)
    held = _hold(rng, 1.0, 6.0)
    ensemble.start_member(victim)
    return Fault(f"SIGKILL ZooKeeper follower {victim} for {held:.1f} s", start, time.time())


def zk_leader_kill(run: RunCluster, rng: random.Random) -> Fault:
    """SIGKILL the ZooKeeper leader (the others re-elect); bring it back after a while."""
    ensemble = run.world.ensemble
    victim = ensemble.leader() or rng.choice(sorted(ensemble.members))
    start = time.time()
    ensemble.kill_member(victim)
    ensemble.wait_serving(timeout=60)
    held = _hold(rng, 0.0, 4.0)
    ensemble.start_member(victim)
    return Fault(f"SIGKILL ZooKeeper leader {victim}, back after {held:.1f} s", start, time.time())


def daemon_sigstop(run: RunCluster, rng: random.Random) -> Fault:
    """Freeze the leading daemon past its session timeout (another takes over), then thaw it."""
    leader = run.local.wait_for_leader(timeout=60)
    start = time.time()
    leader.signal(signal.SIGSTOP)
    held = _hold(rng, run.config.session_timeout + 1.0, run.config.session_timeout + 4.0)
    leader.signal(signal.SIGCONT)
    return Fault(f"SIGSTOP leading daemon {leader.daemon_id} for {held:.1f} s", start, time.time())


def driver_kill(run: RunCluster, rng: random.Random) -> Fault:
    """SIGKILL one or two running drivers at random moments."""
    start = time.time()
    killed = []
    for _ in range(rng.randint(1, 2)):
        drivers = run.running_drivers()
        if drivers:
            job_id = rng.choice(sorted(drivers))
            _kill(drivers[job_id])
            killed.append(job_id)
        _hold(rng, 0.2, 3.0)
    return Fault(f"SIGKILL driver(s) of {', '.join(killed) or 'none'}", start, time.time())


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it finished meanwhile
        os.kill(pid, signal.SIGKILL)


def s3_pause(run: RunCluster, rng: random.Random) -> Fault:
    """Freeze the S3 server (requests hang, then time out) for a while."""
    start = time.time()
    run.world.s3.pause()
    held = _hold(rng, 2.0, 8.0)
    run.world.s3.resume()
    return Fault(f"SIGSTOP S3 server for {held:.1f} s", start, time.time())


def daemon_restart(run: RunCluster, rng: random.Random) -> Fault:
    """Stop the leading daemon (SIGKILL or SIGTERM) and start it again a little later."""
    leader = run.local.wait_for_leader(timeout=60)
    how = rng.choice([signal.SIGKILL, signal.SIGTERM])
    start = time.time()
    leader.signal(how)
    leader.process.wait(timeout=60)
    held = _hold(rng, 0.0, 3.0)
    run.local.start_daemon(leader.daemon_id)
    return Fault(
        f"{signal.Signals(how).name} leading daemon {leader.daemon_id}, "
        f"restarted after {held:.1f} s",
        start,
        time.time(),
    )


SINGLE: dict[str, Scenario] = {
    "zk-follower-kill": zk_follower_kill,
    "zk-leader-kill": zk_leader_kill,
    "daemon-sigstop": daemon_sigstop,
    "driver-kill": driver_kill,
    "s3-pause": s3_pause,
    "daemon-restart": daemon_restart,
}


def mixed(run: RunCluster, rng: random.Random) -> Fault:
    """Three of the single faults in a row, chosen at random."""
    names = [rng.choice(sorted(SINGLE)) for _ in range(3)]
    faults = [SINGLE[name](run, rng) for name in names]
    return Fault("; ".join(f.description for f in faults), faults[0].start, faults[-1].end)


SCENARIOS: dict[str, Scenario] = {**SINGLE, "mixed": mixed}
