"""Jobs on real Spark in local mode through the daemon (standalone: test_standalone.py)."""

from __future__ import annotations

import collections
import json
import os
import re
import signal
from pathlib import Path

import pytest

from examples import pipeline
from tests import jobs
from tests.helpers import REPO, hands_client, run_daemon, written_json
from zkstore.config import StoreConfig
from zkstore.jobs.outputs.manifest import read_paths
from zkstore.records.job_states import SUCCEEDED

pytestmark = [pytest.mark.e2e, pytest.mark.spark]


def test_pipeline_on_local_spark_matches_expected_output(
    spark_config: StoreConfig, tmp_path: Path
) -> None:
    pipeline.generate(str(tmp_path / "in"), days=2, rows_per_day=200)
    # The pipeline registers its outputs as artifacts: the daemon must allow them there.
    spark_config = spark_config.with_changes(artifact_roots=(f"file://{tmp_path}/out",))
    local = run_daemon(spark_config, tmp_path / "runtime")
    try:
        with hands_client(spark_config) as client:
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
    days = tmp_path / "out" / "days"
    assert sorted(p.name for p in days.iterdir()) == ["_manifests", "attempt-1"]
    assert sorted(p.name for p in (days / "attempt-1").iterdir()) == ["day=01", "day=02"]
    assert read_paths(f"file://{days}") == [f"file://{days}/attempt-1/day={d:02d}" for d in (1, 2)]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["days", "summary.json"]


def test_unmodified_script_gets_the_daemons_master(
    spark_config: StoreConfig, tmp_path: Path
) -> None:
    text = "the quick brown fox\njumps over the lazy dog\nThe end, the END.\n"
    (tmp_path / "in.txt").write_text(text)
    local = run_daemon(spark_config, tmp_path / "runtime", master="local[1]")
    try:
        with hands_client(spark_config) as client:
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


def test_a_killed_drivers_spark_scratch_goes_with_its_attempt(
    spark_config: StoreConfig, tmp_path: Path
) -> None:
    """Spark keeps its temporary files, the block manager's (shuffle, spills, cached blocks)
    and the native libraries it unpacks under the driver JVM's ``java.io.tmpdir``: beside the
    attempt's directory, and removed with it by its daemon when the driver is killed (a
    SIGKILLed JVM removes nothing; in /tmp they stayed for ever)."""
    out = tmp_path / "out"
    local = run_daemon(spark_config, tmp_path / "runtime")
    try:
        with hands_client(spark_config) as client:
            job_id = client.submit_function(jobs.spark_scratch, str(out), job_id="scratchy")
            scratch = written_json(out / "scratch", timeout=300, what="Spark up in attempt 1")
            tmpdir = Path(scratch["tmpdir"])
            assert tmpdir.name == "scratchy-attempt-1.spark", tmpdir
            assert tmpdir.is_relative_to(tmp_path / "runtime"), tmpdir
            prefixes = {name.split("-")[0] for name in scratch["names"]}
            assert {"blockmgr", "spark"} <= prefixes, scratch["names"]
            os.killpg(scratch["pid"], signal.SIGKILL)  # the driver and its JVM, no cleanup
            result = client.wait(job_id, timeout=300)
            assert result.outcome == SUCCEEDED and result.attempts == 2, result
    finally:
        local.stop()
    assert not tmpdir.exists(), "the killed attempt's scratch goes with its directory"
    assert not tmpdir.with_suffix("").exists()
