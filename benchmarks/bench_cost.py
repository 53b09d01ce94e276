"""What one run costs (issue 28): CPU seconds per no-op job, per process it touches.

One daemon (``--max-drivers 4`` by default) runs batches of N no-op jobs; for each batch this
prints the CPU each process spent, divided by N:

- the daemon's main process (leader and member: all its threads), from ``/proc/<pid>/stat``;
- its fork server, the same way (its own CPU, not its children's);
- the drivers: every child the fork server reaps is recorded with its whole life's CPU by a
  probe (``benchmarks/probe/sitecustomize.py``, on the daemon's ``PYTHONPATH``: ``os.waitpid``
  made ``os.wait4``), exact however briefly the child lived;
- the daemon's log shipper (one process for all its drivers, forked by the fork server once and
  alive across batches; told from a driver by its ``os.nice`` call), from ``/proc/<pid>/stat``
  (the batch it starts in pays its start);
- the ZooKeeper JVM (the embedded server's ``/proc/<pid>/stat``; not measured with
  ``ZKSTORE_ZK``), but for its JIT compiler threads, whose CPU is printed apart: a fresh JVM
  compiles the paths its load makes hot, and went on compiling for 25 ms a job after 240 jobs
  (measured: the JIT threads were two thirds of the server's CPU over a run), which a
  production server, running for months, paid once long ago; the floor's ZooKeeper figure is
  counted the same way;
- this process (the client: submissions and polling for the results), shown apart and not in
  the total.

Each batch is measured from its first submission until every result exists, every driver of
the batch has been reaped and every log is stored whole (its ``end.json``), so the daemon's and
ZooKeeper's idle work over that window (periodic reconciles, heartbeats, ticks) is in it; an
idle window before the batches says how much that is per second.

Baseline: the least a job's run can cost in this design (a driver holds its own ZooKeeper
session, invariant 4): a process forked from one that has kazoo imported opens a kazoo session,
creates and deletes an ephemeral node and closes, N times one after the other, its CPU (wait4)
plus ZooKeeper's per run. ``python -c pass`` would measure an interpreter's start, which the
fork server already avoids, and a bare kazoo session in this process would hide a process's
cost: this floor is what phase B can approach, not pass. The goal (0.05 s per job, all processes
included) is printed as a ratio to that floor.

``--profile DIR`` samples the daemon and the fork server with its children (py-spy, which must
be installed: ``pip install py-spy``) during one more batch and prints the top functions of each
kind of process; ``--cprofile DIR`` runs each driver's and shipper's ``main`` under cProfile
(main thread only) and prints the top functions by cumulative and own time. Both perturb the
figures of the batches they run in, which are printed apart. ``--s3`` keeps the payloads and
logs on a moto S3 server in this process (an external service: its CPU is not counted), as a
production stack does on S3 or MinIO.
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import S3, Result, file_config, s3_server, wait_all_exist
from benchmarks.profiles import (
    start_spy,
    stop_spy,
    summarize_cprofile,
    summarize_spy,
    summarize_zkcalls,
)
from recovery.client.api import Client
from recovery.dev.localcluster import DaemonProcess, LocalCluster
from zkstore.config import ZkAuth
from zkstore.dev.embedded import EmbeddedZooKeeper, four_letter_word

PROBE_DIR = Path(__file__).resolve().parent / "probe"
PROBE_ENV = "ZKSTORE_BENCH_PROBE"
CPROFILE_ENV = "ZKSTORE_BENCH_CPROFILE"
ZKCALLS_ENV = "ZKSTORE_BENCH_ZKCALLS"
GOAL = 0.05
TICK = os.sysconf("SC_CLK_TCK")
KINDS = ("daemon", "fork server", "drivers", "shippers", "warm JVMs", "ZooKeeper")


def noop(ctx: object) -> None:
    """A job that does nothing: what is measured is the runtime's own cost per job."""


