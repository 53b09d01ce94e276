"""What sweeping a pool's driver user costs an attempt (issue 54, :mod:`recovery.member.sweep`).

A pool user a driver ran as is swept once before it is handed on again: at the daemon's next
look (every 5 s, off any launch) or, if a launch comes first, in that launch (the
``DriverUserPool.take`` of the attempt). So the most a no-op job pays is one sweep, on its
launch's path and in the daemon's CPU. This measures one sweep of this host's places
(``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run/lock``, ``/dev/mqueue``, and its System V IPC
tables) for a user that left nothing (every job that keeps to its directory) and for one that
left ``--files`` files in ``/tmp``, as the median of ``--rounds``: wall time (the launch's
delay) and CPU (``time.process_time``), beside today's figures of a no-op job, which are not
measured here: its CPU, every process (:data:`JOB_CPU`, ``bench_cost``'s goal) and its launch
to result alone (:data:`JOB_ALONE`, ``bench_backlog``'s 10 x one job alone). Root only (it
makes files of a user id nobody uses); a user id, not a user: the sweep reads owners, not names.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import Result, show_all
from recovery.member.sweep import sweep, sweep_all
from recovery.settings import DriverUser

#: CPU per no-op job, every process: bench_cost's goal (docs/benchmarks.md: 0.05-0.07 s measured)
JOB_CPU = 0.05
#: a no-op job alone, from its submit to its result (docs/benchmarks.md, bench_backlog: 0.10 s)
JOB_ALONE = 0.10
#: the users of a pool swept together, in one walk and one by one
POOL = 4


def free_users(count: int) -> list[DriverUser]:
    """``count`` users of ids no process runs as (the sweep reads owners, not names)."""
    owners = {os.stat(p).st_uid for p in Path("/proc").glob("[0-9]*") if p.exists()}
    free = [u for u in range(63000, 65000) if u not in owners][:count]
    return [DriverUser(f"uid{u}", u, u, (u,), "/nonexistent") for u in free]


def measure(user: DriverUser, rounds: int, files: int) -> tuple[float, float]:
    """Median wall and CPU seconds of one sweep of ``user``, who left ``files`` files in a
    directory of its own in /tmp before each."""
    walls, cpus = [], []
    for _ in range(rounds):
        if files:
            place = Path(tempfile.mkdtemp(prefix="zkstore-bench-sweep-"))
            for n in range(files):
                (place / f"left-{n}").write_bytes(b"x")
                os.chown(place / f"left-{n}", user.uid, user.gid)
            os.chown(place, user.uid, user.gid)
        wall, cpu = time.perf_counter(), time.process_time()
        swept = sweep(user)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        assert not swept.failed, swept.failed
        assert swept.removed == (1 if files else 0), swept.removed
    return statistics.median(walls), statistics.median(cpus)


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20, help="sweeps measured per case")
    parser.add_argument("--files", type=int, default=1000, help="files left, in one case")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_sweep: needs root (it makes files of another user id); skipped")
        return []
    pool = free_users(POOL)
    user = pool[0]
    entries = sum(len(files) + len(dirs) for _, dirs, files in os.walk("/tmp"))
    results = []
    for left in (0, args.files):
        wall, cpu = measure(user, args.rounds, left)
        what = f"a pool user's sweep, {left} files left" if left else "a pool user's sweep"
        detail = f"median of {args.rounds}; /tmp holds {entries} entries"
        # nothing left: what every attempt pays, at most a tenth of a job; files left: what a
        # job that leaves them pays the next, less than a job
        goal = "<= 1" if left else "<= 0.1"
        results.append(Result(f"{what}: CPU, vs a no-op job's", cpu, JOB_CPU, goal, detail=detail))
        results.append(
            Result(f"{what}: launch delay, vs a job alone", wall, JOB_ALONE, goal, detail=detail)
        )
    # a pool's users swept together (a daemon's start: every one; a look after several
    # drivers ended): one walk against one sweep each, in this run
    together, apart = [], []
    for _ in range(max(1, args.rounds // 4)):
        cpu = time.process_time()
        assert not any(swept.failed for swept in sweep_all(pool).values())
        together.append(time.process_time() - cpu)
        cpu = time.process_time()
        for member in pool:
            assert not sweep(member).failed
        apart.append(time.process_time() - cpu)
    results.append(
        Result(
            f"{POOL} pool users swept in one walk: CPU, vs a sweep each",
            statistics.median(together),
            statistics.median(apart),
            f"<= {1.5 / POOL:.2f}",
            detail=f"median of {len(together)}; /tmp holds {entries} entries",
        )
    )
    return show_all(results)


if __name__ == "__main__":
    main()
