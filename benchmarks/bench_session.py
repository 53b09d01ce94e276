"""Failover at a short session (issue 28): ``--session-timeout 2``.

- Host loss: 20 running jobs over two daemons; SIGKILL one daemon with its drivers, as the loss
  of its host would; time until every lost job has a live attempt again (goal: within 3 s, the
  session timeout + 1 s; :func:`benchmarks.bench_fleet.bench_host_loss` at 2 s).
- False failovers: two daemons at a 2-s session run long jobs (and a trickle of short ones) for
  ``--seconds`` (30 minutes by default) while two busy loops load the CPU and a writer keeps the
  disk busy (write 8 MB, fsync, again); counted: attempts lost (every ``lost`` in the jobs'
  statuses, every attempt past the first), leadership changes (the leader's contender node
  changed, or no leader was seen), and, to find what bounds it, the daemons' suspensions and
  revocations, the drivers that stopped themselves (their lease ran out), ZooKeeper's JVM pauses
  (its pause monitor and its GC log).

  Baseline, in the same run under the same load: four bare kazoo sessions at the same timeout in
  a process of their own, each with a heartbeat (an ``exists`` every 0.5 s, as the driver's
  lease does); printed: their suspensions and expiries, the longest gap between two answered
  heartbeats, and how many gaps exceeded the driver's lease length (the session timeout less a
  quarter: a driver would have stopped itself there). The count of false failovers is the
  figure (goal: zero); the bare sessions tell whether ZooKeeper, kazoo and the load alone bound
  it, or the runtime does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench_backlog import noop
from benchmarks.bench_fleet import bench_host_loss
from benchmarks.common import Result, file_config, hold, show_all
from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from recovery.driver.lease import default_margin
from zkstore.dev.embedded import EmbeddedZooKeeper, four_letter_word
from zkstore.errors import CorruptRecord
from zkstore.layout import Layout
from zkstore.records.fleet_records import LeaderInfo
from zkstore.records.job_records import JobStatus
from zkstore.records.record import read_record
from zkstore.records.result_records import JobResult
from zkstore.zookeeper.zk import ZooKeeper

BUSY_LOOP = "while True: pass"
DISK_LOOP = """
import os, sys
path, block = sys.argv[1], os.urandom(1 << 20)
while True:
    with open(path, "wb") as f:
        for _ in range(8):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
"""


@dataclass
class CountResult(Result):
    """A count whose goal is zero: the ratio shown is the count itself."""

    @property
    def ratio(self) -> float:
        return self.ours

    def met(self) -> bool:
        return self.ours == 0


@contextlib.contextmanager
def load(tmp: str, busy: int, disk: bool) -> Iterator[None]:
    """``busy`` busy-loop processes and a disk writer (fsync after every 8 MB) until the end."""
    started = [
        subprocess.Popen([sys.executable, "-c", BUSY_LOOP], stdin=subprocess.DEVNULL)
        for _ in range(busy)
    ]
    if disk:
        target = str(Path(tmp) / "disk-load.bin")
        started.append(subprocess.Popen([sys.executable, "-c", DISK_LOOP, target]))
    try:
        yield
    finally:
        for process in started:
            process.kill()
        for process in started:
            process.wait()


# -- bare kazoo sessions, the baseline ------------------------------------------------------------


def raw_sessions(hosts: str, seconds: float, session_timeout: float, count: int = 4) -> None:
    """``--raw``: ``count`` bare kazoo sessions with a heartbeat each for ``seconds``; prints
    their suspensions, expiries and heartbeat gaps (JSON)."""
    from kazoo.client import KazooClient, KazooState

    lease = session_timeout - default_margin(session_timeout)
    states: list[str] = []
    gaps: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()

    def heartbeat(client: KazooClient) -> None:
        answered = time.monotonic()
        while not stop.wait(0.5):
            sent = time.monotonic()
            try:
                client.exists_async("/").get(timeout=0.5)
            except Exception:  # noqa: BLE001 - any failure is an unanswered heartbeat
                continue
            with lock:
                gaps.append(sent - answered)
            answered = sent

    clients = []
    threads = []
    for _ in range(count):
        client = KazooClient(hosts=hosts, timeout=session_timeout)
        client.add_listener(lambda state: None if stop.is_set() else states.append(str(state)))
        client.start(timeout=30)
        clients.append(client)
        thread = threading.Thread(target=heartbeat, args=(client,), daemon=True)
        thread.start()
        threads.append(thread)
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    for client in clients:
        client.stop()
        client.close()
    report = {
        "sessions": count,
        "suspended": states.count(KazooState.SUSPENDED),
        "lost": states.count(KazooState.LOST),
        "max_gap": max(gaps, default=0.0),
        "gaps_over_lease": sum(1 for g in gaps if g > lease),
        "lease": lease,
    }
    print(json.dumps(report))


# -- the steady period -----------------------------------------------------------------------------


def _leader(zk: ZooKeeper, layout: Layout) -> str | None:
    """The leader's contender node, or None if no leader record is readable."""
    try:
        info = read_record(zk, LeaderInfo, layout.leader_info)
    except CorruptRecord:
        return None
    return None if info is None else info.contender


