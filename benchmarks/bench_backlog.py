"""Backlog benchmarks (issue: corrupt and hostile state, and a backlog that drains).

- Drain: N queued no-op jobs on a daemon with ``--max-drivers 4``, from submission until every
  one has a result, against N/4 times the time of one such job alone on the same daemon
  (goal <= 1.5x: a freed slot is refilled at once, not at the next periodic pass).
- Takeover: a daemon becomes the leader of a cluster with 2,000 pending jobs; time from its
  leadership (the ``R/leader/info`` node's creation) to the first attempt started (the first
  ``status`` written STARTING), both read from ZooKeeper's own timestamps (goal < 2 s).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.common import Result, file_config, show_all, wait_all_exist, zookeeper
from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from zkstore.config import StoreConfig
from zkstore.records.job_states import STARTING

SLOTS = 4


def noop(ctx: object) -> None:
    """A job that does nothing: what is measured is the runtime's own cost per job."""


def _wait_results(client: Client, job_ids: list[str], timeout: float) -> None:
    layout = client.cluster.layout
    wait_all_exist(client.cluster.zk, [layout.result(job_id) for job_id in job_ids], timeout)


def bench_drain(hosts: str, count: int) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=30.0)
        local = LocalCluster(config, Path(tmp) / "rt", extra_args=("--max-drivers", str(SLOTS)))
        try:
            local.start_daemon("drain")
            local.wait_for_leader()
            with Client(config) as client:
                singles = []
                for i in range(3):
                    start = time.monotonic()
                    job_id = client.submit_function(noop, job_id=f"alone-{i}")
                    _wait_results(client, [job_id], 60)
                    singles.append(time.monotonic() - start)
                single = sorted(singles)[1]
                start = time.monotonic()
                ids = [client.submit_function(noop, job_id=f"q-{i:04d}") for i in range(count)]
                _wait_results(client, ids, 600)
                drain = time.monotonic() - start
        finally:
            local.stop()
    return Result(
        f"drain of {count} queued no-op jobs on {SLOTS} driver slots",
        drain,
        count / SLOTS * single,
        "<= 1.5",
        detail=f"one job alone: {single:.2f} s (median of 3)",
    )


def _submit_many(config: StoreConfig, count: int) -> None:
    def submit(first: int) -> None:
        with Client(config) as client:
            for i in range(first, count, 8):
                client.submit_function(noop, job_id=f"p-{i:05d}")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(submit, range(8)))


def bench_takeover(hosts: str, count: int) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=30.0)
        _submit_many(config, count)
        local = LocalCluster(config, Path(tmp) / "rt", extra_args=("--max-drivers", str(SLOTS)))
        try:
            local.start_daemon("takeover")
            local.wait_for_leader(timeout=120)
            with Client(config) as client:
                zk, layout = client.cluster.zk, client.cluster.layout
                _, info = zk.get(layout.leader_info)
                first = None
                deadline = time.monotonic() + 120
                while first is None and time.monotonic() < deadline:
                    statuses = zk.get_many([layout.status(f"p-{i:05d}") for i in range(count)])
                    starts = [
                        stat.mtime
                        for item in statuses
                        if item is not None
                        for data, stat in [item]
                        if json.loads(data)["state"] == STARTING or json.loads(data)["attempt"]
                    ]
                    first = min(starts) if starts else None
                    time.sleep(0.1)
        finally:
            local.stop()
    if first is None:
        raise TimeoutError("no job started within 120 s of the takeover")
    return Result(
        f"takeover with {count} pending jobs: leadership to the first start",
        (first - info.ctime) / 1000.0,
        2.0,
        "<= 1.0",
        detail="goal: 2 s",
    )


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=40, help="queued jobs of the drain")
    parser.add_argument("--pending", type=int, default=2000, help="pending jobs at takeover")
    args = parser.parse_args(argv)
    with zookeeper() as hosts:
        return show_all((bench_drain(hosts, args.jobs), bench_takeover(hosts, args.pending)))


if __name__ == "__main__":
    main()
