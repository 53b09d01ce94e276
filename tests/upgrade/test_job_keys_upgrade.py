"""A job submitted before job keys existed runs on from its checkpoint."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.helpers import BIN, KEY, hands_client, make_legacy
from zkstore.config import StoreConfig
from zkstore.records.job_states import SUCCEEDED

pytestmark = pytest.mark.e2e


def test_a_job_submitted_before_job_keys_runs_on_from_its_checkpoint(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """Definition and checkpoints signed with the cluster key (as before this change): the CLI
    verifies them, and the daemon re-signs them before the launch, so the driver, which holds
    the job's key only, resumes from the checkpoint."""
    config = runtime_config.with_changes(signing_key=KEY)
    out = tmp_path / "out"
    with hands_client(config) as client:
        client.submit_function(jobs.steps, str(out), 4, 0.0, job_id="old")
        cluster = client.cluster
        checkpoints = cluster.checkpoints("old")
        checkpoints.add({"step": 2})
        make_legacy(cluster, cluster.layout.job_handle("old"))
        make_legacy(cluster, f"{checkpoints.path}/{'1'.zfill(19)}")
        verify = subprocess.run(
            [str(BIN / "zkstore"), "handles", "verify"],
            env={
                "PATH": "/usr/bin:/bin",
                "ZKSTORE_ZK": config.zk_hosts,
                "ZKSTORE_ROOT": config.root,
                "ZKSTORE_STORAGE": config.storage_url,
                "ZKSTORE_SIGNING_KEY": KEY.decode(),
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
        local = LocalCluster(config, tmp_path / "rt", restart_backoff=0.2)
        try:
            daemon = local.start_daemon("d1")
            result = client.wait("old", timeout=120)
            assert result.outcome == SUCCEEDED and result.attempts == 1, result
            assert "2 handle(s) signed with the cluster key re-signed" in daemon.log()
        finally:
            local.stop()
    marks = jobs.read_marks(str(out))
    assert marks["start-attempt-1"]["step"] == 3, "resumed from the legacy checkpoint"
