"""Commit latency of outputs (issue 55): a checkpoint that commits 1 and 100 parts, against a
plain checkpoint and against raw kazoo's transaction of the same ops and bytes, same run.

The job's side as a driver runs it (``JobContext.checkpoint(state, commit=...)``, fenced on a
stand-in attempt: its status and ``running`` node), on local storage (``--storage s3``: a moto
S3 server) and the embedded ZooKeeper: a commit adds to a plain checkpoint one node in the same
transaction, a look at storage for its parts (each must hold data) and the manifest file
written after it (the commits of its block read back). The raw baseline is one kazoo
transaction with the same checks and creates (the fence's two checks, the handle, its
``locks`` and lock, the commit's node, the same bytes), no storage.

Paired runs (:func:`benchmarks.common.paired`): each run of ``--steps`` commits is timed right
before its baseline's run, so both meet the same moment's load; the ratio is judged per run.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import uuid

from benchmarks.common import Result, file_config, paired, s3_server, timed, zookeeper
from recovery.driver.applied_config import DynamicConfig
from recovery.driver.artifact_registry import JobArtifacts
from recovery.driver.context import JobContext
from recovery.driver.output_staging import JobOutputs
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.records.job_records import JobStatus, RunningInfo
from zkstore.records.job_states import STARTING
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.ops import Fence


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


def bench(config: StoreConfig, steps: int, rounds: int) -> list[Result]:
    with Cluster.open(config) as cluster:
        kazoo = cluster.zk.kazoo
        contexts = {kind: attempt_context(cluster, f"bench-{kind}") for kind in ("1", "100", "0")}
        stagings = {}
        for kind, ctx in contexts.items():
            assert ctx.outputs is not None
            stagings[kind] = ctx.outputs.stage("days")
        step = {"n": 0}

        def parts(kind: str, count: int) -> list[str]:
            step["n"] += 1
            outputs = contexts[kind].outputs
            assert outputs is not None
            base = f"{stagings[kind]}/step={step['n']}"
            for i in range(count):
                with outputs.open(f"{base}/part-{i:03d}.json") as file:
                    file.write(b"{}\n")
            if count == 1:
                return [base]
            return [f"{base}/part-{i:03d}.json" for i in range(count)]

        def plain() -> float:
            def run() -> None:
                for i in range(steps):
                    contexts["0"].checkpoint({"step": i})

            return timed(run) / steps * 1e3

        def commit(kind: str, count: int) -> float:
            batches = [parts(kind, count) for _ in range(steps)]  # written before the clock
            ctx = contexts[kind]

            def run() -> None:
                for i, batch in enumerate(batches):
                    ctx.checkpoint({"step": i}, commit={"days": batch})

            return timed(run) / steps * 1e3

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

            return timed(run) / steps * 1e3

        one = len(b'{"attempt":1,"commit":1,"committed":"","output":"days","parts":[]}') + 20
        hundred = one + 100 * 45
        where = "S3 (moto)" if config.storage_url.startswith("s3://") else "local disk"
        detail = f"{steps} steps a run, {rounds} paired runs, {where}"
        pairs = {
            "1 part vs a plain checkpoint": (lambda: commit("1", 1), plain, "<= 1.5"),
            "100 parts vs a plain checkpoint": (lambda: commit("100", 100), plain, "<= 3.0"),
            "1 part vs raw kazoo's transaction of its size": (
                lambda: commit("1", 1),
                lambda: raw(one),
                "<= 10",
            ),
            "100 parts vs raw kazoo's transaction of its size": (
                lambda: commit("100", 100),
                lambda: raw(hundred),
                "<= 20",
            ),
        }
        results = []
        for name, (ours, baseline, goal) in pairs.items():
            mine, theirs = paired(rounds, ours, baseline)
            results.append(
                Result.of_runs(
                    f"checkpoint committing {name}",
                    mine,
                    theirs,
                    goal,
                    unit="ms/op",
                    detail=detail,
                )
            )
        return results


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--storage", choices=["file", "s3"], default="file")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        hosts = stack.enter_context(zookeeper())
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        config = file_config(hosts, tmp)
        if args.storage == "s3":
            s3 = stack.enter_context(s3_server())
            config = config.with_changes(
                storage_url=f"s3://{s3.bucket}/zkstore", storage_options=s3.options
            )
        results = bench(config, args.steps, args.rounds)
    for result in results:
        result.show()
    return results


if __name__ == "__main__":
    main()
