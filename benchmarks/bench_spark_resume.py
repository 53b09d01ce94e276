"""What users wait for after a host's loss: the job computing again (issue 47).

``python -m benchmarks spark_resume [--runs 5]``: two daemons at ``--session-timeout 2``, each
keeping one warm driver (``--warm-drivers 1``) and sharing one class-data archive; a PySpark job
doing one small Spark action per step (and a checkpoint), its driver on the daemon that does not
lead; that daemon's host killed (the daemon, its drivers, their JVMs, its warm JVM: SIGKILL).
Measured, per run:

- **host loss**: from the kill to the new attempt's first completed Spark action (the job
  writes the time of each action; goal: within the session timeout + 1.5 s, and at most 0.35x a
  bare SparkSession start);
- **a fresh job, warm**: from ``submit`` to its first completed action, on a daemon with a warm
  driver ready;
- **a fresh job, cold**: the same for a job with a JVM-level setting the warm drivers lack
  (``spark.driver.extraJavaOptions``), so it starts its own JVM, mapping the archive, and its
  daemon, seeing the setting in its summary, hands it no warm JVM (goal: at most 0.6x a bare
  start);
- **memory of a warm JVM**: the resident set (RSS) and proportional set (PSS, its share of
  pages mapped by others too: the archive, the JDK's libraries) of each warm driver JVM that its
  daemon says is ready (started and warmed) and no attempt took, read from
  ``/proc/<pid>/smaps_rollup`` (what ``--warm-drivers`` costs);

beside, in the same run, a bare ``python`` that builds a ``SparkSession`` (``local[1]``, as the
daemons' jobs) and runs the same action: from its start to its action's end. Medians over the
runs; the machine's speed (a loop of 10^7 squares, seconds) is printed with them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import Result, file_config, show_all, zookeeper
from recovery.client.api import Client
from recovery.dev.localcluster import DaemonProcess, LocalCluster
from zkstore.records.fleet_records import DrainMark
from zkstore.records.strict import utc_moment

SESSION_TIMEOUT = 2.0
MASTER = "local[1]"
#: The action each step runs, and the bare baseline too.
ACTION = 'spark.range(1000).selectExpr("sum(id)").collect()'
BARE = f"""
import time
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("{MASTER}").appName("bare").getOrCreate()
{ACTION}
print(time.time(), flush=True)
spark.stop()
"""
#: A JVM-level setting the warm drivers lack: the job starts cold.
COLD_CONF = {"spark.driver.extraJavaOptions": "-Dzkstore.bench=cold"}
_READY = re.compile(r"warm driver ([0-9a-f]{8}) ready")
_READY_PID = re.compile(r"warm driver ([0-9a-f]{8}) ready \(pid (\d+)")
_GONE = re.compile(r"took warm driver ([0-9a-f]{8})|warm driver ([0-9a-f]{8}) \(pid \d+\) exited")


def spark_steps(ctx: Any, out: str, gate: str) -> None:
    """One Spark action per step, its end time written to ``out`` with the attempt and the
    driver JVM's pid, then a checkpoint; until ``gate`` exists."""
    spark = ctx.spark
    checkpoint = ctx.latest_checkpoint() or {}
    step = int(checkpoint.get("step", 0))
    pid = None
    while True:
        spark.range(1000).selectExpr("sum(id)").collect()
        done = time.time()
        if pid is None:
            pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        with open(out, "a") as f:
            line = {"attempt": ctx.attempt, "step": step, "at": done, "jvm": pid}
            f.write(json.dumps(line) + "\n")
        step += 1
        ctx.checkpoint({"step": step})
        if os.path.exists(gate):
            return
        time.sleep(0.2)


def machine_speed() -> float:
    """Seconds for a loop of 10^7 squares in this interpreter (0.7 on a quiet day here)."""
    began = time.perf_counter()
    total = 0
    for i in range(10**7):
        total += i * i
    return time.perf_counter() - began


