"""Jobs on real Spark in local mode through the daemon (standalone: test_standalone.py)."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import pytest

from examples import pipeline
from tests.helpers import REPO, hands_client, run_daemon
from zkstore.config import StoreConfig
from zkstore.jobs.states import SUCCEEDED

pytestmark = pytest.mark.spark


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
    assert sorted(p.name for p in (tmp_path / "out" / "days").iterdir() if p.is_dir()) == [
        "day=01",
        "day=02",
    ]
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
