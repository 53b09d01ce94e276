"""Pools benchmarks (issue 59): one team's backlog never holds back another's windows, and
placement by pool costs no throughput.

- **Windows under a backlog**: three clusters on the same ZooKeeper, measured at the same time,
  each one daemon with 4 driver slots and a schedule firing every ``--every`` seconds (10 by
  default) whose run notes when its function starts: *idle* (nothing else), *pools* (the
  schedule in pool ``etl``, a backlog of ``--backlog`` jobs (200) in pool ``bulk`` limited to 2
  slots) and *no pools* (the same backlog and schedule, every job in ``default``: today's single
  queue). Each window's delay (scheduled time -> the run's function running) under pools is
  divided by the same window's on the idle cluster (a per-window ratio: the same moment's
  load): goal <= 1.2 for the median and for the max. The backlog's jobs do nothing for
  ``--hold`` seconds (2): no-op jobs that last long enough for the backlog to outlive the
  windows measured (200 instant jobs on 2 slots drain before the third window).
- **Placement throughput by pool**: 1,000 queued jobs, five members of 200 slots (members that
  take assignments without launching anything, as ``bench_fleet``'s placement), in three pools
  (priorities 0, 5 and 10, limits that do not bind) against the same jobs in one queue, run
  after run: assignments per second from leadership to the last one (ZooKeeper's timestamps);
  goal: the per-run ratio >= 0.9.

``python -m benchmarks.bench_pools [--windows 6] [--every 10] [--backlog 200] [--placements
1000] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.bench_backlog import noop
from benchmarks.common import Result, file_config, hold, show_all, zookeeper
from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from zkstore.cluster.pools import set_pool
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.strict import utc_moment
from zkstore.schedules.schedule_records import ScheduleSpec
from zkstore.schedules.schedule_store import ScheduleStore
from zkstore.schedules.timing import ceil_second
from zkstore.zookeeper.zk import ZooKeeper
from zkstore_dev.chaos.schedule_checker import read_runs, scheduled_run

SLOTS = 4
KINDS = ("idle", "pools", "no pools")


def _submit(config: StoreConfig, count: int, prefix: str, pool: str | None, seconds: float) -> None:
    """``count`` jobs of ``seconds`` each, from 8 clients at once."""

    def submit(first: int) -> None:
        with Client(config) as client:
            for i in range(first, count, 8):
                client.submit_function(hold, seconds, job_id=f"{prefix}-{i:05d}", pool=pool)

    with ThreadPoolExecutor(max_workers=8) as workers:
        list(workers.map(submit, range(8)))


def bench_windows(
    hosts: str, windows: int, every: int, backlog: int, seconds: float
) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        configs = {
            kind: file_config(hosts, f"{tmp}/{n}", timeout=10.0) for n, kind in enumerate(KINDS)
        }
        outs = {kind: Path(tmp) / f"out-{n}" for n, kind in enumerate(KINDS)}
        for n, kind in enumerate(KINDS):
            local = LocalCluster(
                configs[kind],
                Path(tmp) / f"rt-{n}",
                extra_args=("--max-drivers", str(SLOTS), "--schedule-min-interval", "1s"),
            )
            stack.callback(local.stop)
            local.start_daemon(f"pools-bench-{n}")
            local.wait_for_leader(timeout=120)
        with Client(configs["pools"]) as client:
            set_pool(client.cluster.zk, client.cluster.layout, "etl")
            set_pool(client.cluster.zk, client.cluster.layout, "bulk", max_running=2)
        with Client(configs["idle"]) as client:
            set_pool(client.cluster.zk, client.cluster.layout, "etl")
        # the backlogs first, then the schedules' first window a little after
        _submit(configs["pools"], backlog, "bulk", "bulk", seconds)
        _submit(configs["no pools"], backlog, "bulk", None, seconds)
        first = ceil_second(datetime.now(UTC)) + timedelta(seconds=3)
        for kind in KINDS:
            pool = None if kind == "no pools" else "etl"
            with Client(configs[kind]) as client:
                spec = ScheduleSpec(
                    version=None,
                    name="etl",
                    created=utc_moment(),
                    every=every,
                    start_at=first,
                    end_at=first + timedelta(seconds=every * windows - 1),
                )
                definition = JobDefinition.for_function(
                    "etl",
                    scheduled_run,
                    args=(str(outs[kind]), 0.0),
                    pool=pool,
                    typed_run=pool is not None,
                )
                ScheduleStore.for_config(configs[kind], client.cluster.zk).create(spec, definition)
        deadline = time.monotonic() + every * windows + 180
        while time.monotonic() < deadline and any(
            len(read_runs(outs[kind], "etl")) < windows for kind in KINDS
        ):
            time.sleep(0.5)
        delays = {
            kind: {
                run.window: run.first_start - run.window.timestamp()
                for run in read_runs(outs[kind], "etl")
                if run.window is not None
            }
            for kind in KINDS
        }
    idle = delays["idle"]
    results = []
    for kind in ("pools", "no pools"):
        loaded = delays[kind]
        common = sorted(set(idle) & set(loaded))
        ours = [loaded[w] for w in common]
        base = [idle[w] for w in common]
        goal = "<= 1.2" if kind == "pools" else "<= inf"
        what = "today's single queue, for comparison" if kind == "no pools" else "pool etl"
        detail = (
            f"{len(common)} windows every {every} s; delays {what}: "
            + ", ".join(f"{d:.2f}" for d in ours)
            + " s; idle: "
            + ", ".join(f"{d:.2f}" for d in base)
            + f" s; backlog of {backlog} jobs of {seconds:g} s"
            + (" in pool bulk at most 2 running" if kind == "pools" else "")
        )
        results.append(
            Result.of_runs(
                f"window delay under a backlog, {kind} vs idle, median of per-window ratios",
                ours,
                base,
                goal,
                detail=detail,
            )
        )
        results.append(
            Result(
                f"window delay under a backlog, {kind} vs idle, max",
                max(ours, default=0.0),
                max(base, default=0.0),
                goal,
                detail=f"{len(common)} windows",
            )
        )
    return results


def _placement_seconds(
    hosts: str, jobs: int, members: int, slots: int, pools: list[str] | None
) -> float:
    """Seconds from a daemon's leadership to the last of ``jobs`` queued jobs' assignments
    (ZooKeeper's timestamps), the jobs dealt round-robin to ``pools`` (None: no pool)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=30.0)
        with Client(config) as client:
            for priority, name in enumerate(pools or ()):
                set_pool(
                    client.cluster.zk,
                    client.cluster.layout,
                    name,
                    max_running=jobs,
                    priority=priority * 5,
                )

        def submit(first: int) -> None:
            with Client(config) as client:
                for i in range(first, jobs, 8):
                    pool = pools[i % len(pools)] if pools else None
                    client.submit_function(noop, job_id=f"p-{i:05d}", pool=pool)

        with ThreadPoolExecutor(max_workers=8) as workers:
            list(workers.map(submit, range(8)))
        fake = ZooKeeper.from_config(config).start()
        layout = Client(config).cluster.layout
        dirs = [f"member-{i}" for i in range(members)]
        for i, daemon_id in enumerate(dirs):
            info = MemberInfo(
                version=None,
                daemon_id=daemon_id,
                host="bench",
                pid=i + 1,
                slots=slots,
                started=utc_moment(),
            )
            fake.create(layout.member(daemon_id), info.to_bytes(), ephemeral=True)
        local = LocalCluster(config, Path(tmp) / "rt", extra_args=("--max-drivers", "1"))
        try:
            local.start_daemon("placer", "--label", "role=placer")
            local.wait_for_leader(timeout=120)
            _, info_stat = fake.get(layout.leader_info)
            deadline = time.monotonic() + 300
            while True:
                counts = fake.children_many([layout.member_assignments(d) for d in dirs])
                if sum(len(c or ()) for c in counts) >= jobs - 1:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError("not every job was placed within 300 s")
                time.sleep(0.1)
            newest = max(
                stat.mtime
                for d in dirs
                for stat in fake.exists_many(
                    [
                        f"{layout.member_assignments(d)}/{j}"
                        for j in fake.children(layout.member_assignments(d))
                    ]
                )
                if stat is not None
            )
        finally:
            local.stop()
            fake.stop()
    return float(newest - info_stat.ctime) / 1000.0


def bench_placement(hosts: str, jobs: int, rounds: int) -> Result:
    pooled: list[float] = []
    single: list[float] = []
    for _ in range(rounds):  # each run: the pools, then the single queue right after
        pooled.append(jobs / _placement_seconds(hosts, jobs, 5, 200, ["etl", "reporting", "bulk"]))
        single.append(jobs / _placement_seconds(hosts, jobs, 5, 200, None))
    return Result.of_runs(
        f"placement of {jobs} queued jobs over 5 members of 200 slots, 3 pools vs one queue",
        pooled,
        single,
        ">= 0.9",
        unit="assignments/s",
        higher_is_better=True,
        detail=f"{rounds} paired runs; medians {statistics.median(pooled):.0f} vs "
        f"{statistics.median(single):.0f} assignments/s",
    )


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--windows", type=int, default=6)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--backlog", type=int, default=200)
    parser.add_argument("--hold", type=float, default=2.0)
    parser.add_argument("--placements", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with zookeeper() as hosts:
        results = show_all(bench_windows(hosts, args.windows, args.every, args.backlog, args.hold))
        results += show_all([bench_placement(hosts, args.placements, args.rounds)])
    return results


if __name__ == "__main__":
    main()