def bare_start(timeout: float = 600.0) -> float:
    """Seconds from starting a bare ``python`` to its first action's end."""
    began = time.time()
    run = subprocess.run(
        [sys.executable, "-c", BARE], capture_output=True, text=True, timeout=timeout, check=True
    )
    return float(run.stdout.split()[-1]) - began


def actions(out: Path) -> list[dict[str, Any]]:
    try:
        text = out.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def wait(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.01)
    raise TimeoutError(f"{what}: not within {timeout:g} s")


def memory_mib(pid: int) -> tuple[float, float] | None:
    """(RSS, PSS) of a process in MiB (``/proc/<pid>/smaps_rollup``), None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    sizes = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in ("Rss", "Pss") and rest.split():
            sizes[name] = int(rest.split()[0]) / 1024
    return sizes.get("Rss", 0.0), sizes.get("Pss", 0.0)


def ready_jvms(daemon: DaemonProcess) -> list[int]:
    """Pids of the daemon's warm driver JVMs that are ready (warmed) and not taken, still
    named ``zkstore warm-driver ID`` in ``ps``."""
    log = daemon.log()
    gone = {a or b for a, b in _GONE.findall(log)}
    found = []
    for warm_id, pid in _READY_PID.findall(log):
        with contextlib.suppress(OSError):
            title = Path(f"/proc/{pid}/cmdline").read_bytes()
            if warm_id not in gone and title.startswith(b"zkstore warm-driver "):
                found.append(int(pid))
    return found


def warm_ready(daemon: DaemonProcess) -> int:
    """How many warm drivers the daemon says are ready and not taken (its log)."""
    log = daemon.log()
    ready = set(_READY.findall(log))
    gone = {a or b for a, b in _GONE.findall(log)}
    return len(ready - gone)


@dataclass
class Run:
    host_loss: float
    warm_submit: float
    cold_submit: float
    bare: float
    warm_pid_matched: bool
    #: (RSS, PSS) in MiB of each warm JVM ready before the kill
    memory: list[tuple[float, float]]


class Bench:
    def __init__(self, hosts: str, tmp: Path) -> None:
        self.tmp = tmp
        self.config = file_config(hosts, str(tmp), timeout=10.0, session_timeout=SESSION_TIMEOUT)
        self.local = LocalCluster(
            self.config,
            tmp / "rt",
            spark_master=MASTER,
            restart_backoff=0.5,
            warm_drivers=1,
            class_data=str(tmp / "class-data"),
            verbose=False,
        )
        self.client = Client(self.config)
        self.count = 0

    def start(self) -> None:
        self.local.start_daemon("host-1")
        self.local.wait_for_leader(timeout=120)
        self.local.start_daemon("host-2")
        for daemon in self.local.daemons.values():
            wait(lambda d=daemon: "class-data archive" in d.log(), 900, "the class-data archive")
            wait(lambda d=daemon: warm_ready(d) > 0, 600, f"a warm driver on {daemon.daemon_id}")

    def close(self) -> None:
        self.client.close()
        self.local.stop()

    def _job(self, conf: dict[str, str] | None = None) -> tuple[str, Path, Path]:
        self.count += 1
        out, gate = self.tmp / f"out-{self.count}", self.tmp / f"gate-{self.count}"
        job_id = f"steps-{self.count}"
        self.client.submit_function(
            spark_steps, str(out), str(gate), job_id=job_id, conf=conf, max_attempts=5
        )
        return job_id, out, gate

    def _finish(self, job_id: str, gate: Path) -> None:
        gate.touch()
        self.client.wait(job_id, timeout=300)

    def one_run(self) -> Run:
        leader = self.local.wait_for_leader(timeout=60)
        victim = next(d for d in self.local.daemons.values() if d is not leader)
        for daemon in (leader, victim):
            wait(lambda d=daemon: warm_ready(d) > 0, 600, f"a warm driver on {daemon.daemon_id}")
        zk, layout = self.client.cluster.zk, self.client.cluster.layout
        drained = layout.drain_mark(leader.daemon_id)
        zk.create(drained, DrainMark(version=None, since=utc_moment()).to_bytes())  # on the victim
        submitted = time.time()
        job_id, out, gate = self._job()
        first = wait(lambda: actions(out), 600, "the first action")[0]
        warm_submit = first["at"] - submitted
        zk.delete(drained)
        wait(lambda: warm_ready(leader) > 0, 600, "a warm driver on the survivor")
        wait(lambda: len(actions(out)) >= 3, 120, "three actions")
        sizes = [memory_mib(pid) for d in (leader, victim) for pid in ready_jvms(d)]
        memory = [size for size in sizes if size is not None]
        self.local.kill_host(victim.daemon_id)
        killed = time.time()
        back = wait(
            lambda: [a for a in actions(out) if a["attempt"] > first["attempt"]],
            300,
            "the new attempt's first action",
        )[0]
        host_loss = back["at"] - killed
        pid_matched = f"pid {back['jvm']}," in leader.log() or f"pid {back['jvm']})" in leader.log()
        self._finish(job_id, gate)
        back_again = self.local.start_daemon(victim.daemon_id)  # back for the next run
        # the cold job starts when no warm JVM is being started or warmed (its summary shows
        # its JVM-level setting: it takes none, and none is started beside its own JVM)
        for daemon in (leader, back_again):
            wait(lambda d=daemon: warm_ready(d) > 0, 600, f"a warm driver on {daemon.daemon_id}")
        cold_started = time.time()
        cold_id, cold_out, cold_gate = self._job(COLD_CONF)
        cold_gate.touch()
        cold_first = wait(lambda: actions(cold_out), 600, "the cold job's first action")[0]
        self.client.wait(cold_id, timeout=300)
        bare = bare_start()
        return Run(
            host_loss, warm_submit, cold_first["at"] - cold_started, bare, pid_matched, memory
        )


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    speed = machine_speed()
    runs: list[Run] = []
    with zookeeper() as hosts, tempfile.TemporaryDirectory() as tmp:
        bench = Bench(hosts, Path(tmp))
        try:
            bench.start()
            for index in range(1, args.runs + 1):
                run = bench.one_run()
                runs.append(run)
                print(
                    f"run {index}: host loss {run.host_loss:.2f} s (warm JVM pid in the "
                    f"daemon's log: {run.warm_pid_matched}), fresh job warm "
                    f"{run.warm_submit:.2f} s, cold {run.cold_submit:.2f} s, bare "
                    f"{run.bare:.2f} s; warm JVMs ready (RSS/PSS MiB): "
                    + (", ".join(f"{r:.0f}/{p:.0f}" for r, p in run.memory) or "none"),
                    flush=True,
                )
        finally:
            with contextlib.suppress(Exception):
                bench.close()
    after = machine_speed()
    bare = statistics.median(r.bare for r in runs)
    speeds = f"machine: 10^7 squares in {speed:.2f} s before, {after:.2f} s after"
    median = statistics.median
    sizes = [size for r in runs for size in r.memory]
    if sizes:
        print(
            f"memory per warm driver JVM, ready (median of {len(sizes)}): RSS "
            f"{median(r for r, _ in sizes):.0f} MiB, PSS {median(p for _, p in sizes):.0f} MiB",
            flush=True,
        )
    return show_all(
        (
            Result(
                f"host loss at --session-timeout {SESSION_TIMEOUT:g}: kill -> the new attempt's "
                "first Spark action, warm driver",
                median(r.host_loss for r in runs),
                bare,
                "<= 0.35",
                detail=f"also <= {SESSION_TIMEOUT + 1.5:g} s; baseline: a bare SparkSession "
                f"start and action; median of {len(runs)}; {speeds}",
            ),
            Result(
                "a fresh job, warm driver: submit -> first Spark action",
                median(r.warm_submit for r in runs),
                bare,
                "<= 0.35",
                detail="baseline: a bare SparkSession start and action",
            ),
            Result(
                "a fresh job, cold with the class-data archive: submit -> first Spark action",
                median(r.cold_submit for r in runs),
                bare,
                "<= 0.6",
                detail="baseline: a bare SparkSession start and action",
            ),
        )
    )


if __name__ == "__main__":
    main()
