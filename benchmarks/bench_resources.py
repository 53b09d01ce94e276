"""Job-scoped resources (issue: executor-side resources): 100,000 rows written to a TCP server.

A tiny line server (started here, on 127.0.0.1) counts the connections it accepts and the lines
it receives. A local[2] Spark job writes the rows to it three ways, with ``foreachPartition``:

- a connection per row (once: it is the slow way everybody knows);
- a connection per partition (the usual idiom; the baseline);
- one connection per Python worker, shared by every task: a job-scoped resource (``ref.get()``),
  with its counts (each task sends an accumulator update to the driver, and Spark waits for the
  driver's answer before it goes on) and without them (``counts=False``).

Each way is timed until the server has received every row (median of ``--rounds``, the ways
taking turns). Printed: connections opened and wall time of each way, and the ratio of each
resource way to the per-partition way (goal: fewer connections, time <= 1.05x).
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import selectors
import socket
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks.common import Result
from recovery.driver.resource_declaring import JobResources

ROWS = 100_000
PARTITIONS = 16


class LineServer:
    """A TCP server in its own process (as a real server would be, so that it does not compete
    with the driver for its GIL) that counts the connections it accepts and the lines it gets."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._port = context.Value("i", 0)
        self._connections = context.Value("q", 0)
        self._lines = context.Value("q", 0)
        self._ready, self._stop = context.Event(), context.Event()
        self._process = context.Process(
            target=serve_lines,
            args=(self._port, self._connections, self._lines, self._ready, self._stop),
            daemon=True,
        )
        self.address = ("127.0.0.1", 0)

    def __enter__(self) -> LineServer:
        self._process.start()
        if not self._ready.wait(60):
            raise TimeoutError("the line server did not start")
        self.address = ("127.0.0.1", self._port.value)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()

    @property
    def connections(self) -> int:
        return int(self._connections.value)

    @property
    def lines(self) -> int:
        return int(self._lines.value)

    def wait_for_lines(self, total: int, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while self.lines < total:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server got {self.lines} of {total} lines")
            time.sleep(0.002)


def serve_lines(port: Any, connections: Any, lines: Any, ready: Any, stop: Any) -> None:
    """The server process: one thread, selectors; counts into shared values."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    listener.setblocking(False)
    port.value = listener.getsockname()[1]
    ready.set()
    with selectors.DefaultSelector() as selector:
        selector.register(listener, selectors.EVENT_READ)
        while not stop.is_set():
            for key, _ in selector.select(timeout=0.1):
                if key.fileobj is listener:
                    connections.value += _accept(listener, selector)
                else:
                    lines.value += _read(selector, key.fileobj)  # type: ignore[arg-type]


def _accept(listener: socket.socket, selector: selectors.BaseSelector) -> int:
    accepted = 0
    while True:
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            return accepted
        connection.setblocking(False)
        selector.register(connection, selectors.EVENT_READ)
        accepted += 1


def _read(selector: selectors.BaseSelector, connection: socket.socket) -> int:
    try:
        data = connection.recv(1 << 16)
    except BlockingIOError:
        return 0
    except OSError:
        data = b""
    if not data:
        selector.unregister(connection)
        connection.close()
    return data.count(b"\n")


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


def run_ways(
    sc: Any, server: LineServer, rows: int, rounds: int
) -> tuple[dict[str, tuple[float, int]], dict[str, tuple[float, int]]]:
    """The per-row way once, then the per-partition and resource ways taking turns."""
    address = server.address
    resources = JobResources("bench", 1, lambda: sc)
    opener = functools.partial(Writer, address)
    counted = resources.declare("sink", opener, Writer.close)
    uncounted = resources.declare("quiet-sink", opener, Writer.close, counts=False)
    sc.parallelize(range(PARTITIONS), PARTITIONS).foreachPartition(lambda _: None)  # warm up
    row = measure(sc, server, {"row": functools.partial(per_row, address)}, rows, 1)
    ways = {
        "partition": functools.partial(per_partition, address),
        "resource": functools.partial(through_resource, counted),
        "uncounted": functools.partial(through_resource, uncounted),
    }
    return row, measure(sc, server, ways, rows, rounds)


def spark_context() -> Any:
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    session = (
        SparkSession.builder.master("local[2]")
        .appName("bench-resources")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session.sparkContext


def bench_resources(rows: int, rounds: int) -> list[Result]:
    with LineServer() as server:
        sc = spark_context()
        try:
            row, measured = run_ways(sc, server, rows, rounds)
        finally:
            sc.stop()
    row_time, row_connections = row["row"]
    partition_time, partition_connections = measured["partition"]
    detail = (
        f"connections over {rounds} runs: per partition {partition_connections}, resource "
        "{connections}; a connection per row: {row_connections} in {row_time:.2f} s"
    )
    results = []
    for way, label in (("resource", "counted"), ("uncounted", "counts=False")):
        time_taken, connections = measured[way]
        results.append(
            Result(
                name=f"{rows} rows over TCP, job-scoped resource ({label}) vs per partition",
                ours=time_taken,
                baseline=partition_time,
                goal="<= 1.05",
                detail=detail.format(
                    connections=connections, row_connections=row_connections, row_time=row_time
                ),
            )
        )
    return results


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    results = bench_resources(args.rows, args.rounds)
    for result in results:
        result.show()
    return results


if __name__ == "__main__":
    main()
