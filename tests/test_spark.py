"""Jobs on real Spark: local mode through the daemon, and a standalone master and worker."""

from __future__ import annotations

import collections
import json
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples import pipeline
from recovery.client import Client
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.helpers import wait_for
from zkstore.config import StoreConfig
from zkstore.dev.embedded import find_java, free_port
from zkstore.jobs.states import SUCCEEDED

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def spark_config(config: StoreConfig) -> StoreConfig:
    # Spark makes the machine busy: a longer session keeps ZooKeeper sessions stable meanwhile.
    return config.with_changes(session_timeout=10.0)


def run_daemon(config: StoreConfig, work: Path, master: str = "local[2]") -> LocalCluster:
    local = LocalCluster(config, work, spark_master=master, restart_backoff=0.5)
    local.start_daemon("d1")
    return local


def test_pipeline_on_local_spark_matches_expected_output(
    spark_config: StoreConfig, tmp_path: Path
) -> None:
    pipeline.generate(str(tmp_path / "in"), days=3, rows_per_day=300)
    # The pipeline registers its outputs as artifacts: the daemon must allow them there.
    spark_config = spark_config.with_changes(artifact_roots=(f"file://{tmp_path}/out",))
    local = run_daemon(spark_config, tmp_path / "runtime")
    try:
        with Client(spark_config) as client:
            job_id = client.submit_file(
                f"{REPO}/examples/pipeline.py:run",
                [str(tmp_path / "in"), str(tmp_path / "out")],
                job_id="pipeline",
            )
            result = client.wait(job_id, timeout=300)
            assert result.outcome == SUCCEEDED, result.error
    finally:
        local.stop()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary == pipeline.expected(str(tmp_path / "in"))
    assert sorted(p.name for p in (tmp_path / "out" / "days").iterdir() if p.is_dir()) == [
        "day=01",
        "day=02",
        "day=03",
    ]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["days", "summary.json"]


def test_unmodified_script_gets_the_daemons_master(
    spark_config: StoreConfig, tmp_path: Path
) -> None:
    text = "the quick brown fox\njumps over the lazy dog\nThe end, the END.\n"
    (tmp_path / "in.txt").write_text(text)
    local = run_daemon(spark_config, tmp_path / "runtime", master="local[1]")
    try:
        with Client(spark_config) as client:
            job_id = client.submit_file(
                f"{REPO}/examples/wordcount.py", [str(tmp_path / "in.txt"), str(tmp_path / "out")]
            )
            result = client.wait(job_id, timeout=300)
            assert result.outcome == SUCCEEDED, result.error
        driver_log = next((tmp_path / "runtime" / "drivers").rglob("attempt-1.log")).read_text()
    finally:
        local.stop()
    counted = {}
    for part in (tmp_path / "out").glob("part-*.json"):
        for line in part.read_text().splitlines():
            row = json.loads(line)
            counted[row["word"]] = row["count"]
    expected = collections.Counter(re.findall(r"[a-z]+", text.lower()))
    assert counted == dict(expected)
    assert f"{len(expected)} distinct words (Spark master local[1])" in driver_log


class Standalone:
    """A Spark standalone master and one worker, started from the pyspark wheel."""

    def __init__(self, work: Path) -> None:
        import pyspark

        self.home = Path(pyspark.__file__).parent
        self.work = work
        self.port, self.ui = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []

    def _start(self, name: str, *args: str) -> None:
        env = {
            "SPARK_HOME": str(self.home),
            "JAVA_HOME": str(Path(find_java()).resolve().parent.parent),
            "SPARK_LOG_DIR": str(self.work),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PATH": "/usr/bin:/bin",
        }
        log = open(self.work / f"{name}.log", "wb")  # noqa: SIM115 - lives as long as the process
        self.processes.append(
            subprocess.Popen(
                [str(self.home / "bin" / "spark-class"), *args], stdout=log, stderr=log, env=env
            )
        )

    def start(self) -> Standalone:
        self.work.mkdir(parents=True, exist_ok=True)
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui),
        )
        wait_for(lambda: self.status() is not None, timeout=90, what="Spark master")
        self._start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.url,
            "--host",
            "127.0.0.1",
            "--cores",
            "1",
            "--memory",
            "1g",
            "--webui-port",
            str(free_port()),
            "--work-dir",
            str(self.work / "worker"),
        )
        wait_for(lambda: (self.status() or {}).get("aliveworkers") == 1, timeout=90, what="worker")
        return self

    def status(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=2) as r:
                found: dict[str, Any] = json.load(r)
                return found
        except OSError:
            return None

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[Standalone]:
    cluster = Standalone(tmp_path / "spark")
    try:  # a master whose worker never came up is stopped too
        yield cluster.start()
    finally:
        cluster.stop()
    shutil.rmtree(tmp_path / "spark" / "worker", ignore_errors=True)


def test_job_runs_on_a_standalone_master_and_worker(
    spark_config: StoreConfig, tmp_path: Path, standalone: Standalone
) -> None:
    local = run_daemon(spark_config, tmp_path / "runtime", master=standalone.url)
    try:
        with Client(spark_config) as client:
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
