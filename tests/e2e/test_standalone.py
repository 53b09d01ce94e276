"""Jobs on a real Spark standalone master and worker (one per test process, started on first use:
every test that needs one is in this file, so one test process starts it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import jobs, resource_jobs
from tests.helpers import hands_client, run_daemon, wait_for
from tests.resource_jobs import all_closed, check_sharing, check_tagged_logs, marks
from tests.servers import Standalone
from zkstore.config import StoreConfig
from zkstore.jobs.states import SUCCEEDED

pytestmark = pytest.mark.spark


def test_job_runs_on_a_standalone_master_and_worker(
    spark_config: StoreConfig, tmp_path: Path, standalone: Standalone
) -> None:
    local = run_daemon(spark_config, tmp_path / "runtime", master=standalone.url)
    try:
        with hands_client(spark_config) as client:
            job_id = client.submit_function(
                jobs.spark_squares,
                str(tmp_path / "out"),
                1000,
                job_id="squares",
                conf={"spark.executor.memory": "512m", "spark.cores.max": "1"},
            )
            result = client.wait(job_id, timeout=300)
            assert result.outcome == SUCCEEDED, result.error
    finally:
        local.stop()
    marks = jobs.read_marks(str(tmp_path / "out"))
    assert marks["result"]["total"] == sum(i * i for i in range(1000))
    assert marks["result"]["master"] == standalone.url
    completed = (standalone.status() or {}).get("completedapps", [])
    assert any("zkstore squares #1" in app["name"] for app in completed), completed


def test_standalone_worker_shares_and_closes(
    spark_config: StoreConfig,
    tmp_path: Path,
    standalone: Standalone,
) -> None:
    out = tmp_path / "out"
    local = run_daemon(spark_config, tmp_path / "runtime", master=standalone.url)
    try:
        with hands_client(spark_config) as client:
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
