"""Schedule benchmarks (issue 25, phase A): what a fire costs the leader.

- ``fire`` of one window (read spec and state, plan, copy the schedule's definition under the
  run's prefix, one fenced transaction) vs a plain ``submit`` of the same definition (write it,
  one transaction), on the same servers, interleaved: median and p99 over ``--fires``.

The issue's goal, "the schedule adds under 100 ms to the median from scheduled time to driver
running", needs the leader's loop (phase B wires it): this measures the part of that path that
exists now, the store's. Each fire is given the window as its clock, so that it fires exactly
one window and nothing waits.

``python -m benchmarks.bench_schedules [--fires 200]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.common import Result, fresh_root, s3_server, show_all, zookeeper
from recovery.leader.election import LeaderElection
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.schedules.fire import Firer
from zkstore.schedules.records import ScheduleSpec
from zkstore.schedules.store import ScheduleStore
from zkstore.schedules.timing import format_time

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
            created=format_time(START - timedelta(days=1)),
            every=1,
            start_at=format_time(START),
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
            Result(
                f"fire one window vs plain submit, median ({kind} storage)",
                fire_median * 1e3,
                submit_median * 1e3,
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


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fires", type=int, default=200)
    args = parser.parse_args(argv)
    results: list[Result] = []
    with zookeeper() as hosts, tempfile.TemporaryDirectory() as tmp, s3_server() as s3:
        local = StoreConfig(zk_hosts=hosts, root=fresh_root(), storage_url=f"file://{tmp}/s")
        results += show_all(bench_fire(local, args.fires, "file"))
        options: dict[str, Any] = dict(s3.options)
        remote = local.with_changes(
            root=fresh_root(), storage_url=f"s3://{s3.bucket}/s", storage_options=options
        )
        results += show_all(bench_fire(remote, args.fires, "s3"))
    return results


if __name__ == "__main__":
    main()
