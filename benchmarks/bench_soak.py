"""The daemons' memory under a steady load (issue 62): does a daemon grow with the jobs it has
seen?

Two daemons (``--warm-drivers 0``), a no-op job (``FILE.py:FUNCTION``) submitted every
``--every`` seconds (0.25) through the Python API (:meth:`recovery.Client.submit_file`) beside a
schedule of a window every 10 s, until ``--jobs`` jobs (10,000) are submitted; then every result
is awaited. Every ``--sample`` seconds (30), each daemon's resident memory, threads and open
descriptors (``/proc``) and its Python heap (the blocks its allocator holds, as its member record
tells them: not ``/metrics``, whose scrapes read every kept result) are
sampled, with the count of results recorded: the leader (the first daemon) and the member (the
second, which runs about half the drivers) apart.

The figure, for each: its mean resident memory over the last fifth of the samples against the
first fifth's, both after the first third of the jobs (at most 1,000: imports, caches and the
first buffers filled); goal ≤ 1.10 (the issue's "within 10%"). A daemon that kept something per
job grew in a straight line: the leader 48 to 74 MiB over 4,821 jobs before (about 5.5 KB a
job). Also told: how many jobs SUCCEEDED and how many runs the schedule made. The Python heap
is a sawtooth (the blocks count the cyclic garbage the collector has not freed yet): its
samples say whether it keeps rising, the resident memory is the figure.

``python -m benchmarks.bench_soak [--jobs 10000] [--every 0.25] [--sample 30]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import Result, file_config, show_all, zookeeper
from recovery.client.api import Client
from recovery.dev.localcluster import DaemonProcess, LocalCluster
from zkstore.errors import HandleNotFound, ZkStoreError
from zkstore.layout import Layout
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.job_states import SUCCEEDED
from zkstore.records.record import read_record
from zkstore.records.result_records import JobResult
from zkstore.zookeeper.zk import ZooKeeper

NOOP = "def noop(ctx):\n    return None\n"
SCHEDULE = "tick"


@dataclass(frozen=True)
class Sample:
    """One daemon at one moment."""

    seconds: float
    recorded: int
    rss: int
    threads: int
    descriptors: int
    heap_blocks: float


def proc_sample(pid: int) -> tuple[int, int, int]:
    """Resident bytes, threads and open descriptors of ``pid``."""
    with open(f"/proc/{pid}/statm") as statm:
        rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    with open(f"/proc/{pid}/status") as status:
        threads = next(int(line.split()[1]) for line in status if line.startswith("Threads:"))
    return rss, threads, len(os.listdir(f"/proc/{pid}/fd"))


def heap_blocks(zk: ZooKeeper, layout: Layout, daemon: DaemonProcess) -> float:
    """The Python heap the daemon last reported in its member record (every 30 s): not its
    ``/metrics``, whose scrape reads the whole cluster, every kept result included, and so
    grows the daemon's memory with the results it is asked about."""
    info = read_record(zk, MemberInfo, layout.member(daemon.daemon_id))
    blocks = info.heap_blocks if info is not None else None
    return float("nan") if blocks is None else float(blocks)


def recorded(zk: ZooKeeper, results_path: str) -> int:
    """The results recorded of the jobs submitted (the schedule's runs not counted)."""
    try:
        return sum(1 for name in zk.children(results_path) if not name.startswith(SCHEDULE))
    except HandleNotFound:
        return 0


class Sampler(threading.Thread):
    """Samples both daemons every ``every`` seconds until stopped."""

    def __init__(
        self, daemons: dict[str, DaemonProcess], zk: ZooKeeper, layout: Layout, every: float
    ):
        super().__init__(name="sampler", daemon=True)
        self.daemons, self.zk, self.layout, self.every = daemons, zk, layout, every
        self.samples: dict[str, list[Sample]] = {name: [] for name in daemons}
        #: print each sample as it is taken (a long run shows its progress)
        self.verbose = every >= 10
        self.stopped = threading.Event()
        self.started_at = time.monotonic()

    def sample(self) -> None:
        try:
            count = recorded(self.zk, self.layout.results)
        except ZkStoreError as exc:  # a sample missed, not the run
            print(f"  a sample missed: {exc}", flush=True)
            return
        for name, daemon in self.daemons.items():
            rss, threads, fds = proc_sample(daemon.pid)
            taken = Sample(
                time.monotonic() - self.started_at,
                count,
                rss,
                threads,
                fds,
                heap_blocks(self.zk, self.layout, daemon),
            )
            self.samples[name].append(taken)
            if self.verbose:
                print(f"  {name:6s} {row(taken)}", flush=True)

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            self.sample()