# -- reading the processes ----------------------------------------------------------------------


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` itself (all its threads), from ``/proc``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def warm_jvms_cpu(daemon: int) -> float:
    """The CPU of the daemon's warm driver JVMs (``--warm-drivers``): those alive (``ps``
    names them ``zkstore warm-driver ID``) and those it ended and reaped (its children's CPU,
    ``cutime + cstime``: it reaps nothing else itself, its drivers are the fork server's)."""
    with open(f"/proc/{daemon}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    total = (int(fields[13]) + int(fields[14])) / TICK
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            title = (entry / "cmdline").read_bytes()
            if int(stat.rsplit(")", 1)[1].split()[1]) == daemon and title.startswith(
                b"zkstore warm-driver "
            ):
                total += proc_cpu(int(entry.name))
    return total


#: The JVM's JIT compiler threads (``comm`` is cut at 15 characters): a fresh JVM compiles the
#: paths its load makes hot, a cost a long-lived server paid long ago.
JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")


def jit_cpu(pid: int) -> float:
    """CPU seconds the JIT compiler threads of JVM ``pid`` spent (they must never exit:
    ``-XX:-UseDynamicNumberOfCompilerThreads``, or a thread's CPU would leave this sum while
    staying in the process's)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            stat = (task / "stat").read_text()
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            if name.startswith(JIT_THREADS):
                fields = stat.rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
    return total / TICK


def zk_cpu(pid: int | None) -> tuple[float, float]:
    """CPU seconds of ZooKeeper's JVM: (serving, of every thread but the JIT's; compiling)."""
    if pid is None:
        return 0.0, 0.0
    compiling = jit_cpu(pid)
    return proc_cpu(pid) - compiling, compiling


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def child_with(parent: int, marker: str) -> int | None:
    """The pid of a child of ``parent`` whose command line contains ``marker``."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and marker in cmdline:
            return int(entry.name)
    return None


#: ZooKeeper's own counters (``mntr``) shown per job: what the runtime asks of it.
ZK_COUNTERS = {
    "requests": "zk_packets_received",
    "reads": "zk_cnt_readlatency",
    "writes": "zk_cnt_updatelatency",
    "fsyncs": "zk_cnt_fsynctime",
    "sessions closed": "zk_cnt_close_session_prep_time",
    "watches fired": (
        "zk_sum_node_created_watch_count",
        "zk_sum_node_deleted_watch_count",
        "zk_sum_node_changed_watch_count",
        "zk_sum_node_children_watch_count",
    ),
}


def zk_counters(hosts: str) -> dict[str, float]:
    """ZooKeeper's counters of :data:`ZK_COUNTERS` (empty if ``mntr`` does not answer)."""
    host, _, port = hosts.split(",", maxsplit=1)[0].rpartition(":")
    try:
        text = four_letter_word(host, int(port), "mntr")
    except (OSError, ValueError):
        return {}
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition("\t")
        with contextlib.suppress(ValueError):
            values[key] = float(value)
    counters = {}
    for name, spec in ZK_COUNTERS.items():
        keys = (spec,) if isinstance(spec, str) else spec
        if all(k in values for k in keys):
            counters[name] = sum(values[k] for k in keys)
    return counters


@dataclass
class Probe:
    """The probe's record file, read from an offset on."""

    path: Path
    offset: int = 0

    def mark(self) -> None:
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def events(self, *, since_mark: bool = True) -> list[dict[str, object]]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset if since_mark else 0)
            return [json.loads(line) for line in f.read().splitlines() if line.strip()]

    def drivers(self, parent: int) -> list[float]:
        """CPU of each driver ``parent`` reaped since the mark (the log shipper, the one child
        that lowers its priority, is not one)."""
        niced = self.shippers()
        return [
            float(e["cpu"])  # type: ignore[arg-type]
            for e in self.events()
            if e["event"] == "reaped" and e["by"] == parent and e["pid"] not in niced
        ]

    def shippers(self) -> set[int]:
        """Every log shipper started so far (it lowers its own priority: no driver does)."""
        return {int(e["pid"]) for e in self.events(since_mark=False) if e["event"] == "nice"}  # type: ignore[call-overload]


@dataclass
class Batch:
    jobs: int
    seconds: float
    cpu: dict[str, float]
    client: float
    compiling: float
    max_driver: float = 0.0
    zk: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.cpu.values())

    def per_job(self, kind: str) -> float:
        return (self.total if kind == "total" else self.cpu[kind]) / self.jobs

    def show(self, label: str) -> None:
        parts = ", ".join(f"{k} {self.per_job(k) * 1000:.1f}" for k in (*KINDS, "total"))
        print(
            f"  {label}: {self.jobs} jobs in {self.seconds:.1f} s; CPU ms per job: {parts}; "
            f"client {self.client / self.jobs * 1000:.1f}, ZooKeeper's JIT compiling "
            f"{self.compiling / self.jobs * 1000:.1f} (neither in the total)",
            flush=True,
        )
        if self.zk:
            print(
                "    ZooKeeper per job: "
                + ", ".join(f"{k} {v / self.jobs:.1f}" for k, v in self.zk.items()),
                flush=True,
            )


@dataclass
class Cost:
    """The processes of one daemon, and how to measure a batch of jobs on it."""

    local: LocalCluster
    client: Client
    hosts: str
    probe: Probe
    zk_pid: int | None
    daemon_pid: int
    fork_server: int = 0
    batches: int = 0
    spies: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def snapshot(self) -> dict[str, float]:
        cpu = {
            "daemon": proc_cpu(self.daemon_pid),
            "fork server": proc_cpu(self.fork_server),
            "client": own_cpu(),
            "shippers": 0.0,
            "warm JVMs": warm_jvms_cpu(self.daemon_pid),
        }
        for pid in self.probe.shippers():  # the daemon's one, alive across batches
            with contextlib.suppress(OSError):
                cpu["shippers"] += proc_cpu(pid)
        cpu["ZooKeeper"], cpu["compiling"] = zk_cpu(self.zk_pid)
        return cpu

    def idle(self, seconds: float) -> dict[str, float]:
        """CPU per second of the daemon, its fork server and ZooKeeper with nothing to do."""
        before, start = self.snapshot(), time.monotonic()
        time.sleep(seconds)
        after, took = self.snapshot(), time.monotonic() - start
        return {k: (after[k] - before[k]) / took for k in ("daemon", "fork server", "ZooKeeper")}

    def batch(self, count: int, timeout: float = 600.0) -> Batch:
        self.batches += 1
        prefix = f"b{self.batches}"
        self.probe.mark()
        zk_before = zk_counters(self.hosts)
        before, start = self.snapshot(), time.monotonic()
        ids = [self.client.submit_function(noop, job_id=f"{prefix}-{i:04d}") for i in range(count)]
        layout = self.client.cluster.layout
        wait_all_exist(self.client.cluster.zk, [layout.result(j) for j in ids], timeout)
        deadline = time.monotonic() + 120
        storage = self.client.cluster.storage
        ends = [f"{self.client.cluster.storage_layout.attempt_logs(j, 1)}/end.json" for j in ids]
        while True:  # every driver reaped, and every log stored whole by the log shipper
            drivers = self.probe.drivers(self.fork_server)
            stored = sum(storage.exists(storage.url(key)) for key in ends)
            if len(drivers) >= count and stored >= count:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{len(drivers)} drivers reaped, {stored} logs stored of {count}"
                )
            time.sleep(0.1)
        after, took = self.snapshot(), time.monotonic() - start
        zk_after = zk_counters(self.hosts)
        cpu = {
            k: after[k] - before[k]
            for k in ("daemon", "fork server", "ZooKeeper", "shippers", "warm JVMs")
        }
        cpu["drivers"] = sum(drivers)
        zk = {k: zk_after[k] - zk_before[k] for k in zk_after if k in zk_before}
        return Batch(
            count,
            took,
            cpu,
            after["client"] - before["client"],
            after["compiling"] - before["compiling"],
            max(drivers, default=0.0),
            zk,
        )


@contextlib.contextmanager
def one_daemon(
    hosts: str,
    zk_pid: int | None,
    tmp: str,
    slots: int,
    cprofile: Path | None,
    zkcalls: bool,
    s3: S3 | None = None,
    credentials: bool = False,
    warm_drivers: int = 0,
    class_data: str | None = None,
) -> Iterator[Cost]:
    config = file_config(hosts, tmp, timeout=30.0)
    if credentials:  # digest credentials: each driver holds its own job's identity
        config = config.with_changes(zk_auth=ZkAuth.parse("bench:cost-of-credentials"))
    if s3 is not None:  # payloads and logs on S3 (its server's CPU is not counted)
        config = config.with_changes(
            storage_url=f"s3://{s3.bucket}{config.root}", storage_options=s3.options
        )
    probe = Probe(Path(tmp) / "probe.jsonl")
    env = {
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(PROBE_DIR), os.environ.get("PYTHONPATH", "")) if p
        ),
        PROBE_ENV: str(probe.path),
    }
    if cprofile is not None:
        cprofile.mkdir(parents=True, exist_ok=True)
        env[CPROFILE_ENV] = str(cprofile)
    if zkcalls:
        env[ZKCALLS_ENV] = "1"
    local = LocalCluster(
        config,
        Path(tmp) / "rt",
        extra_args=("--max-drivers", str(slots)),
        extra_env=env,
        verbose=False,
        spark_master="local[1]",
        warm_drivers=warm_drivers,
        class_data=class_data or str(Path(tmp) / "class-data"),
    )
    try:
        daemon = local.start_daemon("cost")
        local.wait_for_leader()
        with Client(config) as client:
            cost = Cost(local, client, hosts, probe, zk_pid, daemon.pid)
            # A first job starts the fork server, and leaves nothing to warm up in the batches.
            client.submit_function(noop, job_id="warm-up")
            wait_all_exist(client.cluster.zk, [client.cluster.layout.result("warm-up")], 120)
            if warm_drivers > 0:  # settled: the archive made, the warm JVMs ready
                wait_ready(daemon, warm_drivers)
            time.sleep(5.0)  # the warm-up's child reaped, the archive's checks done
            # Its process title (recovery/proctitle.py), or its command line without one.
            fork_server = child_with(daemon.pid, "zkstore fork-server") or child_with(
                daemon.pid, "recovery.member.forkserver"
            )
            if fork_server is None:
                raise RuntimeError("the daemon has no fork server: nothing to measure")
            cost.fork_server = fork_server
            yield cost
    finally:
        local.stop()


# -- the raw floor -------------------------------------------------------------------------------


def floor_child(hosts: str, count: int) -> None:
    """``--floor``: fork ``count`` kazoo sessions one after the other; print their CPU (JSON).

    A process of its own, single-threaded when it forks (no kazoo client of its own is
    started), as the fork server is."""
    import uuid

    from kazoo.client import KazooClient

    root = f"/bench-floor-{uuid.uuid4().hex[:8]}"
    setup = KazooClient(hosts=hosts, timeout=30)
    setup.start(timeout=30)
    setup.ensure_path(root)
    setup.stop()
    setup.close()
    cpu = []
    for i in range(count):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                client = KazooClient(hosts=hosts, timeout=10)
                client.start(timeout=30)
                path = client.create(f"{root}/run-{i}", b"{}", ephemeral=True)
                client.delete(path)
                client.stop()
                client.close()
                code = 0
            finally:
                os._exit(code)
        _, status, usage = os.wait4(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("a floor session failed")
        cpu.append(usage.ru_utime + usage.ru_stime)
    print(json.dumps(cpu))


def measure_floor(hosts: str, zk_pid: int | None, count: int) -> tuple[float, float]:
    """CPU per run of the floor: (the forked sessions, ZooKeeper serving them: its JIT's
    compiling is not counted, as in the batches)."""
    zk_before = zk_cpu(zk_pid)[0]
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_cost", "--floor", hosts, str(count)],
        check=True,
        capture_output=True,
    ).stdout
    zk = zk_cpu(zk_pid)[0] - zk_before
    cpu = json.loads(out.splitlines()[-1])
    return sum(cpu) / count, zk / count


# -- the benchmark -------------------------------------------------------------------------------


@contextlib.contextmanager
def zookeeper_with_pid() -> Iterator[tuple[str, int | None]]:
    if os.environ.get("ZKSTORE_ZK"):
        yield os.environ["ZKSTORE_ZK"], None
        return
    # A production JVM, its CPU counted but for its JIT compiler threads' (kept alive to be read)
    with EmbeddedZooKeeper(
        short_jvm=False, jvm_options=("-XX:-UseDynamicNumberOfCompilerThreads",)
    ) as server:
        yield server.connect_string, server.pid


def wait_ready(daemon: DaemonProcess, count: int, timeout: float = 900.0) -> None:
    """Until the daemon says ``count`` warm drivers are ready (its log)."""
    deadline = time.monotonic() + timeout
    while len(set(re.findall(r"warm driver ([0-9a-f]{8}) ready", daemon.log()))) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {count} warm driver(s) ready within {timeout:g} s")
        time.sleep(0.5)


def bench_cost(args: argparse.Namespace) -> Result:
    with contextlib.ExitStack() as stack:
        s3 = stack.enter_context(s3_server()) if args.s3 else None
        return _bench_cost(args, s3)


def _bench_cost(args: argparse.Namespace, s3: S3 | None) -> Result:
    with zookeeper_with_pid() as (hosts, zk_pid), tempfile.TemporaryDirectory() as tmp:
        measure_floor(hosts, zk_pid, args.jobs)  # warms ZooKeeper's JIT up: not counted
        floor, floor_zk = measure_floor(hosts, zk_pid, args.jobs)
        print(
            f"  floor: a forked kazoo session (connect, create + delete an ephemeral node, "
            f"close): {floor * 1000:.1f} ms CPU, ZooKeeper {floor_zk * 1000:.1f} ms per run",
            flush=True,
        )
        cprofile = Path(args.cprofile) if args.cprofile else None
        with one_daemon(
            hosts,
            zk_pid,
            tmp,
            args.slots,
            cprofile,
            args.zk_calls,
            s3,
            args.credentials,
            args.warm_drivers,
            args.class_data,
        ) as cost:
            idle = cost.idle(args.idle)
            print(
                "  idle, CPU ms per second: "
                + ", ".join(f"{k} {v * 1000:.1f}" for k, v in idle.items()),
                flush=True,
            )
            batches = []
            for run in range(args.runs):
                batch = cost.batch(args.jobs)
                batch.show(f"run {run + 1}{' (cProfile on)' if cprofile else ''}")
                batches.append(batch)
            if args.profile:
                out = Path(args.profile)
                out.mkdir(parents=True, exist_ok=True)
                spies = [
                    start_spy(cost.daemon_pid, out / "daemon.txt", False),
                    start_spy(cost.fork_server, out / "forkserver.txt", True),
                ]
                try:
                    cost.batch(args.jobs).show("profiled run (py-spy on; not in the median)")
                finally:
                    for spy in spies:
                        stop_spy(spy)
                spied = {"daemon.txt": cost.daemon_pid, "forkserver.txt": cost.fork_server}
                for name, pid in spied.items():
                    summarize_spy(out / name, pid, cost.daemon_pid, cost.fork_server, args.top)
            if cprofile is not None:
                summarize_cprofile(cprofile, args.top)
            ran = 1 + args.jobs * cost.batches  # the warm-up job too
        if args.zk_calls:  # the daemon wrote its counts as it stopped
            summarize_zkcalls(Path(tmp) / "probe.jsonl", ran, args.top)
    medians = {
        kind: statistics.median(b.per_job(kind) for b in batches) for kind in (*KINDS, "total")
    }
    print(
        f"  median of {len(batches)} runs, CPU ms per no-op job: "
        + ", ".join(f"{k} {v * 1000:.1f}" for k, v in medians.items()),
        flush=True,
    )
    floor_total = floor + floor_zk
    return Result(
        f"CPU per no-op job, all processes ({args.jobs} jobs on {args.slots} slots, "
        f"--warm-drivers {args.warm_drivers}"
        f"{', payloads on S3' if s3 is not None else ''}, "
        f"median of {len(batches)})",
        medians["total"],
        floor_total,
        f"<= {GOAL / floor_total:.2f}",
        detail=f"goal {GOAL:g} s per job; baseline: a forked kazoo session's run, ZooKeeper "
        f"included (on both sides without its JIT's compiling); load {os.getloadavg()[0]:.2f}",
    )


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=40, help="no-op jobs per run")
    parser.add_argument("--runs", type=int, default=3, help="runs (the median is reported)")
    parser.add_argument("--slots", type=int, default=4, help="the daemon's --max-drivers")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of the idle window")
    parser.add_argument("--profile", metavar="DIR", help="py-spy one more run into DIR")
    parser.add_argument("--cprofile", metavar="DIR", help="cProfile drivers and shippers")
    parser.add_argument(
        "--zk-calls", action="store_true", help="count the ZooKeeper requests of each process"
    )
    parser.add_argument("--top", type=int, default=15, help="functions shown per profile")
    parser.add_argument(
        "--s3",
        action="store_true",
        help="payloads and logs on a moto S3 server in this process (its CPU not counted)",
    )
    parser.add_argument(
        "--credentials",
        action="store_true",
        help="ZooKeeper digest credentials: every node carries its ACL, every driver holds "
        "its own job's identity (issue 43: what per-job identities cost)",
    )
    parser.add_argument(
        "--warm-drivers",
        type=int,
        default=0,
        help="the daemon's --warm-drivers (local[1]; measured once its archive is made and its "
        "warm JVMs are ready; their CPU is counted as 'warm JVMs')",
    )
    parser.add_argument(
        "--class-data",
        metavar="DIR",
        help="the daemon's --class-data (an archive made already: not made again)",
    )
    parser.add_argument("--floor", nargs=2, metavar=("HOSTS", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.floor:
        floor_child(args.floor[0], int(args.floor[1]))
        return []
    result = bench_cost(args)
    result.show()
    return [result]


if __name__ == "__main__":
    main()
