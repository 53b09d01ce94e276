"""Jobs on a real Spark standalone master and worker (one per test process, started on first use:
every test that needs one is in this file, so one test process starts it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import jobs, resource_jobs, spark_jvm
from tests.helpers import hands_client, run_daemon, wait_for
from tests.resource_jobs import all_closed, check_sharing, check_tagged_logs, marks
from tests.servers import Standalone
from tests.warm_drivers import JOB, WARM, driver_log, ready, titled_warm, took
from zkstore.config import StoreConfig
from zkstore.records.job_states import SUCCEEDED

pytestmark = [pytest.mark.e2e, pytest.mark.spark]


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


def test_a_job_on_a_standalone_master_computes_in_a_warm_driver(
    spark_config: StoreConfig, tmp_path: Path, standalone: Standalone
) -> None:
    """A warm driver serves a standalone master (issue 47): the job's Spark JVM is the warm
    one ``ps`` named (warmed by a local throw-away context), with Spark's classes mapped from the
    archive, and its application ran on the master's worker."""
    local = LocalCluster(
        spark_config,
        tmp_path / "runtime",
        spark_master=standalone.url,
        warm_drivers=1,
        class_data=str(spark_jvm.HOME),
    )
    out = tmp_path / "out"
    try:
        daemon = local.start_daemon("d1")
        wait_for(lambda: ready(daemon), WARM, what="a warm driver")
        [warm_pid] = wait_for(lambda: titled_warm(local), WARM, what="ps names it")
        with hands_client(spark_config) as client:
            client.submit_function(
                jobs.jvm_report,
                str(out),
                job_id="standalone-warm",
                conf={"spark.executor.memory": "512m", "spark.cores.max": "1"},
            )
            result = client.wait("standalone-warm", timeout=JOB)
            assert result.outcome == SUCCEEDED, result.error
        assert (took(daemon, "standalone-warm") or ("", 0))[1] == warm_pid, daemon.log()[-3000:]
    finally:
        local.stop()
    report = jobs.read_marks(str(out))["jvm-1"]
    assert report["pid"] == warm_pid, "the warm JVM computed"
    assert str(spark_jvm.archive()) in report["archives"], report["archives"]
    assert report["master"] == standalone.url and report["total"] == sum(range(100))
    assert "Spark driver JVM: warm: warm driver" in driver_log(local, "standalone-warm")
    completed = (standalone.status() or {}).get("completedapps", [])
    assert any("zkstore standalone-warm #1" in app["name"] for app in completed), completed