def growth(samples: list[Sample], warm: int) -> float:
    """Mean resident memory of the last fifth of the samples after ``warm`` jobs, over the first
    fifth's (nan with fewer than five)."""
    kept = [s for s in samples if s.recorded >= warm]
    if len(kept) < 5:
        return float("nan")
    fifth = len(kept) // 5
    first = sum(s.rss for s in kept[:fifth]) / fifth
    last = sum(s.rss for s in kept[-fifth:]) / fifth
    return last / first


def row(s: Sample) -> str:
    return (
        f"{s.seconds:7.0f} s {s.recorded:7d} jobs  RSS {s.rss / 2**20:6.1f} MiB  "
        f"heap {s.heap_blocks:9.0f} blocks  {s.threads:3d} threads  {s.descriptors:3d} fds"
    )


def table(name: str, samples: list[Sample]) -> str:
    step = max(1, len(samples) // 12)
    rows = [f"    {row(s)}" for s in [*samples[::step], *samples[-1:]]]
    return f"  {name}:\n" + "\n".join(dict.fromkeys(rows))


def submit_all(client: Client, target: str, jobs: int, every: float, backlog: int) -> list[str]:
    """``jobs`` submissions, one every ``every`` seconds (a late one is not made up for in a
    burst: the rate never goes above the one asked), and none while ``backlog`` submitted jobs
    have no result: on a machine too loaded to run them at that rate, jobs waiting would be
    counted as memory kept per job (the leader rightly keeps what a live job needs)."""
    ids: list[str] = []
    due = time.monotonic()
    results = client.cluster.layout.results
    for n in range(jobs):
        if n % 10 == 0:
            while n - recorded(client.cluster.zk, results) > backlog:
                time.sleep(0.5)
        ids.append(client.submit_file(target))
        due = max(due + every, time.monotonic())
        time.sleep(max(0.0, due - time.monotonic()))
    return ids


def outcomes(zk: ZooKeeper, client: Client, ids: list[str], timeout: float) -> int:
    """How many of ``ids`` SUCCEEDED, once every one has a result (or ``timeout`` passed)."""
    layout = client.cluster.layout
    deadline = time.monotonic() + timeout
    while recorded(zk, layout.results) < len(ids) and time.monotonic() < deadline:
        time.sleep(1.0)
    succeeded = 0
    for job_id in ids:
        result = read_record(zk, JobResult, layout.result(job_id))
        succeeded += result is not None and result.outcome == SUCCEEDED
    return succeeded


def run(args: argparse.Namespace) -> list[Result]:
    with zookeeper() as hosts, tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=10.0)
        job_file = Path(tmp) / "noop_job.py"
        job_file.write_text(NOOP)
        local = LocalCluster(config, Path(tmp) / "rt", verbose=False)
        try:
            leader = local.start_daemon("leader")
            local.wait_for_leader()
            member = local.start_daemon("member")
            schedule = [sys.executable, "-m", "recovery.cli.main", "schedules", "create"]
            subprocess.run(
                [*schedule, SCHEDULE, f"{job_file}:noop", "--every", "10s"],
                env=local.environment(),
                check=True,
                capture_output=True,
            )
            with Client(config) as client:
                zk = client.cluster.zk
                while len(zk.children(client.cluster.layout.members)) < 2:
                    time.sleep(0.1)
                sampler = Sampler(
                    {"leader": leader, "member": member},
                    zk,
                    client.cluster.layout,
                    args.sample,
                )
                sampler.sample()
                sampler.start()
                began = time.monotonic()
                ids = submit_all(client, f"{job_file}:noop", args.jobs, args.every, args.backlog)
                rate = len(ids) / (time.monotonic() - began)
                succeeded = outcomes(zk, client, ids, timeout=600)
                sampler.stopped.set()
                sampler.join()
                sampler.sample()
                runs = [
                    j for j in zk.children(client.cluster.layout.results) if j.startswith(SCHEDULE)
                ]
        finally:
            local.stop()
    warm = min(1000, args.jobs // 3)
    results = [
        Result(
            f"soak: the {name}'s resident memory, last fifth over first fifth, {args.jobs} jobs "
            f"at {rate:.2f}/s beside a 10-s schedule",
            growth(sampler.samples[name], warm),
            1.0,
            "<= 1.10",
            unit="x",
            detail=f"after the first {warm} jobs; {succeeded} of {len(ids)} SUCCEEDED, "
            f"{len(runs)} schedule runs recorded",
        )
        for name in ("leader", "member")
    ]
    shown = show_all(results)
    for name, samples in sampler.samples.items():
        print(table(name, samples), flush=True)
    return shown


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs submitted")
    parser.add_argument("--every", type=float, default=0.25, help="seconds between submissions")
    parser.add_argument("--sample", type=float, default=30.0, help="seconds between samples")
    parser.add_argument(
        "--backlog", type=int, default=40, help="at most this many jobs submitted without a result"
    )
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
