"""Executor-side resources on real Spark: local mode through ``zkstore submit`` and the daemon,
without worker reuse, on a standalone master and worker, and in this process's own SparkSession
for failing opens and attempts.

Every job is :func:`tests.resource_jobs.three_stages` (or a part of it): three Python stages over
eight partitions, each task using one resource that leaves a file per open and per close.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples import shared_resource
from recovery.client import Client
from recovery.context import DynamicConfig, JobContext
from recovery.dev.localcluster import LocalCluster
from recovery.resources import JobResources
from tests import resource_jobs
from tests.helpers import wait_for
from tests.test_spark import Standalone, run_daemon, spark_config, standalone  # noqa: F401
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.records import JobStatus
from zkstore.jobs.resources import ResourceReports
from zkstore.jobs.states import SUCCEEDED
from zkstore.ops import Fence

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
JOB_FILE = REPO / "tests" / "resource_jobs.py"


def zkstore(config: StoreConfig, *words: str) -> subprocess.CompletedProcess[str]:
    """The installed console script, with the test's connection options after the command."""
    connection = ["--zk", config.zk_hosts, "--root", config.root, "--storage", config.storage_url]
    command = [str(BIN / "zkstore"), *words[:2], *connection, *words[2:]]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def marks(out: Path) -> dict[str, dict[str, Any]]:
    return {
        p.name: json.loads(p.read_text())
        for p in out.iterdir()
        if p.name[0] != "." and p.suffix != ".log"
    }


def lifecycle(out: Path) -> dict[str, Any]:
    """What the files say: opens and closes by instance, tasks by (stage, partition)."""
    found = marks(out)
    return {
        "opens": {n.split("-", 1)[1]: m for n, m in found.items() if n.startswith("open-")},
        "closes": {n.split("-", 1)[1]: m for n, m in found.items() if n.startswith("close-")},
        "double": [n for n in found if n.startswith("double-close-")],
        "tasks": {n: m for n, m in found.items() if n.startswith("task-")},
    }


def all_closed(out: Path) -> bool:
    state = lifecycle(out)
    return bool(state["opens"]) and set(state["closes"]) == set(state["opens"])


def check_sharing(out: Path, *, reused: bool, tasks: int = 24) -> dict[str, Any]:
    """The invariants of a finished three-stage run; returns the lifecycle for more checks."""
    state = lifecycle(out)
    ran = state["tasks"]
    assert len(ran) == tasks, sorted(ran)
    pids = {t["pid"] for t in ran.values()}
    assert len(state["opens"]) == len(pids), "one open per Python worker that ran tasks"
    assert {o["pid"] for o in state["opens"].values()} == pids
    instances_by_pid: dict[int, set[str]] = defaultdict(set)
    stages_by_pid: dict[int, set[int]] = defaultdict(set)
    for task in ran.values():
        instances_by_pid[task["pid"]].add(task["instance"])
        stages_by_pid[task["pid"]].add(task["stage"])
    assert all(len(ids) == 1 for ids in instances_by_pid.values()), "one instance per process"
    if reused:
        assert len(pids) < tasks
        assert any(len(stages) > 1 for stages in stages_by_pid.values()), "shared across stages"
    else:
        assert len(pids) == tasks, "a fresh worker per task"
    assert set(state["closes"]) == set(state["opens"]) and not state["double"]
    for ident, close in state["closes"].items():
        assert close["pid"] == state["opens"][ident]["pid"], "closed by the process that opened"
    return state


def check_tagged_logs(out: Path, job_id: str) -> None:
    lines = [
        line
        for log in out.glob("worker-*.log")
        for line in log.read_text().splitlines()
        if "done" in line
    ]
    assert len(lines) == 24, lines
    tags = {tuple(line.split("|")[:4]) for line in lines}
    stages = {stage for _, _, stage, _ in tags}
    assert {(job, attempt) for job, attempt, _, _ in tags} == {(job_id, "1")}
    assert len(stages) == 3 and "-" not in stages
    assert {partition for _, _, _, partition in tags} == {str(p) for p in range(8)}
    entered = [n for n in marks(out) if n.startswith("enter-")]
    assert len(entered) == 24 and len([n for n in marks(out) if n.startswith("exit-")]) == 24


