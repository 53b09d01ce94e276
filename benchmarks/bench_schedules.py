"""Schedule benchmarks (issue 25): what a fire costs the leader, and scheduled time -> driver.

- **scheduled time -> driver running** (``--latency-fires``, default 200): one daemon fires a
  schedule ``--every 1s``; each run's driver writes when its job function starts
  (:func:`zkstore_dev.chaos.schedule_checker.scheduled_run`). Beside it, half a second after each
  window, a plain ``submit`` of the same job, timed from just before the submit. Median and p99
  of both; goal: the schedule adds under 100 ms to the median (the issue's).
- ``fire`` of one window (read spec and state, plan, copy the schedule's definition under the
  run's prefix, one fenced transaction) vs a plain ``submit`` of the same definition (write it,
  one transaction), on the same servers, interleaved: median and p99 over ``--fires``.
- **fire throughput** (issue 60.3): a schedule ``--every 1s --catchup all`` ``--backlog``
  windows behind, fired by one :meth:`Firer.fire` (every window decided, its run's definition
  copied, the runs published), in windows a second, against plain kazoo committing the same
  transactions, one a window, right after it (``bench_bounded.raw_fires``): ``--runs`` runs,
  the ratio judged run by run (goal >= 0.3). Local storage, and S3.

The issue's goal, "the schedule adds under 100 ms to the median from scheduled time to driver
running", needs the leader's loop (phase B wires it): this measures the part of that path that
exists now, the store's. Each fire is given the window as its clock, so that it fires exactly
one window and nothing waits.

``python -m benchmarks.bench_schedules [--fires 200] [--latency-fires 200] [--backlog 200]
[--runs 5]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.bench_bounded import raw_fires
from benchmarks.common import Result, file_config, fresh_root, s3_server, show_all, zookeeper
from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from recovery.leader.election import LeaderElection
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig, ZkAuth
from zkstore.jobs.definition import JobDefinition
from zkstore.records.strict import utc_moment
from zkstore.schedules.fire import Firer
from zkstore.schedules.schedule_records import ScheduleSpec
from zkstore.schedules.schedule_store import ScheduleStore
from zkstore.schedules.timing import ceil_second
from zkstore_dev.chaos.schedule_checker import read_runs, scheduled_run

START = datetime(2026, 11, 24, tzinfo=UTC)


def noop(ctx: object) -> None:
    return None


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def bench_fire(config: StoreConfig, fires: int, kind: str) -> list[Result]:
    with Cluster.open(config) as cluster:
        election = LeaderElection(cluster.zk, cluster.layout, "bench", lambda: None)
        election.contend()
        schedules = ScheduleStore.for_config(config, cluster.zk)
        firer = Firer.for_cluster(cluster, schedules)
        spec = ScheduleSpec(
            version=None,
            name="bench",
            created=START - timedelta(days=1),
            every=1,
            start_at=START,
        )
        schedules.create(spec, JobDefinition.for_function("bench", noop))
        fence = election.fence()
        fire_times: list[float] = []
        submit_times: list[float] = []
        for k in range(fires):
            began = time.perf_counter()
            report = firer.fire("bench", fence, START + timedelta(seconds=k))
            fire_times.append(time.perf_counter() - began)
            assert len(report.fired) == 1, report
            definition = JobDefinition.for_function(f"plain-{k}", noop)
            began = time.perf_counter()
            cluster.jobs.submit(definition)
            submit_times.append(time.perf_counter() - began)
        detail = f"{fires} fires and {fires} submits, interleaved"
        fire_median, submit_median = statistics.median(fire_times), statistics.median(submit_times)
        return [
            Result.of_runs(
                f"fire one window vs plain submit, median ({kind} storage)",
                [t * 1e3 for t in fire_times],
                [t * 1e3 for t in submit_times],
                "<= 3.0",
                unit="ms",
                detail=f"{detail}; the fire adds {1e3 * (fire_median - submit_median):.1f} ms",
            ),
            Result(
                f"fire one window vs plain submit, p99 ({kind} storage)",
                p99(fire_times) * 1e3,
                p99(submit_times) * 1e3,
                "<= 3.0",
                unit="ms",
                detail=detail,
            ),
        ]


def bench_throughput(config: StoreConfig, backlog: int, runs: int, kind: str) -> list[Result]:
    """Windows a second of one fire of a ``backlog``-window catch-up, against plain kazoo's
    transactions (one a window) right after it, run by run."""
    ours: list[float] = []
    raw: list[float] = []
    with Cluster.open(config) as cluster:
        election = LeaderElection(cluster.zk, cluster.layout, "bench", lambda: None)
        election.contend()
        schedules = ScheduleStore.for_config(config, cluster.zk)
        firer = Firer.for_cluster(cluster, schedules)
        for run in range(runs):
            name = f"backlog-{run}"
            spec = ScheduleSpec(
                version=None,
                name=name,
                created=START - timedelta(days=1),
                every=1,
                catchup="all",
                catchup_max=backlog,
                grace=0,
                start_at=START,
            )
            schedules.create(spec, JobDefinition.for_function(name, noop))
            now = START + timedelta(seconds=backlog - 1)
            began = time.perf_counter()
            report = firer.fire(name, election.fence(), now, limit=backlog, rounds=backlog)
            took = time.perf_counter() - began
            assert len(report.fired) == backlog and not report.more, report
            ours.append(backlog / took)
            raw.append(backlog / raw_fires(config.zk_hosts, backlog))
    return [
        Result.of_runs(
            f"fire throughput, a backlog of {backlog} windows ({kind} storage)",
            ours,
            raw,
            ">= 0.3",
            unit="windows/s",
            higher_is_better=True,
            detail=f"{runs} runs; raw: plain kazoo, the same transactions one a window, no payload",
        )
    ]


def bench_latency(hosts: str, fires: int, credentials: bool = False) -> list[Result]:
    """Scheduled time -> the run's job function started, against submit -> started
    (``credentials``: with digest credentials, each driver authenticated as its own job)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=10.0, session_timeout=6.0)
        if credentials:
            config = config.with_changes(zk_auth=ZkAuth.parse("bench:cost-of-credentials"))
        out = Path(tmp) / "out"
        local = LocalCluster(
            config,
            Path(tmp) / "runtime",
            extra_args=("--max-drivers", "32", "--schedule-min-interval", "1s"),
        )
        try:
            local.start_daemon("bench-1")
            local.wait_for_leader()
            with Client(config) as client:
                first = ceil_second(datetime.now(UTC)) + timedelta(seconds=3)
                schedules = ScheduleStore.for_config(config, client.cluster.zk)
                spec = ScheduleSpec(
                    version=None,
                    name="tick",
                    created=utc_moment(),
                    every=1,
                    start_at=first,
                    end_at=first + timedelta(seconds=fires),
                )
                definition = JobDefinition.for_function(
                    "tick", scheduled_run, args=(str(out / "tick"), 0.0)
                )
                schedules.create(spec, definition)
                submitted: dict[str, float] = {}
                for k in range(fires):
                    moment = first + timedelta(seconds=k, milliseconds=500)
                    time.sleep(max(0.0, moment.timestamp() - time.time()))
                    job_id = f"plain-{k:04d}"
                    submitted[job_id] = time.time()
                    client.submit_function(scheduled_run, str(out / "plain"), 0.0, job_id=job_id)
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and (
                    len(read_runs(out / "tick", "tick")) < fires
                    or len(read_runs(out / "plain", "tick")) < fires
                ):
                    time.sleep(0.5)
        finally:
            local.stop()
        scheduled = [
            run.first_start - run.window.timestamp()
            for run in read_runs(out / "tick", "tick")
            if run.window is not None
        ]
        plain = [
            run.first_start - submitted[run.job_id] for run in read_runs(out / "plain", "tick")
        ]
    added = (statistics.median(scheduled) - statistics.median(plain)) * 1e3
    detail = (
        f"{len(scheduled)} fires: median {statistics.median(scheduled) * 1e3:.0f} ms, p99 "
        f"{p99(scheduled) * 1e3:.0f} ms; {len(plain)} plain submits: median "
        f"{statistics.median(plain) * 1e3:.0f} ms, p99 {p99(plain) * 1e3:.0f} ms"
    )
    return [
        Result(
            "scheduled time -> driver running: added to the median of submit -> running, "
            "vs the goal of 100 ms",
            max(added, 0.0),
            100.0,
            "<= 1.0",
            unit="ms",
            detail=f"{detail}; the schedule adds {added:.0f} ms",
        ),
        Result(
            "scheduled time -> driver running, p99 vs submit -> running, p99",
            p99(scheduled) * 1e3,
            p99(plain) * 1e3,
            "<= 1.5",
            unit="ms",
            detail=detail,
        ),
    ]


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fires", type=int, default=200)
    parser.add_argument("--latency-fires", type=int, default=200)
    parser.add_argument("--backlog", type=int, default=200, help="windows of a throughput run")
    parser.add_argument("--runs", type=int, default=5, help="throughput runs")
    parser.add_argument(
        "--credentials",
        action="store_true",
        help="the latency rows with ZooKeeper digest credentials: every driver holds its own "
        "job's identity (issue 43: what per-job identities cost submit -> running)",
    )
    args = parser.parse_args(argv)
    results: list[Result] = []
    if args.latency_fires:
        with zookeeper() as hosts:
            results += show_all(bench_latency(hosts, args.latency_fires, args.credentials))
    with zookeeper() as hosts, tempfile.TemporaryDirectory() as tmp, s3_server() as s3:
        local = StoreConfig(zk_hosts=hosts, root=fresh_root(), storage_url=f"file://{tmp}/s")
        results += show_all(bench_fire(local, args.fires, "file"))
        results += show_all(bench_throughput(local, args.backlog, args.runs, "file"))
        options: dict[str, Any] = dict(s3.options)
        remote = local.with_changes(
            root=fresh_root(), storage_url=f"s3://{s3.bucket}/s", storage_options=options
        )
        results += show_all(bench_fire(remote, args.fires, "s3"))
        results += show_all(bench_throughput(remote, args.backlog, args.runs, "s3"))
    return results


if __name__ == "__main__":
    main()
