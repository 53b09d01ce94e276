"""Job-scoped resources (issue: executor-side resources): 100,000 rows written to a TCP server.

A tiny line server (started here, on 127.0.0.1) counts the connections it accepts and the lines
it receives. A local[2] Spark job writes the rows to it three ways, with ``foreachPartition``:

- a connection per row (once: it is the slow way everybody knows);
- a connection per partition (the usual idiom; the baseline);
- one connection per Python worker, shared by every task: a job-scoped resource (``ref.get()``).

Each way is timed until the server has received every row (median of ``--rounds``). Printed:
connections opened and wall time of each way, and the ratio of the resource way to the
per-partition way (goal: fewer connections, time <= 1.05x).
"""

from __future__ import annotations

import argparse
import functools
import os
import selectors
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks.common import Result
from recovery.resources import JobResources

ROWS = 100_000
PARTITIONS = 16


class LineServer:
    """Accepts connections and counts lines, on one thread (selectors)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self._listener.setblocking(False)
        self.address = self._listener.getsockname()
        self.connections = 0
        self.lines = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="line-server", daemon=True)

    def __enter__(self) -> LineServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._listener.close()

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            while not self._stop.is_set():
                for key, _ in selector.select(timeout=0.1):
                    if key.fileobj is self._listener:
                        self._accept(selector)
                    else:
                        self._read(selector, key.fileobj)  # type: ignore[arg-type]

    def _accept(self, selector: selectors.BaseSelector) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except BlockingIOError:
                return
            connection.setblocking(False)
            self.connections += 1
            selector.register(connection, selectors.EVENT_READ)

    def _read(self, selector: selectors.BaseSelector, connection: socket.socket) -> None:
        try:
            data = connection.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.lines += data.count(b"\n")
            return
        selector.unregister(connection)
        connection.close()

    def wait_for_lines(self, total: int, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while self.lines < total:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server got {self.lines} of {total} lines")
            time.sleep(0.002)


def _line(row: int) -> bytes:
    return b"row %d\n" % row


def _connect(address: tuple[str, int]) -> socket.socket:
    """A client connection as database drivers make them: TCP_NODELAY, so that a flushed
    buffer leaves at once instead of waiting (Nagle) for the server's delayed ACK, which
    would penalize any connection that lives longer than one batch."""
    connection = socket.create_connection(address)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


def per_row(address: tuple[str, int], rows: Iterator[int]) -> None:
    for row in rows:
        with _connect(address) as connection:
            connection.sendall(_line(row))


def per_partition(address: tuple[str, int], rows: Iterator[int]) -> None:
    with _connect(address) as connection, connection.makefile("wb") as out:
        for row in rows:
            out.write(_line(row))


class Writer:
    """The shared resource: a connection and its buffered writer."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.connection = _connect(address)
        self.out = self.connection.makefile("wb")

    def close(self) -> None:
        self.out.close()
        self.connection.close()


def through_resource(ref: Any, rows: Iterator[int]) -> None:
    writer = ref.get()
    for row in rows:
        writer.out.write(_line(row))
    writer.out.flush()  # the rows of this partition are sent when the task ends


def run_way(
    sc: Any, server: LineServer, function: Callable[[Iterator[int]], None], rows: int
) -> float:
    expected = server.lines + rows
    start = time.perf_counter()
    sc.parallelize(range(rows), PARTITIONS).foreachPartition(function)
    server.wait_for_lines(expected)
    return time.perf_counter() - start


def measure(
    sc: Any, server: LineServer, ways: dict[str, Any], rows: int, rounds: int
) -> dict[str, tuple[float, int]]:
    """Median time of each way over ``rounds`` and the connections opened by all its runs.

    The ways take turns within each round, so that a busy moment of the machine (shared with
    others) does not fall on one way only.
    """
    timings: dict[str, list[float]] = {name: [] for name in ways}
    connections = dict.fromkeys(ways, 0)
    for _ in range(rounds):
        for name, function in ways.items():
            before = server.connections
            timings[name].append(run_way(sc, server, function, rows))
            connections[name] += server.connections - before
    return {name: (statistics.median(timings[name]), connections[name]) for name in ways}


def spark_context() -> Any:
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    session = (
        SparkSession.builder.master("local[2]")
        .appName("bench-resources")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session.sparkContext


def bench_resources(rows: int, rounds: int) -> Result:
    sc = spark_context()
    try:
        with LineServer() as server:
            address = server.address
            ref = JobResources("bench", 1, lambda: sc).declare(
                "sink", functools.partial(Writer, address), Writer.close
            )
            sc.parallelize(range(PARTITIONS), PARTITIONS).foreachPartition(lambda _: None)
            row = measure(sc, server, {"row": functools.partial(per_row, address)}, rows, 1)
            measured = measure(
                sc,
                server,
                {
                    "partition": functools.partial(per_partition, address),
                    "resource": functools.partial(through_resource, ref),
                },
                rows,
                rounds,
            )
    finally:
        sc.stop()
    row_time, row_connections = row["row"]
    partition_time, partition_connections = measured["partition"]
    resource_time, resource_connections = measured["resource"]
    return Result(
        name=f"{rows} rows over TCP: job-scoped resource vs a connection per partition",
        ours=resource_time,
        baseline=partition_time,
        goal="<= 1.05",
        detail=(
            f"connections: per row {row_connections} ({row_time:.2f} s), per partition "
            f"{partition_connections} over {rounds} runs, resource {resource_connections} over "
            f"{rounds} runs"
        ),
    )


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    result = bench_resources(args.rows, args.rounds)
    result.show()
    return [result]


if __name__ == "__main__":
    main()
