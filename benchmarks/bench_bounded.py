"""Bounded benchmarks (issue 44): what one submitter's load costs everybody else's jobs, and how
fast the leader fires a schedule's backlog.

- **Ordinary jobs under load**: one daemon (the production defaults but its HTTP port), and a
  no-op job submitted ``--jobs`` times in a row, each timed from its submit to its result
  (recorded SUCCEEDED): on the quiet cluster first, then under each load in turn, in the same
  run. The median of each load against the quiet median; goal <= 1.5x. The loads:

  - *flood*: the issue's ``--every 1s --start-at 2020-01-01 --catchup all`` written straight
    into ZooKeeper past the command line (which refuses it): the leader, at its 10 s minimum
    interval, fires none of it;
  - *scan*: ``--cron '*/10 * * * * *' --start-at 1970-01-01 --catchup none`` (ended a minute
    ago: no window on time): 177 million windows decided as one row;
  - *webhooks*: each measured job's outcome sent to a receiver that answers 128 MB, beside
    100 events of another job waiting for one that never answers;
  - *slow HTTP*: 200 connections to the daemon's port that send half a request and stop.

- **Fire throughput**: a schedule ``--catchup all`` with ``--windows`` windows behind (its
  runs ``--require`` a label no daemon has, so that they wait instead of running: the leader's
  firing is what is timed), from its creation to its last window decided; windows a second,
  against the same ZooKeeper transactions (the leader's fence, the spec's version, the state,
  the run's handle and ``locks``) committed by plain kazoo one after another. Beside it, the
  ordinary jobs' median while the backlog is fired, against the quiet one (goal <= 1.5x).

``python -m benchmarks.bench_bounded [--jobs 10] [--windows 1000]``
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from benchmarks.common import Result, file_config, show_all, wait_all_exist, zookeeper
from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.lifecycle.destinations import ALLOWED_ENV
from zkstore.lifecycle.outbox import ATTEMPT_FAILED, Event, notification_ops
from zkstore.records.handle import SummaryValue
from zkstore.records.strict import to_second, utc_moment
from zkstore.schedules.schedule_records import ScheduleSpec
from zkstore.schedules.schedule_store import ScheduleStore

GOAL = "<= 1.5"
HUGE = 128 * 1024 * 1024


def job() -> Callable[[object], None]:
    """The ordinary no-op job (what is measured is the runtime's own time per job); a
    closure, so that it travels by value."""

    def run(ctx: object) -> None:
        return None

    return run


class Receiver:
    """A raw webhook receiver on loopback: ``huge`` answers 200 with a 128 MB body as fast as
    it is taken, else it reads the request and never answers."""

    def __init__(self, huge: bool) -> None:
        self.huge = huge
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/hook"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                if not self.huge:
                    self._stop.wait()
                    return
                conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {HUGE}\r\n\r\n".encode())
                block = b"x" * 65536
                for _ in range(HUGE // len(block)):
                    conn.sendall(block)
            except OSError:
                return

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()


def submit_to_result(client: Client, prefix: str, count: int, notify: str | None = None) -> float:
    """Median seconds from a no-op job's submit to its result, over ``count`` in a row."""
    layout = client.cluster.layout
    lifecycle: dict[str, SummaryValue] = {} if notify is None else {"notify": notify}
    took = []
    for n in range(count):
        began = time.monotonic()
        definition = JobDefinition.for_function(f"{prefix}-{n:03d}", job(), lifecycle=lifecycle)
        job_id = client.submit(definition)
        wait_all_exist(client.cluster.zk, [layout.result(job_id)], 120, poll=0.2)
        took.append(time.monotonic() - began)
    return statistics.median(took)


def plant(config: StoreConfig, client: Client, spec: ScheduleSpec) -> None:
    """A schedule written straight into ZooKeeper (what the command line would refuse); its
    runs wait for a label no daemon has (they are fired, never run)."""
    definition = JobDefinition.for_function(spec.name, job(), require={"never": "here"})
    ScheduleStore.for_config(config, client.cluster.zk).create(spec, definition)


def spec(name: str, **fields: Any) -> ScheduleSpec:
    return ScheduleSpec(version=None, name=name, created=utc_moment(), **fields)


@contextmanager
def slow(url: str, count: int) -> Iterator[None]:
    """``count`` connections that send half a request and stop."""
    host, port = url.removeprefix("http://").split(":")
    held = []
    for _ in range(count):
        conn = socket.create_connection((host, int(port)), timeout=30)
        conn.sendall(b"GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        held.append(conn)
    try:
        yield
    finally:
        for conn in held:
            conn.close()


@contextmanager
def webhooks(client: Client, silent: Receiver, events: int = 100) -> Iterator[None]:
    """``events`` events of another job waiting for a receiver that never answers, written
    into the outbox as a leader writes them (as if that job had failed that many times)."""
    found = [Event("hooks-flood", n, ATTEMPT_FAILED, utc_moment()) for n in range(1, events + 1)]
    for first in range(0, events, 50):
        batch = found[first : first + 50]
        client.cluster.zk.commit(notification_ops(client.cluster.layout, batch, [silent.url]))
    yield


def bench_loads(hosts: str, jobs: int, connections: int) -> list[Result]:
    """Each load against the quiet cluster measured just before it (a shared machine's load
    drifts: a quiet figure taken minutes earlier says little)."""
    huge, silent = Receiver(huge=True), Receiver(huge=False)
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=30.0)
        local = LocalCluster(
            config, Path(tmp) / "rt", http=True, extra_env={ALLOWED_ENV: "127.0.0.1"}
        )
        try:
            daemon = local.start_daemon("bounded")
            local.wait_for_leader()
            url = daemon.url or ""
            with Client(config) as client:
                submit_to_result(client, "warm", 2)
                loads: list[tuple[str, Callable[[], Any], str | None]] = [
                    ("the flood schedule (refused)", lambda: planted(config, client, FLOOD), None),
                    ("a per-10s cron back to 1970", lambda: planted(config, client, scan()), None),
                    (f"{connections} slow HTTP connections", lambda: slow(url, connections), None),
                    ("webhooks of 128 MB or none", lambda: webhooks(client, silent), huge.url),
                ]
                return [measure(client, jobs, n, *load) for n, load in enumerate(loads)]
        finally:
            local.stop()
            huge.stop()
            silent.stop()


def measure(
    client: Client, jobs: int, n: int, what: str, load: Callable[[], Any], notify: str | None
) -> Result:
    """The ordinary jobs' median under ``load`` against the quiet one just before."""
    quiet = submit_to_result(client, f"quiet-{n}", jobs)
    with load():
        loaded = submit_to_result(client, f"load-{n}", jobs, notify)
    detail = f"median of {jobs} no-op jobs, submit to result; quiet just before: {quiet:.3f} s"
    return Result(f"ordinary jobs beside {what}", loaded, quiet, GOAL, detail=detail)


#: the issue's flood: --every 1s --start-at 2020-01-01 --catchup all, past the command line
FLOOD = {"every": 1, "catchup": "all", "start_at": datetime(2020, 1, 1, tzinfo=UTC)}


def scan() -> dict[str, Any]:
    """A cron of a window every 10 s from 1970, ended a minute ago (no window on time)."""
    return {
        "cron": "*/10 * * * * *",
        "catchup": "none",
        "start_at": datetime(1970, 1, 1, tzinfo=UTC),
        "end_at": to_second(datetime.now(UTC) - timedelta(minutes=1)),
    }


@contextmanager
def planted(config: StoreConfig, client: Client, fields: dict[str, Any]) -> Iterator[None]:
    """A schedule planted for the time of a measure, deleted after it."""
    name = "flood" if "every" in fields else "scan"
    plant(config, client, spec(name, **fields))
    try:
        yield
    finally:
        ScheduleStore.for_config(config, client.cluster.zk).delete(name)


def bench_fire(hosts: str, windows: int, jobs: int) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=30.0)
        local = LocalCluster(config, Path(tmp) / "rt")
        try:
            local.start_daemon("firing")
            local.wait_for_leader()
            with Client(config) as client:
                submit_to_result(client, "warm", 2)
                quiet = submit_to_result(client, "quiet", jobs)
                store = ScheduleStore.for_config(config, client.cluster.zk)
                now = datetime.now(UTC).replace(microsecond=0)
                began = time.monotonic()
                backlog = spec(
                    "backlog",
                    every=10,
                    catchup="all",
                    catchup_max=min(windows, 10_000),
                    grace=0,
                    start_at=now - timedelta(seconds=10 * (windows - 1)),
                    end_at=now + timedelta(seconds=1),
                )
                plant(config, client, backlog)
                beside = submit_to_result(client, "beside", jobs)
                deadline = time.monotonic() + 600
                while store.get("backlog").state.fired < windows:
                    if time.monotonic() > deadline:
                        raise TimeoutError("the backlog was not fired in 600 s")
                    time.sleep(0.05)
                fired = time.monotonic() - began
        finally:
            local.stop()
    raw = raw_fires(hosts, windows)
    return [
        Result(
            f"schedule fire throughput, {windows} windows behind",
            windows / fired,
            windows / raw,
            ">= 0.1",
            unit="windows/s",
            higher_is_better=True,
            detail="raw: the same transactions by plain kazoo, one after another, no payload",
        ),
        Result(
            "ordinary jobs while that backlog is fired",
            beside,
            quiet,
            GOAL,
            detail=f"median of {jobs} no-op jobs, submit to result; quiet {quiet:.2f} s",
        ),
    ]


