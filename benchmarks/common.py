"""What every benchmark shares: servers, timing, and one way to print a result line.

A ratio is computed per run and summarised (issue 60.9): each run measures zkstore and its
baseline side by side, under the same load; :func:`paired` gives both series, and a
:class:`Result` with ``ratios`` reports the median of the per-run ratios and their range, not
the median of one series over the median of the other (which pairs figures of different runs:
a noisy moment in one series moves the ratio though the two never met)."""

from __future__ import annotations

import json
import logging
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kazoo.protocol.states import WatchedEvent

from zkstore.config import DEFAULT_SESSION_TIMEOUT, DEFAULT_TIMEOUT, StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.payloads.store import ZooKeeperStateHandleStore
from zkstore.records.handle import Handle
from zkstore.zookeeper.ops import Op
from zkstore.zookeeper.zk import ZooKeeper


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


def paired(
    rounds: int, ours: Callable[[], float], baseline: Callable[[], float]
) -> tuple[list[float], list[float]]:
    """``rounds`` runs, each measuring ``ours`` then ``baseline`` right after it (the same
    moment's load): the two series, run by run."""
    measured = [(ours(), baseline()) for _ in range(rounds)]
    return [m[0] for m in measured], [m[1] for m in measured]


def per_run(ours: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """The ratio of each run (runs whose baseline measured nothing are left out)."""
    return [o / b for o, b in zip(ours, baseline, strict=True) if b]


@dataclass
class Result:
    name: str
    ours: float
    baseline: float
    goal: str
    unit: str = "s"
    higher_is_better: bool = False
    detail: str = ""
    #: the ratio of each run (:func:`per_run`): when given, :attr:`ratio` is their median and
    #: their range is printed; ``ours`` and ``baseline`` are then only shown
    ratios: list[float] = field(default_factory=list)

    @classmethod
    def of_runs(
        cls, name: str, ours: Sequence[float], baseline: Sequence[float], goal: str, **more: Any
    ) -> Result:
        """The result of paired runs: the medians shown, the per-run ratios judged."""
        return cls(
            name,
            statistics.median(ours),
            statistics.median(baseline),
            goal,
            ratios=per_run(ours, baseline),
            **more,
        )

    @property
    def ratio(self) -> float:
        if self.ratios:
            return statistics.median(self.ratios)
        return self.ours / self.baseline if self.baseline else float("inf")

    @property
    def spread(self) -> str:
        """The per-run ratios' range and count ("" for a single figure)."""
        if len(self.ratios) < 2:
            return ""
        return f", runs {min(self.ratios):.2f}-{max(self.ratios):.2f} of {len(self.ratios)}"

    def met(self) -> bool:
        bound = float(self.goal.split()[-1])
        return self.ratio >= bound if self.higher_is_better else self.ratio <= bound

    def show(self) -> None:
        verdict = "meets" if self.met() else "MISSES"
        print(
            f"{self.name}: zkstore {self.ours:.4g} {self.unit}, baseline {self.baseline:.4g} "
            f"{self.unit}, ratio {self.ratio:.2f}{self.spread} (goal {self.goal}: {verdict})"
            + (f"  [{self.detail}]" if self.detail else "")
        )
        if os.environ.get("BENCH_JSON"):
            with open(os.environ["BENCH_JSON"], "a") as out:
                record = {**self.__dict__, "ratio": self.ratio, "met": self.met()}
                if self.ratios:
                    record["ratio_range"] = [min(self.ratios), max(self.ratios)]
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
