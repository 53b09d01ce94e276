"""Exactly-once outputs end to end (invariant 18): real daemons and drivers, real signals, the
installed ``zkstore`` script; the same tests on local disk and on S3 (a moto server).

The job (``tests/output_jobs.py:days``) writes one part per day under its attempt's staging
place and commits it with the day's checkpoint. A driver SIGSTOPped (with its daemon: a frozen
host) between writing a part and committing it, resumed once the next attempt committed that
day, commits nothing; a driver SIGKILLed between a commit and its next step leaves that day
committed once. Either way the manifest holds exactly one part per day, the frozen attempt's
staging is gone, and what a reader gets (Spark in the job on local disk, the manifest file
with fsspec alone, ``zkstore outputs``) is every day's rows once.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import json_of, run, script_json
from tests.helpers import SESSION_TIMEOUT, alive, hands_client, wait_for, written_json
from tests.output_checks import DAYS, check_committed_once, staged, submit
from tests.servers import S3Server
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.records.job_states import SUCCEEDED

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["file", "s3"])
def storage_config(request: pytest.FixtureRequest, runtime_config: StoreConfig) -> StoreConfig:
    if request.param == "file":
        return runtime_config
    s3: S3Server = request.getfixturevalue("s3_server")
    return runtime_config.with_changes(
        storage_url=f"s3://{s3.new_bucket()}/zkstore", storage_options=s3.options()
    )


@pytest.fixture
def fleet(storage_config: StoreConfig, tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(storage_config, tmp_path / "runtime", restart_backoff=0.2, http=True)
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_frozen_driver_resumed_after_the_next_attempt_committed_its_step_commits_nothing(
    fleet: LocalCluster, storage_config: StoreConfig, tmp_path: Path
) -> None:
    config, out = storage_config, tmp_path / "out"
    fleet.start_daemon("d1")
    fleet.start_daemon("d2")
    fleet.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
    submit(config, out, hold_before=2, hold_after=0)
    frozen = written_json(out / "staged-2-attempt-1", timeout=120, what="day 2 staged")["pid"]
    with Cluster.open(config) as cluster:
        status = cluster.state.status("days")
        assert status is not None and status.daemon_id is not None
        host = status.daemon_id
        place = cluster.outputs("days").manifest("days").uri
    # The driver between writing day 2's part and committing it; its host freezes with it.
    fleet.daemons[host].signal(signal.SIGSTOP)
    os.kill(frozen, signal.SIGSTOP)
    try:
        wait_for(
            (out / "committed-2-attempt-2").exists, timeout=180, what="attempt 2 commits day 2"
        )
        # ZooKeeper says so while the job runs: day 2 is attempt 2's, attempt 1's part is gone
        shown = run(config, "outputs", "show", "days", "days", "--format", "json")
        assert shown.returncode == 0, shown.stderr
        now = json.loads(shown.stdout)
        assert now["from"] == "zookeeper"
        assert [p for c in now["commits"] for p in c["parts"]][:2] == [
            "attempt-1/day=1",
            "attempt-2/day=2",
        ]
        assert "attempt-1/day=2/rows.json" not in staged(config, place)
    finally:
        (out / "go-commit-2").write_text("")
        os.kill(frozen, signal.SIGCONT)
        fleet.daemons[host].signal(signal.SIGCONT)
    with hands_client(config) as client:
        result = client.wait("days", timeout=180)
    assert (result.outcome, result.attempts) == (SUCCEEDED, 2), result.error
    wait_for(lambda: not alive(frozen), timeout=60, what="the frozen driver gone")
    refused = out / "refused-2-attempt-1"
    if refused.exists():  # its commit ran before its lease thread stopped it: refused
        assert "attempt 1" in json.loads(refused.read_text())["error"]
    assert not (out / "committed-2-attempt-1").exists(), "the frozen attempt committed nothing"
    wait_for(
        lambda: json_of(config, "outputs list", "days")[0]["from"] == "manifest",
        timeout=60,
        what="the job's cleanup",
    )
    check_committed_once(
        config, out, ["attempt-1/day=1", *(f"attempt-2/day={d}" for d in range(2, DAYS + 1))]
    )


def test_a_driver_killed_between_a_commit_and_its_next_step_leaves_that_step_committed_once(
    fleet: LocalCluster, storage_config: StoreConfig, tmp_path: Path
) -> None:
    config, out = storage_config, tmp_path / "out"
    fleet.start_daemon("d1")
    submit(config, out, hold_before=0, hold_after=2)
    killed = written_json(out / "committed-2-attempt-1", timeout=120, what="day 2 committed")
    paths = script_json(config, "outputs paths", "days", "days")
    assert [p.rsplit("/", 2)[-2:] for p in paths] == [
        ["attempt-1", "day=1"],
        ["attempt-1", "day=2"],
    ]
    os.kill(killed["pid"], signal.SIGKILL)
    with hands_client(config) as client:
        result = client.wait("days", timeout=180)
    assert (result.outcome, result.attempts) == (SUCCEEDED, 2), result.error
    start = json.loads((out / "start-attempt-2").read_text())
    assert start["resumed_from"] == 2, "attempt 2 resumed after the committed day 2"
    wait_for(
        lambda: json_of(config, "outputs list", "days")[0]["from"] == "manifest",
        timeout=60,
        what="the job's cleanup",
    )
    check_committed_once(
        config,
        out,
        ["attempt-1/day=1", "attempt-1/day=2", *(f"attempt-2/day={d}" for d in (3, 4))],
    )
    # the HTTP API answers as the command line does
    url = fleet.daemons["d1"].url
    assert url is not None
    with urllib.request.urlopen(f"{url}/api/v1/jobs/days/outputs/days", timeout=30) as answer:
        assert json.loads(answer.read()) == script_json(config, "outputs show", "days", "days")
    with urllib.request.urlopen(f"{url}/api/v1/jobs/days/outputs", timeout=30) as answer:
        assert json.loads(answer.read()) == script_json(config, "outputs list", "days")
    with urllib.request.urlopen(f"{url}/jobs/days", timeout=30) as answer:
        html = answer.read().decode()
    assert "Outputs (committed parts only)" in html
    assert "<a href='/api/v1/jobs/days/outputs/days'>days</a></td><td>4</td><td>4</td>" in html
