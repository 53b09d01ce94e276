"""Fleet benchmarks (issue: every daemon runs drivers).

- Host loss: 20 running jobs spread over two daemons; SIGKILL one daemon with its drivers, as the
  loss of its host would; time until every lost job has a new live attempt (its ``running`` node
  taken by attempt 2), against the session timeout (goal <= session timeout + 1 s).
- Placement: 1,000 queued jobs, five members of 200 slots each; assignments written per second
  by the leader (from its leadership to the last assignment, ZooKeeper's own timestamps).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from benchmarks.bench_backlog import _submit_many
from benchmarks.common import Result, file_config, fresh_root, hold, show_all, zookeeper
from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.zk import ZooKeeper


def _running_attempts(client: Client, job_ids: list[str]) -> dict[str, int]:
    layout, zk = client.cluster.layout, client.cluster.zk
    found = zk.get_many([layout.running(job_id) for job_id in job_ids])
    return {
        job_id: json.loads(item[0])["attempt"]
        for job_id, item in zip(job_ids, found, strict=True)
        if item is not None
    }


def bench_host_loss(hosts: str, jobs: int, session_timeout: float) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=10.0, session_timeout=session_timeout)
        slots = ("--max-drivers", str(jobs))
        local = LocalCluster(config, Path(tmp) / "rt", extra_args=slots, restart_backoff=1.0)
        try:
            local.start_daemon("host-1")
            leader = local.wait_for_leader()
            local.start_daemon("host-2")
            with Client(config) as client:
                zk, layout = client.cluster.zk, client.cluster.layout
                deadline = time.monotonic() + 60
                while len(zk.children(layout.members)) < 2 and time.monotonic() < deadline:
                    time.sleep(0.05)
                ids = [
                    client.submit_function(hold, 600.0, job_id=f"h-{i:02d}") for i in range(jobs)
                ]
                deadline = time.monotonic() + 300
                while len(_running_attempts(client, ids)) < jobs:
                    if time.monotonic() > deadline:
                        raise TimeoutError("not every job was running after 300 s")
                    time.sleep(0.2)
                victim = next(d for d in ("host-1", "host-2") if d != leader.daemon_id)
                lost = sorted(zk.children(layout.member_assignments(victim)))
                killed = time.monotonic()
                local.kill_host(victim)
                deadline = killed + 120
                while True:
                    attempts = _running_attempts(client, lost)
                    if len(attempts) == len(lost) and all(a >= 2 for a in attempts.values()):
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError("the lost jobs were not running again within 120 s")
                    time.sleep(0.02)
                took = time.monotonic() - killed
        finally:
            local.stop()
    return Result(
        f"host loss: {len(lost)} of {jobs} running jobs on the lost daemon, to a live attempt each",
        took,
        session_timeout + 1.0,
        "<= 1.0",
        detail=f"goal: session timeout {session_timeout:g} s + 1 s",
    )


def bench_placement(hosts: str, jobs: int, members: int, slots: int) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp, timeout=30.0)
        _submit_many(config, jobs)
        # Members that take assignments without launching anything: the leader's placement is
        # what is measured, not the drivers (1,000 of them would not fit on this machine).
        fake = ZooKeeper.from_config(config).start()
        layout = Client(config).cluster.layout
        for i in range(members):
            info = MemberInfo(
                version=None,
                daemon_id=f"member-{i}",
                host="bench",
                pid=i + 1,
                slots=slots,
                started=utc_moment(),
            )
            fake.create(layout.member(info.daemon_id), info.to_bytes(), ephemeral=True)
        local = LocalCluster(config, Path(tmp) / "rt", extra_args=("--max-drivers", "1"))
        try:
            local.start_daemon("placer", "--label", "role=placer")
            local.wait_for_leader(timeout=120)
            _, info_stat = fake.get(layout.leader_info)
            deadline = time.monotonic() + 300
            while True:
                dirs = [f"member-{i}" for i in range(members)]
                counts = fake.children_many([layout.member_assignments(d) for d in dirs])
                if sum(len(c or ()) for c in counts) >= jobs - 1:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError("not every job was placed within 300 s")
                time.sleep(0.1)
            newest = max(
                stat.mtime
                for d in dirs
                for stat in fake.exists_many(
                    [
                        f"{layout.member_assignments(d)}/{j}"
                        for j in fake.children(layout.member_assignments(d))
                    ]
                )
                if stat is not None
            )
        finally:
            local.stop()
            fake.stop()
    seconds = (newest - info_stat.ctime) / 1000.0
    baseline = _raw_placements(hosts, jobs)
    return Result(
        f"placement of {jobs} queued jobs over {members} members of {slots} slots",
        jobs / seconds,
        baseline,
        ">= 0.3",
        unit="assignments/s",
        higher_is_better=True,
        detail=f"{seconds:.2f} s from leadership to the last assignment, reads and decisions "
        "included; baseline: the same writes as raw pipelined kazoo transactions",
    )


def _raw_placements(hosts: str, jobs: int) -> float:
    """Assignments per second written as raw kazoo transactions, pipelined: the fence check,
    the status set and the assignment create of each placement."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=hosts, timeout=30)
    client.start(timeout=30)
    root = fresh_root()
    try:
        fence = client.create(f"{root}/fence", makepath=True, ephemeral=True)
        client.ensure_path(f"{root}/assignments/m")
        for i in range(jobs):
            client.create_async(f"{root}/status-{i}", b"{}", makepath=True)
        client.sync(root)
        start = time.perf_counter()
        pending = []
        for i in range(jobs):
            transaction = client.transaction()
            transaction.check(fence, 0)
            transaction.set_data(f"{root}/status-{i}", b'{"state": "STARTING"}', 0)
            transaction.create(f"{root}/assignments/m/{i}", b'{"attempt": 1}')
            pending.append(transaction.commit_async())
        for result in pending:
            result.get(timeout=60)
        return jobs / (time.perf_counter() - start)
    finally:
        client.delete(root, recursive=True)
        client.stop()
        client.close()


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("--placements", type=int, default=1000)
    args = parser.parse_args(argv)
    with zookeeper() as hosts:
        return show_all(
            (
                bench_host_loss(hosts, args.jobs, args.session_timeout),
                bench_placement(hosts, args.placements, 5, 200),
            )
        )


if __name__ == "__main__":
    main()