def _count(pattern: str, texts: list[str]) -> int:
    return sum(len(re.findall(pattern, text)) for text in texts)


def _evidence(
    args: argparse.Namespace,
    watched: Watched,
    changes: int,
    daemon_logs: list[str],
    driver_logs: list[str],
    bare: dict[str, float],
) -> str:
    return (
        f"  over {args.seconds:g} s at a {args.session_timeout:g}-s session, {args.busy} busy "
        f"loops{'' if args.no_disk else ' and a disk writer'}, {len(watched.long_ids)} long "
        f"jobs and {len(watched.short_ids)} short ones: {watched.lost} attempts lost, "
        f"{watched.restarted} long-job restarts, {changes} leadership changes, "
        f"{watched.no_leader} looks with no leader;\n"
        f"  daemons: {_count('connection lost', daemon_logs)} suspensions, "
        f"{_count('session expired', daemon_logs)} expiries, "
        f"{_count('is no longer the leader', daemon_logs)} revocations; drivers: "
        f"{_count('stops itself', driver_logs)} stopped themselves (lease or session);\n"
        f"  bare kazoo sessions ({bare['sessions']:g}): {bare['suspended']:g} suspensions, "
        f"{bare['lost']:g} expiries, longest heartbeat gap {bare['max_gap']:.2f} s, "
        f"{bare['gaps_over_lease']:g} gaps over the lease ({bare['lease']:g} s);"
    )


def _zk_pauses(zk: EmbeddedZooKeeper, gc_log: Path) -> str:
    """ZooKeeper's JVM pauses: its pause monitor's (``mntr``) and the longest GC pause."""
    values: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in four_letter_word("127.0.0.1", zk.port, "mntr").splitlines():
            key, _, value = line.partition("\t")
            values[key] = value
    gc = [float(m) for m in re.findall(r"Pause[^\n]*? (\d+\.\d+)ms", gc_log.read_text())]
    return (
        f"ZooKeeper JVM: pause monitor max {values.get('zk_max_jvm_pause_time_ms', '?')} ms "
        f"({values.get('zk_cnt_jvm_pause_time_ms', '?')} samples), "
        f"{len(gc)} GC pauses, longest {max(gc, default=0.0):.1f} ms; its longest fsync "
        f"{values.get('zk_max_fsynctime', '?')} ms (a session's reads wait behind its own "
        "writes, which wait for the fsync)"
    )


@dataclass
class Watched:
    """What the steady period saw."""

    leaders: set[str | None]
    no_leader: int
    long_ids: list[str]
    short_ids: list[str]
    lost: int = 0
    restarted: int = 0


def _start_long_jobs(client: Client, args: argparse.Namespace) -> list[str]:
    zk, layout = client.cluster.zk, client.cluster.layout
    deadline = time.monotonic() + 60
    while len(zk.children(layout.members)) < 2:
        if time.monotonic() > deadline:
            raise TimeoutError("the second daemon did not join within 60 s")
        time.sleep(0.05)
    ids = [
        client.submit_function(hold, args.seconds + 3600.0, job_id=f"long-{i:02d}")
        for i in range(args.long_jobs)
    ]
    running = [layout.running(j) for j in ids]
    deadline = time.monotonic() + 120
    while not all(s is not None for s in zk.exists_many(running)):
        if time.monotonic() > deadline:
            raise TimeoutError("the long jobs were not all running within 120 s")
        time.sleep(0.1)
    return ids