def raw_fires(hosts: str, windows: int) -> float:
    """Seconds for plain kazoo to commit one fire's transaction per window, in a row."""
    zk = KazooClient(hosts=hosts, timeout=30)
    zk.start(30)
    base = f"/bench-raw-{time.monotonic_ns()}"
    try:
        fence = zk.create(f"{base}/election/n_", ephemeral=True, sequence=True, makepath=True)
        zk.create(f"{base}/schedules/s", b'{"name": "s"}', makepath=True)
        zk.create(f"{base}/schedules/s/state", b"{}")
        zk.ensure_path(f"{base}/currentJobs")
        handle = json.dumps({"format": 1, "uri": "file:///x", "size": 100, "sha256": "0" * 64})
        began = time.perf_counter()
        for n in range(windows):
            transaction = zk.transaction()
            transaction.check(fence, 0)
            transaction.check(f"{base}/schedules/s", 0)
            transaction.set_data(f"{base}/schedules/s/state", f'{{"last": {n}}}'.encode(), n)
            transaction.create(f"{base}/currentJobs/s-{n:06d}", handle.encode())
            transaction.create(f"{base}/currentJobs/s-{n:06d}/locks")
            results = transaction.commit()
            assert not any(isinstance(r, Exception) for r in results), results
        return time.perf_counter() - began
    finally:
        zk.delete(base, recursive=True)
        zk.stop()
        zk.close()


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10, help="ordinary jobs timed per load")
    parser.add_argument("--windows", type=int, default=1000, help="the backlog fired")
    parser.add_argument("--connections", type=int, default=200, help="slow HTTP connections")
    args = parser.parse_args(argv)
    with zookeeper() as hosts:
        return show_all(
            [
                *bench_loads(hosts, args.jobs, args.connections),
                *bench_fire(hosts, args.windows, args.jobs),
            ]
        )


if __name__ == "__main__":
    main()
