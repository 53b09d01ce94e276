"""Job keys: each job's payloads signed with a key derived from the cluster's, a driver given
its own job's key only, and payloads signed with the cluster key before job keys still read and
run (re-signed before the launch)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests import jobs
from tests.helpers import KEY, hands_client, make_legacy
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import UntrustedPayload
from zkstore.jobs.resign import resign_job
from zkstore.records.handle import Handle

pytestmark = pytest.mark.integration


def test_resign_rewrites_the_signature_of_legacy_handles_and_nothing_else(
    config: StoreConfig,
) -> None:
    signed = config.with_changes(signing_key=KEY)
    with Cluster.open(signed) as cluster, hands_client(signed) as client:
        client.submit_function(jobs.steps, "/nonexistent", 1, 0.0, job_id="old")
        client.submit_function(jobs.steps, "/nonexistent", 1, 0.0, job_id="new")
        checkpoints = cluster.checkpoints("old")
        checkpoints.add({"step": 1})
        checkpoints.add({"step": 2})
        nodes = [
            cluster.layout.job_handle("old"),
            *(f"{checkpoints.path}/{str(i).zfill(19)}" for i in (1, 2)),
        ]
        before = [make_legacy(cluster, node) for node in nodes]
        with (
            Cluster.open(signed.for_job("old")) as driver,
            pytest.raises(UntrustedPayload, match="signature does not match"),
        ):
            driver.jobs.recover("old", lock=False)  # what a driver met without the re-sign
        cluster.jobs.recover("old", lock=False)  # the daemon and the CLI still read it
        args = (cluster.zk, cluster.layout, cluster.storage, signed.cluster_id)
        assert resign_job(*args, "old") == 3
        assert resign_job(*args, "old") == 0, "idempotent"
        assert resign_job(*args, "new") == 0, "a job submitted with job keys: nothing to do"
        for node, old in zip(nodes, before, strict=True):
            data, stat = cluster.zk.get(node)
            now = Handle.from_znode(data, stat, node)
            assert now.hmac != old.hmac and replace(now, hmac=old.hmac) == old
        with Cluster.open(signed.for_job("old")) as driver:
            assert driver.jobs.recover("old", lock=False).state.job_id == "old"
            assert driver.checkpoints("old").latest().metadata == {"step": 2}  # type: ignore[union-attr]
        # Only the holder of the cluster key re-signs; a driver's cluster does nothing.
        make_legacy(cluster, nodes[0])
        with Cluster.open(signed.for_job("old")) as driver:
            assert resign_job(driver.zk, driver.layout, driver.storage, "default", "old") == 0
