"""Warming a driver JVM: a throw-away context and queries, stopped before any attempt sees it.

A driver JVM that was only started has most of Spark's classes still to load and every path a
context and a query take still to compile: measured here, a new Python process attached to one
took 13.5 s to its first action, against 0.77 s for one that had built a context, run a query
and stopped it (issue 47). So the daemon (:mod:`.pool`) has each warm JVM do that once, through
this process: it connects to the JVM's gateway (port and secret through its configuration pipe,
never its environment or command line), builds a local context (``local[1]``: it never asks a
cluster for executors), runs a query, a DataFrame made from Python rows and an RDD job that
starts a Python worker, stops the context and exits. What is left in the JVM is what a context
leaves after its stop: loaded and compiled code, no context, no session, no job's data.

Run by the fork server (``kind: warm-up``) or as ``python -m recovery.member.warm_jvms.warmup
--config-fd N --warm-id ID``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from recovery.proctitle import set_title, warm_up_title
from recovery.settings import MAX_WARM_UP_PASSES, WARM_UP_PASSES

#: How often a warm-up runs its queries (``zkstore daemon --warm-up-passes``): the second pass
#: finds the first's code compiled and leaves more of it compiled for the attempt. Measured
#: (docs/benchmarks.md): a warm JVM costs 6.2-6.5 s of CPU with 2, 5.2 s with 1, 2.9 s with 0
#: (its start and a context); a host loss's first Spark action came about 0.2 s sooner with 2
#: than with 1, and no sooner with 4.
PASSES = WARM_UP_PASSES


def connect(port: int, secret: str) -> Any:
    """Attach pyspark to the JVM gateway at ``port`` (as ``spark-submit`` hands its JVM to the
    Python driver it starts): the variables pyspark reads are set in this process's memory only
    for the call (the kernel's copy of its environment, ``/proc/<pid>/environ``, never holds
    them), and removed."""
    from pyspark.core import context as pyspark_context

    launch_gateway: Any = getattr(pyspark_context, "launch_gateway")  # noqa: B009 - untyped
    os.environ["PYSPARK_GATEWAY_PORT"] = str(port)
    os.environ["PYSPARK_GATEWAY_SECRET"] = secret
    try:
        gateway = launch_gateway()
    finally:
        os.environ.pop("PYSPARK_GATEWAY_PORT", None)
        os.environ.pop("PYSPARK_GATEWAY_SECRET", None)
    pyspark_context.SparkContext._gateway = gateway
    pyspark_context.SparkContext._jvm = gateway.jvm
    return gateway


def warm_jvm(port: int, secret: str, passes: int = PASSES) -> float:
    """Warm the JVM at ``port`` (a context, its queries ``passes`` times, its stop); returns the
    seconds it took. Raises whatever Spark raises."""
    began = time.monotonic()
    connect(port, secret)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").appName("zkstore warm-up").getOrCreate()
    queries: list[Callable[[Any], object]] = [
        lambda s: s.range(1000).selectExpr("sum(id)").collect(),
        lambda s: (
            s.createDataFrame([(1, "a"), (2, "b")], ["n", "s"]).groupBy("s").count().collect()
        ),
        lambda s: s.sparkContext.parallelize(range(10), 2).map(lambda x: x * 2).sum(),
    ]
    try:
        for query in queries * passes:
            query(spark)
    finally:
        spark.stop()
    return time.monotonic() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recovery.member.warm_jvms.warmup")
    parser.add_argument("--config-fd", type=int, required=True)
    parser.add_argument("--warm-id", required=True)
    parser.add_argument("--passes", type=int, choices=range(MAX_WARM_UP_PASSES + 1), default=PASSES)
    args = parser.parse_args(argv)
    set_title(warm_up_title(args.warm_id))
    with os.fdopen(args.config_fd, "rb") as pipe:
        config = json.loads(pipe.read(1 << 16))
    took = warm_jvm(int(config["port"]), str(config["secret"]), args.passes)
    print(
        f"zkstore: warm driver {args.warm_id} warmed in {took:.2f} s "
        f"({args.passes} pass{'' if args.passes == 1 else 'es'})",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
