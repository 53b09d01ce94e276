"""Executor-side resources in this process's own SparkSession: failing opens, attempts, UDFs, the
example pipeline."""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples import shared_resource
from recovery.driver.context import DynamicConfig, JobContext
from recovery.driver.resource_declaring import JobResources
from tests import resource_jobs
from tests.resource_jobs import lifecycle, marks
from zkstore.cluster import Cluster
from zkstore.jobs.resources import ResourceReports
from zkstore.records.job_records import JobStatus
from zkstore.zookeeper.ops import Fence

pytestmark = [pytest.mark.integration, pytest.mark.spark]


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
