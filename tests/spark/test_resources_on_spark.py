"""Executor-side resources on real Spark: local mode through ``zkstore submit`` and the daemon,
without worker reuse, and in this process's own SparkSession for failing opens and attempts (on a
standalone master and worker: tests/spark/test_standalone.py).

Every job is :func:`tests.resource_jobs.three_stages` (or a part of it): three Python stages over
eight partitions, each task using one resource that leaves a file per open and per close.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import resource_jobs
from tests.cli import script
from tests.helpers import REPO, hands_client, run_daemon, wait_for
from tests.resource_jobs import all_closed, check_sharing, check_tagged_logs, lifecycle, marks
from zkstore.config import StoreConfig
from zkstore.records.job_states import SUCCEEDED

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

BIN = Path(sys.executable).parent
JOB_FILE = REPO / "tests" / "resource_jobs.py"


@pytest.fixture
def local(
    spark_config: StoreConfig,
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
    spark_config: StoreConfig,
    local: LocalCluster,
    tmp_path: Path,
) -> None:
    """Through the installed ``zkstore submit``, the daemon and a driver; ``jobs show`` sees
    the counts of the running attempt."""
    out = tmp_path / "out"
    submitted = script(
        spark_config,
        "submit",
        f"{JOB_FILE}:three_stages",
        "--job-id",
        "shared",
        "--",
        str(out),
        "yes",
        "8",
        "0",
        "8",  # an idle timeout of 8 s (the default 20 s): what the test waits for below
    )
    assert submitted.returncode == 0, submitted.stderr

    def counts() -> dict[str, Any] | None:
        shown = script(spark_config, "jobs show", "shared", "--format", "json")
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
    table = script(spark_config, "jobs show", "shared")
    assert f"resource db: {len(pids)} opens" in table.stdout
    # While the job holds, idle workers close their instance after its idle timeout (8 s here),
    # before Spark would drop them. (The stop path is what the other tests here end on.)
    wait_for(lambda: all_closed(out), timeout=120, what="every open closed once idle")
    assert script(spark_config, "control set", "shared", "go=true").returncode == 0
    with hands_client(spark_config) as client:
        result = client.wait("shared", timeout=240)
    assert result.outcome == SUCCEEDED, result.error
    assert all_closed(out)
    check_sharing(out, reused=True)
    check_tagged_logs(out, "shared")
    reported = marks(out)["result"]
    assert reported["count"] == 64 and reported["counts"]["uses"] == 24


def test_without_worker_reuse_every_task_opens_and_closes(
    spark_config: StoreConfig,
    local: LocalCluster,
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    with hands_client(spark_config) as client:
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


# -- in this process's own SparkSession ----------------------------------------------------------