@pytest.fixture
def local(
    spark_config: StoreConfig,  # noqa: F811
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[LocalCluster]:
    cluster = run_daemon(spark_config, tmp_path / "runtime")
    yield cluster
    cluster.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for log in sorted((tmp_path / "runtime" / "drivers").rglob("*.log")):
            print(f"----- {log} -----\n{log.read_text()[-8000:]}")


def test_submitted_job_shares_one_instance_per_worker_and_closes_each(
    spark_config: StoreConfig,  # noqa: F811
    local: LocalCluster,
    tmp_path: Path,
) -> None:
    """Through the installed ``zkstore submit``, the daemon and a driver; ``jobs show`` sees
    the counts of the running attempt."""
    out = tmp_path / "out"
    submitted = zkstore(
        spark_config,
        "submit",
        f"{JOB_FILE}:three_stages",
        "--job-id",
        "shared",
        "--",
        str(out),
        "yes",
    )
    assert submitted.returncode == 0, submitted.stderr

    def counts() -> dict[str, Any] | None:
        shown = zkstore(spark_config, "jobs", "show", "shared", "--format", "json")
        assert shown.returncode == 0, shown.stderr
        item = json.loads(shown.stdout)
        assert item["state"] in ("SUBMITTED", "PENDING", "STARTING", "RUNNING"), item
        resources = item["resources"]
        db = (resources or {}).get("counts", {}).get("db", {})
        return resources if db.get("uses") == 24 else None

    shown = wait_for(counts, timeout=240, interval=1.0, what="counts of the running attempt")
    pids = {t["pid"] for t in lifecycle(out)["tasks"].values()}
    assert shown["attempt"] == 1 and not shown["final"]
    assert shown["counts"]["db"]["opens"] == len(pids)
    assert shown["counts"]["db"]["failed_opens"] == 0
    table = zkstore(spark_config, "jobs", "show", "shared")
    assert f"resource db: {len(pids)} opens" in table.stdout
    # While the job holds, idle workers close their instance after its idle timeout (20 s),
    # before Spark would drop them. (The stop path is what the other tests here end on.)
    wait_for(lambda: all_closed(out), timeout=120, what="every open closed once idle")
    assert zkstore(spark_config, "control", "set", "shared", "go=true").returncode == 0
    with Client(spark_config) as client:
        result = client.wait("shared", timeout=240)
    assert result.outcome == SUCCEEDED, result.error
    assert all_closed(out)
    check_sharing(out, reused=True)
    check_tagged_logs(out, "shared")
    reported = marks(out)["result"]
    assert reported["count"] == 64 and reported["counts"]["uses"] == 24


def test_without_worker_reuse_every_task_opens_and_closes(
    spark_config: StoreConfig,  # noqa: F811
    local: LocalCluster,
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    with Client(spark_config) as client:
        client.submit_function(
            resource_jobs.three_stages,
            str(out),
            "no",
            4,
            job_id="unshared",
            conf={"spark.python.worker.reuse": "false"},
        )
        result = client.wait("unshared", timeout=300)
    assert result.outcome == SUCCEEDED, result.error
    wait_for(lambda: all_closed(out), timeout=90, what="every open closed")
    check_sharing(out, reused=False, tasks=12)
    reported = marks(out)["result"]["counts"]
    assert reported == {"opens": 12, "closes": 12, "failed_opens": 0, "uses": 12}, (
        "closed inside each task scope, so each close is reported with its task"
    )


def test_standalone_worker_shares_and_closes(
    spark_config: StoreConfig,  # noqa: F811
    tmp_path: Path,
    standalone: Standalone,  # noqa: F811
) -> None:
    out = tmp_path / "out"
    local = run_daemon(spark_config, tmp_path / "runtime", master=standalone.url)
    try:
        with Client(spark_config) as client:
            client.submit_function(
                resource_jobs.three_stages,
                str(out),
                "no",
                8,
                3.0,
                job_id="standalone",
                conf={"spark.executor.memory": "512m", "spark.cores.max": "1"},
            )
            result = client.wait("standalone", timeout=300)
        assert result.outcome == SUCCEEDED, result.error
        wait_for(lambda: all_closed(out), timeout=120, what="every open closed")
    finally:
        local.stop()
    check_sharing(out, reused=True)
    check_tagged_logs(out, "standalone")
    assert marks(out)["result"]["app"].startswith("three_stages [zkstore standalone #1]")


# -- in this process's own SparkSession ----------------------------------------------------------


@pytest.fixture(scope="module")
def spark_context() -> Iterator[Any]:
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    previous = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    for module in (resource_jobs, shared_resource):  # the workers need not import them
        cloudpickle.register_pickle_by_value(module)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("resources")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield session.sparkContext
    session.stop()
    for module in (resource_jobs, shared_resource):
        cloudpickle.unregister_pickle_by_value(module)
    if previous is None:
        os.environ.pop("PYSPARK_PYTHON", None)
    else:
        os.environ["PYSPARK_PYTHON"] = previous


def retrying(ref: Any, out: str) -> Any:
    """A partition function that catches a failed open and tries once more."""

    def run(rows: Iterator[int]) -> Iterator[str]:
        try:
            ref.get()
        except ConnectionRefusedError:
            resource_jobs.record(out, f"caught-{os.getpid()}")
        yield ref.get().ident

    return run


def test_failing_open_fails_the_task_with_its_message_and_is_retried(
    spark_context: Any, tmp_path: Path
) -> None:
    out = str(tmp_path / "out")
    resources = JobResources("flaky", 1, lambda: spark_context)
    ref = resources.declare("db", functools.partial(resource_jobs.open_flaky, out, 2))
    rows = spark_context.parallelize(range(4), 1)
    with pytest.raises(Exception, match=r"db\.example:5432 refused the connection") as failure:
        rows.mapPartitions(resource_jobs.use(ref, out, 1)).collect()
    assert "while opening resource 'db' of flaky attempt 1" in str(failure.value)
    assert lifecycle(Path(out))["opens"] == {}, "nothing was opened, nothing will be closed"
    (ident,) = rows.mapPartitions(retrying(ref, out)).collect()
    found = sorted(marks(Path(out)).items(), key=lambda item: item[1]["time"])
    failed = [m["pid"] for n, m in found if n.startswith("failed-open-")]
    caught = [m["pid"] for n, m in found if n.startswith("caught-")]
    assert len(failed) == 2 and caught == [failed[1]], "the second failure was in the same task"
    assert lifecycle(Path(out))["opens"][ident]["pid"] == failed[1], "the next use opened"
    assert ref.counts() == {"opens": 1, "closes": 0, "failed_opens": 1, "uses": 1}, (
        "the failed task reported nothing; the one that caught its failure reported it"
    )


def test_a_reference_of_another_attempt_never_reuses_the_old_instance(
    spark_context: Any, tmp_path: Path
) -> None:
    out = str(tmp_path / "out")
    opener = functools.partial(resource_jobs.open_tracked, out)
    first = JobResources("attempts", 1, lambda: spark_context).declare(
        "db", opener, resource_jobs.close_tracked
    )
    second = JobResources("attempts", 2, lambda: spark_context).declare(
        "db", opener, resource_jobs.close_tracked
    )
    rows = spark_context.parallelize(range(8), 8)
    rows.mapPartitions(resource_jobs.use(first, out, 1)).count()
    before = lifecycle(Path(out))
    rows.mapPartitions(resource_jobs.use(second, out, 2)).count()
    after = lifecycle(Path(out))
    old = {t["instance"] for n, t in after["tasks"].items() if n.startswith("task-1-")}
    new = {t["instance"] for n, t in after["tasks"].items() if n.startswith("task-2-")}
    assert old and new and not old & new, "attempt 2 opened its own instances"
    assert set(before["opens"]) == old
    second_pids = {t["pid"] for n, t in after["tasks"].items() if n.startswith("task-2-")}
    superseded = {i for i in old if before["opens"][i]["pid"] in second_pids}
    assert superseded <= set(after["closes"]), "attempt 1's instance closed where 2 opened"
    assert second.counts()["opens"] == len(new)


def test_example_pipeline_prices_orders_with_one_connection_per_worker(
    spark_context: Any, cluster: Cluster, tmp_path: Path
) -> None:
    """``examples/shared_resource.py`` with a real job context (this process's SparkSession)."""
    shared_resource.generate(str(tmp_path / "in"), orders=400)
    status = cluster.state.put_status(
        "example", JobStatus(version=None, attempt=1), expected_version=None
    )
    context = JobContext(
        job_id="example",
        name="example",
        attempt=1,
        spark_master="local[2]",
        spark_conf={},
        checkpoints=cluster.checkpoints("example"),
        fence=Fence.check(cluster.layout.status("example"), status.version),
        config=DynamicConfig(dict),
        cancelled=threading.Event(),
        resource_reports=ResourceReports(cluster.zk, cluster.layout, "example"),
    )
    shared_resource.run(context, str(tmp_path / "in"), str(tmp_path / "out"))
    context.close()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["totals"] == shared_resource.expected(str(tmp_path / "in"))
    report = ResourceReports(cluster.zk, cluster.layout, "example").read()
    assert report is not None and report.final
    counts = report.resources["catalog"]
    assert counts == summary["catalog"]
    assert 1 <= counts["opens"] <= 2 < counts["uses"], "local[2]: at most two workers"


def test_python_udfs_share_the_instance_of_their_worker(spark_context: Any, tmp_path: Path) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    out = str(tmp_path / "out")
    ref = JobResources("udf", 1, lambda: spark_context).declare(
        "db", functools.partial(resource_jobs.open_tracked, out), resource_jobs.close_tracked
    )

    @udf(returnType="string", useArrow=False)
    def who(value: int) -> str:
        return f"{os.getpid()}:{ref.get().ident}"

    spark = SparkSession(spark_context)
    rows = spark.range(0, 200, 1, 4).select(who("id").alias("who")).collect()
    pairs = {tuple(row["who"].split(":")) for row in rows}
    pids = {pid for pid, _ in pairs}
    assert len(pairs) == len(pids), "one instance per worker, whatever the row"
    assert {ident for _, ident in pairs} == set(lifecycle(Path(out))["opens"])
    counts = ref.counts()
    assert counts["opens"] == len(pids) and counts["uses"] == 4, counts
