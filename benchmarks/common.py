"""What every benchmark shares: servers, timing, and one way to print a result line."""

from __future__ import annotations

import json
import logging
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kazoo.protocol.states import WatchedEvent

from zkstore.config import DEFAULT_SESSION_TIMEOUT, DEFAULT_TIMEOUT, StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.handle import Handle
from zkstore.ops import Op
from zkstore.store import ZooKeeperStateHandleStore
from zkstore.zk import ZooKeeper


@contextmanager
def zookeeper() -> Iterator[str]:
    """A ZooKeeper to measure against: ``$ZKSTORE_ZK`` if set, else an embedded one with a
    production server's JVM (not the development server's short one)."""
    if os.environ.get("ZKSTORE_ZK"):
        yield os.environ["ZKSTORE_ZK"]
        return
    with EmbeddedZooKeeper(short_jvm=False) as server:
        yield server.connect_string


@dataclass
class S3:
    bucket: str
    options: dict[str, object]


@contextmanager
def s3_server() -> Iterator[S3]:
    """A moto S3 server on 127.0.0.1 with one bucket."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    credentials = {"aws_access_key_id": "bench", "aws_secret_access_key": "bench"}
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **credentials).create_bucket(
        Bucket="bench"
    )
    try:
        yield S3(
            "bench",
            {
                "endpoint_url": endpoint,
                "key": "bench",
                "secret": "bench",
                "client_kwargs": {"region_name": "us-east-1"},
            },
        )
    finally:
        server.stop()


def fresh_root() -> str:
    return f"/bench-{uuid.uuid4().hex[:8]}"


def file_config(
    hosts: str,
    tmp: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    session_timeout: float = DEFAULT_SESSION_TIMEOUT,
) -> StoreConfig:
    """A store under a fresh root with its payloads in ``tmp/storage``."""
    return StoreConfig(
        zk_hosts=hosts,
        root=fresh_root(),
        storage_url=f"file://{tmp}/storage",
        session_timeout=session_timeout,
        timeout=timeout,
    )


def hold(ctx: object, seconds: float) -> None:
    """A job that just stays alive (no Spark, so that many of them fit on a small machine)."""
    time.sleep(seconds)


def wait_all_exist(zk: ZooKeeper, paths: list[str], timeout: float, poll: float = 1.0) -> None:
    """Return once every one of ``paths`` exists; ``TimeoutError`` after ``timeout`` seconds.

    One pipelined look with a watch on each path, then the watches' news (a node's creation
    fires its watch); the paths still missing are looked at again every ``poll`` seconds, in
    case a watch was lost with a connection. A benchmark that polled every path 20 times a
    second loaded the ZooKeeper it measured: 40 results awaited that way were 80 requests a
    job, more than the runtime's own.
    """
    missing = set(paths)
    news = threading.Event()
    lock = threading.Lock()

    def created(event: WatchedEvent) -> None:
        with lock:
            missing.discard(event.path)
        news.set()

    def look(at: list[str]) -> None:
        found = zk.exists_many(at, watch=created)
        with lock:
            missing.difference_update(p for p, stat in zip(at, found, strict=True) if stat)

    deadline = time.monotonic() + timeout
    look(paths)
    next_look = time.monotonic() + poll
    while True:
        with lock:
            left = sorted(missing)
        if not left:
            return
        now = time.monotonic()
        if now >= deadline:
            raise TimeoutError(f"{len(left)} of {len(paths)} nodes missing after {timeout:g} s")
        if now >= next_look:
            look(left)
            next_look = now + poll
        news.wait(min(deadline, next_look) - now)
        news.clear()


def connect(hosts: str, timeout: float = 30.0) -> ZooKeeper:
    return ZooKeeper(hosts, session_timeout=30, timeout=timeout).start()


def timed(func: Callable[[], object]) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def best_of(rounds: int, func: Callable[[], object]) -> float:
    """Median of ``rounds`` timings: robust to one noisy round on a shared machine."""
    return statistics.median(timed(func) for _ in range(rounds))


@dataclass
class Result:
    name: str
    ours: float
    baseline: float
    goal: str
    unit: str = "s"
    higher_is_better: bool = False
    detail: str = ""

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline if self.baseline else float("inf")

    def met(self) -> bool:
        bound = float(self.goal.split()[-1])
        return self.ratio >= bound if self.higher_is_better else self.ratio <= bound

    def show(self) -> None:
        verdict = "meets" if self.met() else "MISSES"
        print(
            f"{self.name}: zkstore {self.ours:.4g} {self.unit}, baseline {self.baseline:.4g} "
            f"{self.unit}, ratio {self.ratio:.2f} (goal {self.goal}: {verdict})"
            + (f"  [{self.detail}]" if self.detail else "")
        )
        if os.environ.get("BENCH_JSON"):
            with open(os.environ["BENCH_JSON"], "a") as out:
                record = {**self.__dict__, "ratio": self.ratio, "met": self.met()}
                out.write(json.dumps(record) + "\n")
        sys.stdout.flush()


def show_all(results: Iterable[Result]) -> list[Result]:
    """Print each result line; the results, as a list."""
    shown = []
    for result in results:
        result.show()
        shown.append(result)
    return shown


def seed_entries(
    store: ZooKeeperStateHandleStore[Any], count: int, payload: Callable[[int], bytes]
) -> list[str]:
    """``count`` live entries, fast: payloads written in parallel, handles published with the
    store's own ops in batched transactions (no locks held). Returns the names."""

    def write(i: int) -> tuple[str, Handle]:
        name = f"job-{i:06d}"
        ref = store.storage.write(store.payload_prefix(name), payload(i), suffix=".pkl")
        return name, Handle.for_payload(ref, store.instance_id, {"name": name})

    with ThreadPoolExecutor(max_workers=16) as pool:
        written = list(pool.map(write, range(count)))
    ops: list[Op] = []
    for name, handle in written:
        ops += store.publish_ops(name, handle, lock=False)
        if len(ops) >= 200:
            store.zk.commit(ops)
            ops = []
    if ops:
        store.zk.commit(ops)
    return [name for name, _ in written]
