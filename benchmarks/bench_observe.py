"""Observability benchmarks (issue: logs, HTTP API, metrics, status page).

1. ``GET /api/v1/jobs`` and ``GET /metrics`` of a daemon with 1,000 jobs (800 waiting, 100
   running with a checkpoint each, 100 finished), against the same data read with the CLI's
   pipelined reads in process (``zkstore jobs list --format json`` without its process start:
   listing, snapshots, describe, JSON). Goal <= 1.5x.
2. Log shipping: a job printing 10 MB (100,000 lines, unbuffered, as drivers run) to its log
   file with its shipper following it, against the same job writing the same file without one.
   The job's own time is what shipping costs it (goal <= 1.1x); the time until the whole log is
   stored is shown beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.common import Result, file_config, seed_entries, timed, zookeeper
from recovery.member.log_shipping import Shipping, start_process
from recovery.observe.access import AllowedHosts, Tokens
from recovery.observe.http_api import Api
from recovery.observe.metrics import DaemonMetrics, LeadershipStats
from recovery.observe.server import HttpServer
from recovery.settings import DaemonSettings, HttpAddress
from recovery.shared.processes import identify
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.logs import JobLogs
from zkstore.jobs.snapshot import read_listing, read_snapshots
from zkstore.layout import StorageLayout
from zkstore.payloads.storage import StateStorage
from zkstore.records.job_records import JobStatus, RunningInfo
from zkstore.records.job_states import PENDING, SUCCEEDED
from zkstore.records.strict import utc_moment
from zkstore.service.job_view import describe
from zkstore.zookeeper.ops import Create, Op

PRINTER = "line = 'x' * 99\nfor i in range({lines}):\n    print(line)\n"


def seed_jobs(cluster: Cluster, count: int) -> None:
    """``count`` jobs: 80% PENDING, 10% RUNNING with a checkpoint, 10% finished (CLEAN)."""
    names = seed_entries(cluster.jobs.handles, count, lambda i: b"x" * 512)
    layout = cluster.layout
    running, finished = names[: count // 10], names[count // 10 : count // 5]
    transactions: list[list[Op]] = []
    for name in names[count // 10 :]:
        status = JobStatus(version=None, state=PENDING, updated=utc_moment())
        transactions.append(
            [Create(layout.job_dir(name)), Create(layout.status(name), status.to_bytes())]
        )
    cluster.zk.commit_many(transactions)
    for name in running:
        status = JobStatus(version=None, state="STARTING", attempt=1, updated=utc_moment())
        info = RunningInfo(version=None, attempt=1, host="bench", pid=1, started=utc_moment())
        cluster.zk.commit(
            [
                Create(layout.job_dir(name)),
                Create(layout.status(name), status.to_bytes()),
                Create(layout.running(name), info.to_bytes(), ephemeral=True),
            ]
        )
        cluster.checkpoints(name).add({"step": 1})
    for name in finished:
        cluster.results.create_dirty(name, SUCCEEDED, attempts=1)
        cluster.results.mark_clean(name)


def serve(cluster: Cluster, config: StoreConfig) -> tuple[HttpServer, Api, str]:
    """The HTTP side of a standby daemon over ``cluster``, in this process."""
    daemon: Any = SimpleNamespace(
        settings=DaemonSettings(store=config, daemon_id="bench"),
        cluster=cluster,
        is_leader=False,
        launcher=SimpleNamespace(launched=0),
    )
    api = Api(
        daemon,
        DaemonMetrics(daemon, LeadershipStats()),
        tokens=Tokens(None),
        hosts=AllowedHosts.of(None, "127.0.0.1"),
    )
    server = HttpServer(api.application(), HttpAddress("127.0.0.1", 0))
    bound = server.start()
    return server, api, f"http://{bound}"


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as answer:
        body: bytes = answer.read()
        return body


def bench_api(hosts: str, count: int, rounds: int) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=60.0)
        with Cluster.open(config) as cluster:
            seed_jobs(cluster, count)
            server, api, url = serve(cluster, config)
            try:
                return _measure_api(cluster, url, count, rounds)
            finally:
                server.stop()
                api.close()


def _measure_api(cluster: Cluster, url: str, count: int, rounds: int) -> list[Result]:
    def cli_reads() -> None:
        listing = read_listing(cluster.zk, cluster.layout)
        snapshots = read_snapshots(cluster.zk, cluster.layout, listing.job_ids(), listing=listing)
        text = json.dumps([describe(s) for s in snapshots.values()], indent=2, sort_keys=True)
        assert len(snapshots) == count and text

    def jobs() -> None:
        assert len(json.loads(fetch(f"{url}/api/v1/jobs?all=true"))) == count

    def metrics() -> None:
        running = f'zkstore_jobs{{state="RUNNING"}} {count // 10:.1f}'.encode()
        assert running in fetch(f"{url}/metrics")

    for warm in (cli_reads, jobs, metrics):
        warm()
    timings = [(timed(cli_reads), timed(jobs), timed(metrics)) for _ in range(rounds)]
    baseline = statistics.median(t[0] for t in timings)
    detail = f"{rounds} interleaved rounds, {count} jobs"
    return [
        Result(
            "GET /api/v1/jobs vs the CLI's pipelined reads",
            statistics.median(t[1] for t in timings),
            baseline,
            "<= 1.5",
            detail=detail,
        ),
        Result(
            "GET /metrics vs the CLI's pipelined reads",
            statistics.median(t[2] for t in timings),
            baseline,
            "<= 1.5",
            detail=detail + "; metrics also read daemons, leader, checkpoints, storage",
        ),
    ]


def bench_shipping(lines: int, rounds: int) -> Result:
    """Run the printer with and without its shipper, interleaved; median job times. Shipping
    needs no ZooKeeper: it runs first, before one is started (its JVM warming up would be
    noise)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = StoreConfig(storage_url=f"file://{tmp}/s")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # The daemon's log shipper, as a daemon starts it (one process for every job here).
        shipping = Shipping(Path(tmp) / "work", "bench", config, start_process(sys.executable, env))
        plain, shipped, stored = [], [], []
        try:
            for round_ in range(rounds):
                plain.append(_run_printer(Path(tmp) / f"plain-{round_}.log", lines, env)[0])
                job_time, until_stored = _run_printer(
                    Path(tmp) / f"shipped-{round_}.log",
                    lines,
                    env,
                    shipping=shipping,
                    job=f"j{round_}",
                )
                shipped.append(job_time)
                stored.append(until_stored)
        finally:
            shipping.close()
        size = (Path(tmp) / "plain-0.log").stat().st_size
        logs = JobLogs(StateStorage(config.storage_url), StorageLayout(config.cluster_id), "j0")
        assert logs.attempt(1).size == size and logs.attempt(1).ended
    return Result(
        f"a job printing {size / 1e6:.0f} MB, its log shipped vs written to a file only",
        statistics.median(shipped),
        statistics.median(plain),
        "<= 1.1",
        detail=f"{rounds} interleaved rounds; whole log stored after "
        f"{statistics.median(stored):.2f} s (median)",
    )


def _run_printer(
    log: Path,
    lines: int,
    env: dict[str, str],
    *,
    shipping: Shipping | None = None,
    job: str = "",
) -> tuple[float, float]:
    """The printer's own time, and the time until its log is stored whole (its end.json)."""
    start = time.perf_counter()
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", PRINTER.format(lines=lines)], stdout=out, stderr=out, env=env
        )
    if shipping is not None:
        shipping.follow(job, 1, log, identify(process.pid), offset=0)
    process.wait()
    job_time = time.perf_counter() - start
    if shipping is not None:
        end = shipping.directory / f"{job}-attempt-1.json"  # removed once end.json is stored
        deadline = time.monotonic() + 120
        while end.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{job}'s log not stored within 120 s")
            time.sleep(0.01)
    return job_time, time.perf_counter() - start


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ship-rounds", type=int, default=21, help="short runs: more rounds")
    args = parser.parse_args(argv)
    results = [bench_shipping(args.lines, args.ship_rounds)]
    results[0].show()
    with zookeeper() as hosts:
        for result in bench_api(hosts, args.jobs, args.rounds):
            result.show()
            results.append(result)
    return results


if __name__ == "__main__":
    main()
