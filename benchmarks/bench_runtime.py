"""Runtime benchmarks (issue: the recovery daemon and the HA submit wrapper).

- Failover: 100 running jobs; SIGKILL the leader daemon and time until the new leader has adopted
  or resubmitted every one of them (goal: session timeout + 2 s), then the same with SIGTERM
  (goal: 2 s). Printed as the measured time against the goal.
- Submission overhead: a trivial PySpark script through ``zkstore submit --wait`` against
  running the same script directly with ``python`` (goal <= 1.15x).
"""

from __future__ import annotations

import argparse
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Result, file_config, hold, show_all, wait_all_exist, zookeeper
from recovery.client.api import Client
from recovery.dev.localcluster import DaemonProcess, LocalCluster

TRIVIAL_SCRIPT = """\
from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[2]").appName("trivial").getOrCreate()
print(spark.range(1000).selectExpr("sum(id)").collect()[0][0])
spark.stop()
"""


def _adopted(daemon: DaemonProcess, since: int) -> int:
    """How many jobs the daemon's log says it adopted or started after its first ``since`` chars.

    Only what came after counts: a job whose driver already ran on this daemon (placed there
    before the failover) appears in its log before, and is adopted again by the new leader.
    """
    log = daemon.log()[since:]
    return len(set(re.findall(r"job (\S+): attempt \d+ (?:runs|started)", log)))


def _time_takeover(local: LocalCluster, victim: DaemonProcess, signum: int, jobs: int) -> float:
    """Signal the leader; seconds until another daemon has adopted or started every job."""
    others = [d for d in local.daemons.values() if d is not victim and d.alive]
    before = {d.daemon_id: len(d.log()) for d in others}
    start = time.monotonic()
    victim.signal(signum)
    deadline = start + 120
    while time.monotonic() < deadline:
        for daemon in others:
            if _adopted(daemon, before[daemon.daemon_id]) >= jobs:
                return time.monotonic() - start
        time.sleep(0.02)
    raise TimeoutError("the new leader did not take over every job within 120 s")


def bench_failover(hosts: str, jobs: int, session_timeout: float) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=10.0, session_timeout=session_timeout)
        local = LocalCluster(
            config, Path(tmp) / "runtime", extra_args=("--max-drivers", str(jobs + 10))
        )
        try:
            first = local.start_daemon("bench-1")
            local.wait_for_leader()
            local.start_daemon("bench-2")
            with Client(config) as client:
                # Both daemons take jobs: the failover both restarts the lost ones and adopts
                # the ones still running on the survivor.
                wait_all_exist(client.cluster.zk, [client.cluster.layout.member("bench-2")], 60)
                for i in range(jobs):
                    client.submit_function(hold, 600.0, job_id=f"hold-{i:03d}")
                layout = client.cluster.layout
                running = [layout.running(f"hold-{i:03d}") for i in range(jobs)]
                wait_all_exist(client.cluster.zk, running, 300)
                killed = _time_takeover(local, first, signal.SIGKILL, jobs)
                local.start_daemon("bench-3")  # a standby again, for the graceful handover
                second = local.wait_for_leader(exclude="bench-1")
                handed = _time_takeover(local, second, signal.SIGTERM, jobs)
        finally:
            local.stop()
    return [
        Result(
            f"failover, SIGKILL of the leader, {jobs} running jobs",
            killed,
            session_timeout + 2.0,
            "<= 1.0",
            detail=f"goal: session timeout {session_timeout:g} s + 2 s",
        ),
        Result(
            f"failover, SIGTERM of the leader, {jobs} running jobs",
            handed,
            2.0,
            "<= 1.0",
            detail="goal: 2 s",
        ),
    ]


def bench_submit_overhead(hosts: str, rounds: int) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "trivial.py"
        script.write_text(TRIVIAL_SCRIPT)
        config = file_config(hosts, tmp)
        local = LocalCluster(config, Path(tmp) / "runtime", spark_master="local[2]")
        try:
            local.start_daemon("submit-bench")
            local.wait_for_leader()
            env = local.environment()
            zkstore = str(Path(sys.executable).parent / "zkstore")

            def direct() -> float:
                start = time.monotonic()
                subprocess.run([sys.executable, str(script)], check=True, capture_output=True)
                return time.monotonic() - start

            def through_zkstore() -> float:
                start = time.monotonic()
                subprocess.run(
                    [zkstore, "submit", str(script), "--wait"],
                    check=True,
                    capture_output=True,
                    env=env,
                )
                return time.monotonic() - start

            direct()  # warm the page cache for the JVM and the jars
            timings = [(direct(), through_zkstore()) for _ in range(rounds)]
        finally:
            local.stop()
    baseline = statistics.median(t[0] for t in timings)
    measured = statistics.median(t[1] for t in timings)
    return Result(
        "HA submission of a trivial PySpark script (submit --wait vs python script.py)",
        measured,
        baseline,
        "<= 1.15",
        detail=f"{rounds} interleaved rounds",
    )


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with zookeeper() as hosts:
        return show_all(
            [
                *bench_failover(hosts, args.jobs, args.session_timeout),
                bench_submit_overhead(hosts, args.rounds),
            ]
        )


if __name__ == "__main__":
    main()
