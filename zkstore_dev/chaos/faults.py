"""The fault scenarios. Each injects its fault into a running run, heals it, and says when.

Every choice (which server, which driver, how long) comes from the run's seeded random
generator, so that ``--seed`` replays the same faults; only the timing of the processes
themselves varies.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from zkstore_dev.chaos.world import RunCluster

__all__ = [
    "LOADS",
    "SCENARIOS",
    "SINGLE",
    "Fault",
    "Load",
    "Scenario",
    "daemon_restart",
    "daemon_sigstop",
    "driver_kill",
    "leader_restart",
    "mixed",
    "s3_pause",
    "zk_follower_kill",
    "zk_leader_kill",
]


@dataclass(frozen=True)
class Fault:
    """What was done, from when to when (``time.time()``). ``restarts_nothing``: the fault
    only restarted daemons, so that no job may have run a second attempt (the design's
    invariant: a daemon's restart is invisible to its jobs), and so that a schedule's window
    is bounded in how late it may start (:meth:`window_bound`). ``away``: the longest a daemon
    the fault restarted was gone, from its signal until its member record was back.
    ``from_start``: a job that ran again on a new attempt recovered at that attempt's first
    step, counted from ``start`` (a cut stops its attempt at once, a driver cut off steps on
    until its lease ends); else, from its last step before the fault (the longest stall
    across it)."""

    description: str
    start: float
    end: float
    restarts_nothing: bool = False
    from_start: bool = False
    away: float = 0.0

    def window_bound(self, session_timeout: float) -> float | None:
        """How much later than the run's quickest window a window's run may start (the
        schedule's bound, :meth:`~zkstore_dev.chaos.probe.ScheduleProbe.check`); None: only
        counted, after a fault that did more than restart daemons.

        A window waits for a leader at most a session timeout (a killed leader's candidacy
        goes with its session, or sooner with its return), and a second to fire. Then its run
        may wait for the daemon it was placed on: one killed just before is still a member
        until its session ends (the leader cannot know), and launches the run once it is back
        (``away``). A rolling restart kills one daemon after another, so a window can meet
        both: the leader's vacancy, then its own daemon's restart."""
        if not self.restarts_nothing:
            return None
        return session_timeout + 1.0 + self.away


@dataclass(frozen=True)
class Load:
    """How many jobs a scenario's runs submit (at least), and their length in steps."""

    jobs: int = 4
    steps: int = 60


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
    s3 = run.world.s3
    assert s3 is not None, "s3-pause runs on S3 storage only"
    start = time.time()
    s3.pause()
    held = _hold(rng, 2.0, 8.0)
    s3.resume()
    return Fault(f"SIGSTOP S3 server for {held:.1f} s", start, time.time())


def leader_restart(run: RunCluster, rng: random.Random) -> Fault:
    """Stop the leading daemon (SIGKILL or SIGTERM) and start it again a little later."""
    leader = run.local.wait_for_leader(timeout=60)
    how = rng.choice([signal.SIGKILL, signal.SIGTERM])
    start = time.time()
    leader.signal(how)
    leader.process.wait(timeout=60)
    held = _hold(rng, 0.0, 3.0)
    run.local.start_daemon(leader.daemon_id)
    _wait_back(run, leader.daemon_id)
    return Fault(
        f"{signal.Signals(how).name} leading daemon {leader.daemon_id}, "
        f"restarted after {held:.1f} s",
        start,
        time.time(),
        restarts_nothing=True,
        away=time.time() - start,
    )


def daemon_restart(run: RunCluster, rng: random.Random) -> Fault:
    """A rolling restart: every daemon in turn (SIGTERM as an upgrade does, or SIGKILL), each
    started again with its id at once and the next one stopped as soon as it is back."""
    start = time.time()
    done = []
    away = 0.0
    for daemon_id in sorted(run.local.daemons):
        daemon = run.local.daemons[daemon_id]
        how = rng.choice([signal.SIGTERM, signal.SIGTERM, signal.SIGKILL])
        stopped = time.time()
        daemon.signal(how)
        daemon.process.wait(timeout=60)
        run.local.start_daemon(daemon_id)
        _wait_back(run, daemon_id)
        gone = time.time() - stopped
        away = max(away, gone)
        done.append(f"{signal.Signals(how).name} {daemon_id} (back after {gone:.1f} s)")
    return Fault(
        f"rolling restart: {', '.join(done)}, each started again at once",
        start,
        time.time(),
        restarts_nothing=True,
        away=away,
    )


def _wait_back(run: RunCluster, daemon_id: str, timeout: float = 60.0) -> None:
    """Until the daemon started last with that id holds its member record again."""
    pid = run.local.daemons[daemon_id].pid
    path = f"{run.config.base_path}/members/{daemon_id}"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with contextlib.suppress(Exception):
            found = run.local.zk.get_if_exists(path)
            if found is not None and json.loads(found[0]).get("pid") == pid:
                return
        time.sleep(0.05)
    raise TimeoutError(f"daemon {daemon_id} was not back within {timeout:g} s")


SINGLE: dict[str, Scenario] = {
    "zk-follower-kill": zk_follower_kill,
    "zk-leader-kill": zk_leader_kill,
    "daemon-sigstop": daemon_sigstop,
    "driver-kill": driver_kill,
    "s3-pause": s3_pause,
    "leader-restart": leader_restart,
    "daemon-restart": daemon_restart,
}

#: Scenarios that run more (or longer) jobs than the default: a rolling restart of the three
#: daemons while twelve jobs run (in fifteen slots: the schedule's runs find one free).
LOADS: dict[str, Load] = {"daemon-restart": Load(jobs=12, steps=120)}


def mixed(run: RunCluster, rng: random.Random) -> Fault:
    """Three of the single faults in a row, chosen at random."""
    names = [rng.choice(sorted(SINGLE)) for _ in range(3)]
    faults = [SINGLE[name](run, rng) for name in names]
    return Fault(
        "; ".join(f.description for f in faults),
        faults[0].start,
        faults[-1].end,
        restarts_nothing=all(f.restarts_nothing for f in faults),
        away=max(f.away for f in faults),
    )


SCENARIOS: dict[str, Scenario] = {**SINGLE, "mixed": mixed}