def _watch(client: Client, args: argparse.Namespace, long_ids: list[str]) -> Watched:
    """Look at the leader every 0.5 s and submit the trickle until the period ends; then count
    the lost attempts (the long jobs' statuses; the short jobs' results: a no-op job never
    fails, so every attempt past its first was lost)."""
    zk, layout = client.cluster.zk, client.cluster.layout
    watched = Watched({_leader(zk, layout)}, 0, long_ids, [])
    end = time.monotonic() + args.seconds
    next_short = time.monotonic()
    while time.monotonic() < end:
        leader = _leader(zk, layout)
        watched.no_leader += leader is None
        watched.leaders.add(leader)
        if args.trickle and time.monotonic() >= next_short:
            job = f"short-{len(watched.short_ids):05d}"
            watched.short_ids.append(client.submit_function(noop, job_id=job))
            next_short += args.trickle
        time.sleep(0.5)
    for job in long_ids:
        status = read_record(zk, JobStatus, layout.status(job))
        if status is not None:
            watched.lost += status.lost
            watched.restarted += max(status.attempt - 1, 0)
    for job in watched.short_ids:
        result = read_record(zk, JobResult, layout.result(job))
        status = read_record(zk, JobStatus, layout.status(job))
        if result is not None:
            watched.lost += max(result.attempts - 1, 0)
        elif status is not None:
            watched.lost += status.lost
    return watched


def bench_steady(
    zk: EmbeddedZooKeeper, gc_log: Path, args: argparse.Namespace
) -> tuple[Result, str]:
    session = args.session_timeout
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(zk.connect_string, tmp, timeout=10.0, session_timeout=session)
        local = LocalCluster(
            config,
            Path(tmp) / "rt",
            extra_args=("--max-drivers", str(args.long_jobs + 4)),
            restart_backoff=1.0,
        )
        try:
            local.start_daemon("host-1")
            local.wait_for_leader()
            local.start_daemon("host-2")
            with Client(config) as client:
                long_ids = _start_long_jobs(client, args)
                bare = [zk.connect_string, str(args.seconds), str(session)]
                raw = subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.bench_session", "--raw", *bare],
                    stdout=subprocess.PIPE,
                )
                with load(tmp, args.busy, not args.no_disk):
                    watched = _watch(client, args, long_ids)
                raw_out, _ = raw.communicate(timeout=120)
                daemon_logs = [d.log() for d in local.daemons.values()]  # before the stop
        finally:
            local.stop()
        driver_logs = [
            p.read_text(errors="replace") for p in (Path(tmp) / "rt" / "drivers").rglob("*.log")
        ]
    changes = len({c for c in watched.leaders if c is not None}) - 1
    lost = watched.lost
    bare_sessions = json.loads(raw_out.decode().splitlines()[-1])
    evidence = _evidence(args, watched, changes, daemon_logs, driver_logs, bare_sessions)
    evidence += f"\n  {_zk_pauses(zk, gc_log)}"
    result = CountResult(
        f"false failovers over {args.seconds:g} s under load at a {session:g}-s session "
        "(attempts lost + leadership changes)",
        float(lost + changes),
        float(bare_sessions["suspended"] + bare_sessions["lost"]),
        "== 0",
        unit="events",
        detail="goal: none; the ratio is the count; baseline: suspensions and expiries of four "
        "bare kazoo sessions with heartbeats under the same load",
    )
    return result, evidence


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--session-timeout", type=float, default=2.0)
    parser.add_argument("--jobs", type=int, default=20, help="running jobs at the host loss")
    parser.add_argument("--seconds", type=float, default=1800.0, help="the steady period")
    parser.add_argument("--long-jobs", type=int, default=8, help="jobs running all along")
    parser.add_argument(
        "--trickle", type=float, default=5.0, help="a short job every this many seconds (0: none)"
    )
    parser.add_argument("--busy", type=int, default=2, help="busy-loop processes")
    parser.add_argument("--no-disk", action="store_true", help="no disk writer")
    parser.add_argument(
        "--raw", nargs=3, metavar=("HOSTS", "SECONDS", "SESSION"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.raw:
        raw_sessions(args.raw[0], float(args.raw[1]), float(args.raw[2]))
        return []
    with tempfile.TemporaryDirectory() as zk_dir:
        gc_log = Path(zk_dir) / "gc.log"
        zk = EmbeddedZooKeeper(
            extra_config=("jvm.pause.monitor=true", "jvm.pause.info-threshold.ms=200"),
            jvm_options=(f"-Xlog:gc:file={gc_log}",),
            short_jvm=False,  # its pauses are what is measured: a production server's JVM
        )
        with zk.start():
            host_loss = bench_host_loss(zk.connect_string, args.jobs, args.session_timeout)
            steady, evidence = bench_steady(zk, gc_log, args)
    results = show_all([host_loss, steady])
    print(evidence, flush=True)
    return results


if __name__ == "__main__":
    main()
