"""Store benchmarks (issue: the foundation).

- ``add`` of a 1 KB state vs a plain fsspec write plus a plain kazoo create (goal <= 1.3x).
- ``get_all`` of 10,000 entries with payloads on local storage vs plain pipelined kazoo
  ``get_async`` over the same nodes (goal >= 0.5x its throughput).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import uuid
from collections.abc import Callable
from typing import Any

from fsspec.core import url_to_fs

from benchmarks.common import (
    Result,
    best_of,
    connect,
    fresh_root,
    s3_server,
    seed_entries,
    timed,
    zookeeper,
)
from zkstore.payloads.serializers import JsonSerializer
from zkstore.payloads.storage import StateStorage
from zkstore.payloads.store import ZooKeeperStateHandleStore
from zkstore.zookeeper.zk import ZooKeeper


def make_store(
    zk: ZooKeeper, path: str, storage: StateStorage
) -> ZooKeeperStateHandleStore[object]:
    zk.ensure_path(path)
    return ZooKeeperStateHandleStore(
        zk,
        path,
        storage,
        JsonSerializer(),
        payload_prefix=lambda name: f"bench/jobs/{name}/definition",
    )


def bench_add(
    hosts: str, storage_url: str, options: dict[str, Any], count: int, rounds: int
) -> Result:
    """Per-op time of ``store.add`` vs a plain fsspec write + a plain kazoo create.

    Both write payloads under the same key layout (``<cluster>/jobs/<job>/definition/<uuid>``),
    so the ratio is the cost of zkstore's protocol: durable create-only write (one fsync on local
    disk), handle, 3-op transaction with lock, versus an unsynced write and a bare create.
    """
    state = {"blob": "x" * 1000}
    payload = JsonSerializer().dumps(state)
    zk = connect(hosts)
    kazoo = zk.kazoo
    root = fresh_root()
    raw_zk = f"{root}/raw"
    kazoo.ensure_path(raw_zk)
    storage = StateStorage(f"{storage_url}/store", options)
    local = storage_url.startswith("file:")
    extra = {"auto_mkdir": True} if local else {}
    raw_fs, raw_root = url_to_fs(f"{storage_url}/raw", **options, **extra, skip_instance_cache=True)
    store = make_store(zk, f"{root}/store", storage)

    def raw() -> None:
        for _ in range(count):
            name = uuid.uuid4().hex[:16]
            key = f"{raw_root}/bench/jobs/{name}/definition/{uuid.uuid4().hex}.json"
            raw_fs.pipe_file(key, payload)
            kazoo.create(f"{raw_zk}/{name}", b'{"uri": "file:///x"}')

    def ours() -> None:
        for _ in range(count):
            store.add(uuid.uuid4().hex[:16], state)

    raw()  # warm up both paths
    ours()
    timings = [(timed(raw), timed(ours)) for _ in range(rounds)]
    zk.stop()
    baseline = statistics.median(t[0] for t in timings) / count
    measured = statistics.median(t[1] for t in timings) / count
    kind = storage_url.split(":", 1)[0]
    return Result(
        f"add 1 KB state ({kind} storage)",
        measured * 1e3,
        baseline * 1e3,
        "<= 1.3",
        unit="ms/op",
        detail=f"{count} ops x {rounds} interleaved rounds",
    )


def bench_get_all(hosts: str, count: int, rounds: int) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        zk = connect(hosts, timeout=120)
        path = f"{fresh_root()}/currentJobs"
        store = make_store(zk, path, StateStorage(f"file://{tmp}/store"))
        seed_entries(store, count, lambda i: JsonSerializer().dumps({"i": i}))
        kazoo = zk.kazoo

        def raw() -> None:
            names = kazoo.get_children(path)
            pending = [kazoo.get_async(f"{path}/{name}") for name in names]
            for result in pending:
                result.get(timeout=60)

        def ours() -> None:
            result = store.get_all()
            assert len(result.entries) == count and not result.broken

        raw()
        ours()
        baseline = best_of(rounds, raw)
        measured = best_of(rounds, ours)
        once = timed(ours)
        zk.stop()
    return Result(
        f"get_all {count} entries (throughput vs raw get_async)",
        count / measured,
        count / baseline,
        ">= 0.5",
        unit="entries/s",
        higher_is_better=True,
        detail=f"one recovery read of {count} jobs with payloads: {once:.2f} s",
    )


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--adds", type=int, default=300)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    results = []
    with zookeeper() as hosts, tempfile.TemporaryDirectory() as tmp, s3_server() as s3:
        runs: tuple[Callable[[], Result], ...] = (
            lambda: bench_add(hosts, f"file://{tmp}", {}, args.adds, args.rounds),
            lambda: bench_add(hosts, f"s3://{s3.bucket}", s3.options, args.adds, args.rounds),
            lambda: bench_get_all(hosts, args.entries, args.rounds),
        )
        for run in runs:
            result = run()
            result.show()
            results.append(result)
    return results


if __name__ == "__main__":
    main()
