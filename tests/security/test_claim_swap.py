"""The probe of issue 54 item 5 with real daemons and drivers, each driver with its job's own
ZooKeeper identity: a job whose code swaps a SUCCEEDED job's claim for its own, records an
artifact at that place and ends, gets nothing of the victim's kept output deleted, and the
leader says why. Before, the drivers' shared identity could delete any claim: the swap
succeeded and the leader's cleanup of the attacker deleted the victim's output."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import claim_jobs
from tests.helpers import hands_client, wait_for
from zkstore.config import StoreConfig
from zkstore.records.job_states import SUCCEEDED

pytestmark = pytest.mark.e2e


@pytest.fixture
def extra_root(tmp_path: Path) -> Path:
    root = tmp_path / "extra"
    root.mkdir()
    return root


@pytest.fixture
def local(secure: StoreConfig, tmp_path: Path, extra_root: Path) -> Iterator[LocalCluster]:
    config = secure.with_changes(session_timeout=4.0, artifact_roots=(f"file://{extra_root}",))
    cluster = LocalCluster(config, tmp_path / "rt")
    yield cluster
    cluster.stop()


def test_a_job_that_swaps_another_jobs_claim_deletes_none_of_its_output(
    secure: StoreConfig, local: LocalCluster, extra_root: Path, tmp_path: Path
) -> None:
    local.start_daemon("d1")
    local.wait_for_leader()
    place = f"file://{extra_root}/reports/daily"
    kept = extra_root / "reports" / "daily" / "part-0"
    found = tmp_path / "found.json"
    config = secure.with_changes(artifact_roots=local.config.artifact_roots)
    with hands_client(config) as client:
        victim = client.submit_function(claim_jobs.keep_output, place, job_id="victim")
        assert client.wait(victim, timeout=120).outcome == SUCCEEDED
        assert kept.read_text() == "the victim's kept output"
        thief = client.submit_function(claim_jobs.swap_claim, place, str(found), job_id="thief")
        assert client.wait(thief, timeout=120).outcome == SUCCEEDED
        steps = json.loads(found.read_text())
        assert steps["delete the claim"] == "denied", steps
        wait_for(
            lambda: "artifact stolen of thief not released" in local.daemons["d1"].log(),
            timeout=60,
            what="the leader's cleanup of the thief, saying why it deleted nothing",
        )
    assert kept.read_text() == "the victim's kept output", "the victim's output is intact"
    log = local.daemons["d1"].log()
    line = next(x for x in log.splitlines() if "artifact stolen of thief not released" in x)
    assert "claimed by artifact 'out' of job victim" in line, line
