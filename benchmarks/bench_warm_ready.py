"""How soon a daemon's warm driver JVM is ready (issue 56.3), and a Spark job right after a
pure-Python one: ``python -m benchmarks warm_ready [--jobs 3]``.

One daemon (``--warm-drivers 1``, ``local[1]``) with a class-data directory of its own, empty
at first:

- **fresh**: from starting the daemon to its log's ``first warm driver ready`` (the archive is
  made meanwhile: the JVM starts without it); goal 30 s;
- **restarted**: the daemon stopped cleanly and started again (its archive kept, verified):
  the same; goal 20 s;
- **Spark after pure Python**: a no-op job submitted, then at once a job whose code runs one
  Spark action; the Spark job's submit to its result (``--jobs`` pairs, each after the warm
  JVM is ready again); goal 5 s.

Baseline in the same run: a bare ``python`` that builds a ``SparkSession`` (``local[1]``) and
runs the same action (:func:`benchmarks.bench_spark_resume.bare_start`).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_spark_resume import MASTER, bare_start, machine_speed, wait
from benchmarks.common import Result, file_config, show_all, zookeeper
from recovery.client.api import Client
from recovery.dev.localcluster import DaemonProcess, LocalCluster
from recovery.shared.fleet_view import read_fleet
from zkstore.records.job_states import SUCCEEDED

#: the goals (seconds), as issue 56 sets them
FRESH_GOAL, RESTART_GOAL, AFTER_PYTHON_GOAL = 30.0, 20.0, 5.0

_FIRST = re.compile(r"first warm driver ready ([0-9.]+) s after the daemon started")


def noop(ctx: Any) -> None:
    """A pure-Python job: asks for no Spark."""


def one_action(ctx: Any) -> None:
    ctx.spark.range(1000).selectExpr("sum(id)").collect()


def first_ready(daemon: DaemonProcess, began: float, offset: int = 0) -> float:
    """Seconds from ``began`` (the daemon's start) until its log (from ``offset``: this life's)
    says its first warm JVM is ready (what the daemon itself counts is printed beside)."""
    said = wait(lambda: _FIRST.search(daemon.log()[offset:]), 900, "the first warm driver")
    seen = time.monotonic() - began
    print(f"  first warm driver ready: {seen:.1f} s here, {said.group(1)} s by the daemon")
    return seen


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=3)
    args = parser.parse_args(argv)
    speed = machine_speed()
    after_python: list[float] = []
    with zookeeper() as hosts, tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        config = file_config(hosts, str(tmp), timeout=10.0, session_timeout=10.0)
        local = LocalCluster(
            config,
            tmp / "rt",
            spark_master=MASTER,
            warm_drivers=1,
            class_data=str(tmp / "class-data"),
            verbose=False,
        )
        client = Client(config)
        try:
            began = time.monotonic()
            daemon = local.start_daemon("d1")
            fresh = first_ready(daemon, began)
            wait(lambda: "class-data archive /" in daemon.log(), 900, "the archive made")
            local.stop_daemons()
            offset = len(daemon.log())
            began = time.monotonic()
            daemon = local.start_daemon("d1")
            restarted = first_ready(daemon, began, offset)
            cluster = client.cluster
            for n in range(args.jobs):
                wait(
                    lambda: read_fleet(cluster.zk, cluster.layout).members["d1"].warm_ready,
                    600,
                    "a warm driver, as the daemon's member record says",
                )
                client.submit_function(noop, job_id=f"python-{n}", max_attempts=1)
                submitted = time.monotonic()
                client.submit_function(one_action, job_id=f"spark-{n}", max_attempts=1)
                outcome = client.wait(f"spark-{n}", timeout=600).outcome
                after_python.append(time.monotonic() - submitted)
                assert outcome == SUCCEEDED, outcome
                print(f"  Spark job after a pure-Python one: {after_python[-1]:.2f} s")
        finally:
            with contextlib.suppress(Exception):
                client.close()
            local.stop()
    bare = bare_start()
    speeds = f"machine: 10^7 squares in {speed:.2f} s before, {machine_speed():.2f} s after"
    return show_all(
        (
            Result(
                "a fresh daemon: start -> first warm driver ready",
                fresh,
                bare,
                f"<= {FRESH_GOAL / bare:.2f}",
                detail=f"goal {FRESH_GOAL:g} s; baseline: a bare SparkSession start and action; "
                f"{speeds}",
            ),
            Result(
                "a restarted daemon (archive kept): start -> first warm driver ready",
                restarted,
                bare,
                f"<= {RESTART_GOAL / bare:.2f}",
                detail=f"goal {RESTART_GOAL:g} s; baseline: a bare SparkSession start",
            ),
            Result(
                "a Spark job submitted right after a pure-Python one: submit -> done",
                statistics.median(after_python),
                bare,
                f"<= {AFTER_PYTHON_GOAL / bare:.2f}",
                detail=f"goal {AFTER_PYTHON_GOAL:g} s; median of {len(after_python)}; "
                "baseline: a bare SparkSession start",
            ),
        )
    )


if __name__ == "__main__":
    main()
