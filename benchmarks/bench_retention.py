"""Takeover with many kept results, and result retention (issue: bounded records).

- Takeover: a daemon becomes the leader of a cluster holding 100,000 CLEAN results (finished jobs
  kept for their retention period) and 100 pending jobs; time from its leadership (the
  ``R/leader/info`` node's creation) to the first attempt started (the first ``status`` written
  STARTING), both from ZooKeeper's own timestamps, and the takeover's own duration as its log
  line says it. ``--before DIR`` runs the same measurement first with the daemon's code taken
  from DIR (a checkout of the code before the change, e.g. ``git archive main``), so that both
  numbers are printed side by side; the ratio is after / before.
- Retention: the same results, all past a short retention: while the leader deletes them in
  bounded passes, a job submitted meanwhile starts about as soon as on an idle leader (the
  passes share the leader's loop with the jobs' events); and how long deleting them all takes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.common import Result, connect, file_config, zookeeper
from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from recovery.leader.retention import PAGE, PAGE_DELAY
from zkstore.layout import Layout
from zkstore.records.job_states import CLEAN, STARTING, SUCCEEDED
from zkstore.records.result_records import JobResult
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.ops import Create, Delete, Op
from zkstore.zookeeper.zk import ZooKeeper

PENDING = 100
#: creates per transaction, and transactions per pipelined round, when seeding
SEED_OPS = 200
SEED_ROUND = 25


def noop(ctx: object) -> None:
    """A job that does nothing."""


def seed_results(zk: ZooKeeper, layout: Layout, count: int, finished: datetime) -> None:
    """``count`` CLEAN results, as a leader leaves them, in pipelined multi-create rounds."""
    zk.ensure_path(layout.results)
    transactions: list[list[Op]] = []
    for i in range(count):
        job_id = f"done-{i:06d}"
        result = JobResult(
            version=None,
            job_id=job_id,
            state=CLEAN,
            outcome=SUCCEEDED,
            attempts=1,
            finished=finished,
            name=f"nightly report {i}",
            summary={"kind": "function", "entry": "report.py:main", "max_attempts": 3},
        )
        if not transactions or len(transactions[-1]) >= SEED_OPS:
            transactions.append([])
        transactions[-1].append(Create(layout.result(job_id), result.to_bytes()))
    for first in range(0, len(transactions), SEED_ROUND):
        errors = zk.commit_many(transactions[first : first + SEED_ROUND], timeout=120)
        failed = [e for e in errors if e is not None]
        if failed:
            raise RuntimeError(f"seeding failed: {failed[0]}")


def _delete_results(zk: ZooKeeper, layout: Layout) -> None:
    """Free the server's memory between two measurements."""
    names = zk.children(layout.results)
    for first in range(0, len(names), SEED_OPS * SEED_ROUND):
        chunk = names[first : first + SEED_OPS * SEED_ROUND]
        transactions = [
            [Delete(f"{layout.results}/{n}") for n in chunk[i : i + SEED_OPS]]
            for i in range(0, len(chunk), SEED_OPS)
        ]
        zk.commit_many(transactions, timeout=120)


