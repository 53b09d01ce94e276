"""Commit latency of outputs (issue 55): a checkpoint that commits 1 and 100 parts, against a
plain checkpoint and against raw kazoo's transaction of the same ops and bytes, same run.

The job's side as a driver runs it (``JobContext.checkpoint(state, commit=...)``, fenced on a
stand-in attempt: its status and ``running`` node), on local storage and the embedded ZooKeeper:
a commit adds to a plain checkpoint one node in the same transaction, a storage stat per part
(each must hold data) and the manifest file written after it (every commit of the output read
back). The raw baseline is one kazoo transaction with the same checks and creates (the fence's
two checks, the handle, its ``locks`` and lock, the commit's node, the same bytes), no storage.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import uuid
from pathlib import Path

from benchmarks.common import Result, file_config, timed, zookeeper
from recovery.driver.artifacts import JobArtifacts
from recovery.driver.config import DynamicConfig
from recovery.driver.context import JobContext
from recovery.driver.outputs import JobOutputs
from zkstore.cluster import Cluster
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.records import JobStatus, RunningInfo
from zkstore.jobs.states import STARTING
from zkstore.ops import Fence
from zkstore.strict import utc_moment


def noop(ctx: object) -> None:
    """The job the stand-in attempt belongs to (never run)."""


def attempt_context(cluster: Cluster, job: str) -> JobContext:
    """A driver's job context for a stand-in attempt 1 of ``job``."""
    cluster.jobs.submit(JobDefinition.for_function(job, noop))
    status = cluster.state.put_status(
        job,
        JobStatus(version=None, state=STARTING, attempt=1, updated=utc_moment()),
        expected_version=None,
    )
    assert status.version is not None
    info = RunningInfo(version=None, attempt=1, host="h", pid=1, started=utc_moment())
    cluster.zk.create(cluster.layout.running(job), info.to_bytes(), ephemeral=True)
    fence = Fence.check(cluster.layout.status(job), status.version) + Fence.check(
        cluster.layout.running(job), 0
    )
    artifacts = JobArtifacts(
        cluster.artifacts(job), attempt=1, fence=fence, cancelled=threading.Event()
    )
    return JobContext(
        job_id=job,
        name=job,
        attempt=1,
        spark_master="local[1]",
        spark_conf={},
        checkpoints=cluster.checkpoints(job),
        fence=fence,
        config=DynamicConfig(dict),
        cancelled=threading.Event(),
        artifacts=artifacts,
        outputs=JobOutputs(cluster.outputs(job), artifacts, attempt=1, fence=fence),
    )


def bench(hosts: str, tmp: str, steps: int, rounds: int) -> list[Result]:
    config = file_config(hosts, tmp)
    with Cluster.open(config) as cluster:
        kazoo = cluster.zk.kazoo
        contexts = {kind: attempt_context(cluster, f"bench-{kind}") for kind in ("1", "100", "0")}
        stagings = {}
        for kind, ctx in contexts.items():
            assert ctx.outputs is not None
            stagings[kind] = ctx.outputs.stage("days")
        step = {"n": 0}
        sizes: dict[str, int] = {}

        def parts(kind: str, count: int) -> list[str]:
            step["n"] += 1
            base = Path(stagings[kind].removeprefix("file://")) / f"step={step['n']}"
            base.mkdir(parents=True)
            for i in range(count):
                (base / f"part-{i:03d}.json").write_text("{}\n")
            if count == 1:
                return [f"{stagings[kind]}/step={step['n']}"]
            return [f"{stagings[kind]}/step={step['n']}/part-{i:03d}.json" for i in range(count)]

        def plain() -> None:
            for i in range(steps):
                contexts["0"].checkpoint({"step": i})

        def commit(kind: str, count: int) -> float:
            batches = [parts(kind, count) for _ in range(steps)]  # written before the clock
            ctx = contexts[kind]

            def run() -> None:
                for i, batch in enumerate(batches):
                    ctx.checkpoint({"step": i}, commit={"days": batch})

            return timed(run)

        raw_root = f"{config.base_path}/raw"
        kazoo.ensure_path(raw_root)
        guard = f"{raw_root}/guard"
        kazoo.create(guard, b"{}")

        def raw(commit_bytes: int) -> float:
            handle, record = b"h" * 600, b"c" * commit_bytes

            def run() -> None:
                for _ in range(steps):
                    node = f"{raw_root}/{uuid.uuid4().hex}"
                    transaction = kazoo.transaction()
                    transaction.check(guard, 0)
                    transaction.check(guard, 0)
                    transaction.create(node, handle)
                    transaction.create(f"{node}/locks", b"")
                    transaction.create(f"{node}/locks/me", b"", ephemeral=True)
                    transaction.create(f"{node}/commit", record)
                    results = transaction.commit()
                    assert not any(isinstance(r, Exception) for r in results), results

            return timed(run)

        sizes["1"] = len(b'{"attempt":1,"commit":1,"committed":"","output":"days","parts":[]}') + 20
        sizes["100"] = sizes["1"] + 100 * 45
        timings: dict[str, list[float]] = {k: [] for k in ("plain", "1", "100", "raw1", "raw100")}
        for _ in range(rounds):  # interleaved: a noisy moment hits every kind alike
            timings["plain"].append(timed(plain))
            timings["1"].append(commit("1", 1))
            timings["100"].append(commit("100", 100))
            timings["raw1"].append(raw(sizes["1"]))
            timings["raw100"].append(raw(sizes["100"]))
        per = {k: statistics.median(v) / steps * 1e3 for k, v in timings.items()}
        detail = f"{steps} steps x {rounds} interleaved rounds, local storage"
        return [
            Result(
                "checkpoint committing 1 part vs a plain checkpoint",
                per["1"],
                per["plain"],
                "<= 1.5",
                unit="ms/op",
                detail=detail,
            ),
            Result(
                "checkpoint committing 100 parts vs a plain checkpoint",
                per["100"],
                per["plain"],
                "<= 3.0",
                unit="ms/op",
                detail=detail,
            ),
            Result(
                "checkpoint committing 1 part vs raw kazoo transaction of its size",
                per["1"],
                per["raw1"],
                "<= 10",
                unit="ms/op",
                detail=detail,
            ),
            Result(
                "checkpoint committing 100 parts vs raw kazoo transaction of its size",
                per["100"],
                per["raw100"],
                "<= 20",
                unit="ms/op",
                detail=detail,
            ),
        ]


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with zookeeper() as hosts, tempfile.TemporaryDirectory() as tmp:
        results = bench(hosts, tmp, args.steps, args.rounds)
    for result in results:
        result.show()
    return results


if __name__ == "__main__":
    main()
