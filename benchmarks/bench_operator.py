"""Operator benchmark (issue: the operator CLI).

``lingering`` over 10,000 handles and 10,000 payloads, on local storage and on a moto S3 server,
against the raw cost of the same reads: listing the storage prefix plus reading the znodes with
pipelined kazoo calls (goal <= 1.5x).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from typing import Any

from benchmarks.common import Result, fresh_root, s3_server, seed_entries, timed, zookeeper
from zkstore.admin.lingering import find_lingering
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig


def bench_lingering(config: StoreConfig, count: int, rounds: int, label: str) -> Result:
    with Cluster.open(config.with_changes(timeout=120.0)) as cluster:
        seed_entries(cluster.jobs.handles, count, lambda i: b"x" * 512)
        kazoo = cluster.zk.kazoo
        fs = cluster.storage.fs
        prefix = cluster.storage.path_of(cluster.storage.url(cluster.storage_layout.jobs + "/x"))
        prefix = prefix.rsplit("/", 1)[0]

        def raw() -> None:
            listed = fs.find(prefix, detail=True)
            path = cluster.layout.current_jobs
            pending = [kazoo.get_async(f"{path}/{name}") for name in kazoo.get_children(path)]
            for result in pending:
                result.get(timeout=60)
            assert len(listed) == count

        def ours() -> None:
            findings = find_lingering(cluster, min_age=0)
            assert findings == [], findings[:3]

        raw()
        ours()
        timings = [(timed(raw), timed(ours)) for _ in range(rounds)]
    return Result(
        f"lingering over {count} handles and payloads ({label})",
        statistics.median(t[1] for t in timings),
        statistics.median(t[0] for t in timings),
        "<= 1.5",
        detail=f"{rounds} interleaved rounds",
    )


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--handles", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    results = []
    with zookeeper() as hosts, tempfile.TemporaryDirectory() as tmp, s3_server() as s3:
        local = StoreConfig(zk_hosts=hosts, root=fresh_root(), storage_url=f"file://{tmp}/storage")
        remote = StoreConfig(
            zk_hosts=hosts,
            root=fresh_root(),
            storage_url=f"s3://{s3.bucket}/zkstore",
            storage_options=dict[str, Any](s3.options),
        )
        for config, label in ((local, "local storage"), (remote, "moto S3")):
            result = bench_lingering(config, args.handles, args.rounds, label)
            result.show()
            results.append(result)
    return results


if __name__ == "__main__":
    main()