@contextmanager
def _code(directory: str | None) -> Iterator[None]:
    """Daemons started within run the code of ``directory`` (None: this checkout): it comes
    first on their path, and is their working directory (``python -m`` puts that first)."""
    saved, cwd = os.environ.get("PYTHONPATH"), os.getcwd()
    if directory is not None:
        os.environ["PYTHONPATH"] = directory + (os.pathsep + saved if saved else "")
        os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(cwd)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _first_start(zk: ZooKeeper, layout: Layout, ids: list[str], timeout: float) -> float:
    """The ZooKeeper mtime (ms) of the first status written STARTING among ``ids``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        starts = [
            item[1].mtime
            for item in zk.get_many([layout.status(job_id) for job_id in ids])
            if item is not None and json.loads(item[0])["state"] == STARTING
        ]
        if starts:
            return float(min(starts))
        time.sleep(0.1)
    raise TimeoutError(f"no job started within {timeout:g} s of the takeover")


def measure_takeover(hosts: str, results: int, code: str | None) -> tuple[float, float]:
    """(leadership to first start, the takeover's own duration), seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=60.0)
        layout = Layout(config.base_path)
        zk = connect(hosts, timeout=120)
        try:
            seed_results(zk, layout, results, utc_moment())
            with Client(config) as client:
                ids = [client.submit_function(noop, job_id=f"p-{i:04d}") for i in range(PENDING)]
            with _code(code):
                local = LocalCluster(config, Path(tmp) / "rt")
                try:
                    local.start_daemon("takeover")
                    local.wait_for_leader(timeout=300)
                    _, info = zk.get(layout.leader_info)
                    first = _first_start(zk, layout, ids, 300)
                    took = _takeover_seconds(local, 300)
                finally:
                    local.stop()
            _delete_results(zk, layout)
        finally:
            zk.stop()
    return (first - info.ctime) / 1000.0, took


def _count(zk: ZooKeeper, path: str) -> int:
    stat = zk.exists(path)
    return int(stat.numChildren) if stat is not None else 0


def _takeover_seconds(local: LocalCluster, timeout: float) -> float:
    """The duration the leader logged for its takeover ("... recovered in X s")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"recovered in ([0-9.]+) s", local.daemons["takeover"].log())
        if found:
            return float(found.group(1))
        time.sleep(0.1)
    raise TimeoutError("the leader never logged its takeover")


def bench_takeover(hosts: str, results: int, before: str | None) -> list[Result]:
    after_first, after_took = measure_takeover(hosts, results, None)
    if before is None:
        return [
            Result(
                f"takeover with {results} kept results and {PENDING} pending jobs: leadership "
                "to the first start",
                after_first,
                2.0,
                "<= 1.0",
                detail=f"goal: 2 s; takeover logged {after_took:.2f} s",
            )
        ]
    before_first, before_took = measure_takeover(hosts, results, before)
    name = f"takeover with {results} kept results and {PENDING} pending jobs"
    return [
        Result(
            f"{name}: leadership to the first start, after vs before",
            after_first,
            before_first,
            "<= 0.5",
        ),
        Result(
            f"{name}: the takeover as logged, after vs before", after_took, before_took, "<= 0.5"
        ),
    ]


def _start_latency(client: Client, job_id: str) -> float:
    """Seconds from a no-op job's submission (its handle's creation) to its first start (its
    status written STARTING), from ZooKeeper's own timestamps."""
    zk, layout = client.cluster.zk, client.cluster.layout
    client.submit_function(noop, job_id=job_id)
    created = zk.get(layout.job_handle(job_id))[1].ctime
    return float(_first_start(zk, layout, [job_id], 120) - created) / 1000.0


def bench_retention(hosts: str, results: int) -> Result:
    """Every result past a retention of 30 s: the leader deletes them in bounded passes; a job
    submitted meanwhile starts about as soon as one submitted on an idle leader."""
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=60.0)
        layout = Layout(config.base_path)
        zk = connect(hosts, timeout=120)
        local = LocalCluster(config, Path(tmp) / "rt", extra_args=("--keep-results", "30s"))
        try:
            seed_results(zk, layout, results, datetime(2020, 1, 1, tzinfo=UTC))
            local.start_daemon("retention")
            local.wait_for_leader(timeout=300)
            start = time.monotonic()
            with Client(config) as client:
                while _count(zk, layout.results) > results * 0.9:
                    time.sleep(0.2)
                busy = statistics.median(_start_latency(client, f"busy-{i}") for i in range(5))
                deadline = start + 3600
                while (left := _count(zk, layout.results)) > 5 and time.monotonic() < deadline:
                    time.sleep(0.5)
                took = time.monotonic() - start
                idle = statistics.median(_start_latency(client, f"idle-{i}") for i in range(5))
        finally:
            local.stop()
            zk.stop()
    if left > 5:
        raise TimeoutError(f"{left} expired results were still there after an hour")
    return Result(
        f"retention of {results} expired results: a job submitted while the leader deletes them "
        "starts within (median of 5)",
        busy,
        idle,
        "<= 3.0",
        detail=f"baseline: the same on an idle leader; all deleted in {took:.0f} s "
        f"(pages of {PAGE}, {PAGE_DELAY:g} s apart)",
    )


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=int, default=100_000, help="CLEAN results kept")
    parser.add_argument("--before", metavar="DIR", help="daemon code to compare with")
    parser.add_argument("--retention", action="store_true", help="also measure retention")
    parser.add_argument("--no-takeover", action="store_true", help="only measure retention")
    args = parser.parse_args(argv)
    found = []
    with zookeeper() as hosts:
        takeover = [] if args.no_takeover else bench_takeover(hosts, args.results, args.before)
        for result in takeover:
            result.show()
            found.append(result)
        if args.retention:
            retention = bench_retention(hosts, args.results)
            retention.show()
            found.append(retention)
    return found


if __name__ == "__main__":
    main()
