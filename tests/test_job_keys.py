"""Job keys: each job's payloads signed with a key derived from the cluster's, a driver given
its own job's key only, and payloads signed with the cluster key before job keys still read and
run (re-signed before the launch)."""

from __future__ import annotations

import hashlib
import hmac
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from recovery.client import Client
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.helpers import BIN
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import ConfigError, UntrustedPayload
from zkstore.handle import Handle
from zkstore.jobs.resign import resign_job
from zkstore.jobs.states import SUCCEEDED
from zkstore.signing import JobKey, Signer, derive_job_key
from zkstore.storage import StateStorage

KEY = b"a-cluster-signing-key-of-some-length"
SHA = "ab" * 32


def legacy_signature(key: str, sha256: str, size: int) -> str:
    """A signature as zkstore made them before job keys: with the cluster key itself."""
    message = f"zkstore-payload-v1\n{key}\n{sha256}\n{size}".encode()
    return hmac.new(KEY, message, hashlib.sha256).hexdigest()


def test_a_job_key_is_derived_from_the_cluster_key_cluster_id_and_job_id() -> None:
    expected = hmac.new(KEY, b"zkstore-job-key\0c1\0job-a", hashlib.sha256).digest()
    assert derive_job_key(KEY, "c1", "job-a") == expected
    assert len({derive_job_key(KEY, c, j) for c in ("c1", "c2") for j in ("a", "b")}) == 4
    for cluster_id, job_id in (("c1", "a\0c2"), ("c1\0a", "c2"), ("c1", ""), ("c/1", "a")):
        with pytest.raises(ConfigError):
            derive_job_key(KEY, cluster_id, job_id)  # ids never hold the separator


def test_a_job_key_signs_and_checks_its_own_jobs_payloads_only() -> None:
    cluster = Signer(KEY)
    job_a = Signer(job_key=JobKey("c1", "a", derive_job_key(KEY, "c1", "a")))
    a_key, b_key = "c1/jobs/a/checkpoints/1-x.json", "c1/jobs/b/checkpoints/1-x.json"
    signature = cluster.sign(a_key, SHA, 10)
    assert job_a.sign(a_key, SHA, 10) == signature, "the daemon and the driver agree"
    job_a.check(a_key, SHA, 10, signature)
    cluster.check(a_key, SHA, 10, job_a.sign(a_key, SHA, 10))
    for attempt in (lambda: job_a.sign(b_key, SHA, 10), lambda: job_a.check_scope(b_key)):
        with pytest.raises(UntrustedPayload, match="only job this process holds"):
            attempt()
    with pytest.raises(UntrustedPayload):
        job_a.check(b_key, SHA, 10, cluster.sign(b_key, SHA, 10))
    # A's key over B's payload (what job code holding A's key could forge) verifies nowhere.
    for key in (b_key, "c1/jobs/b/definition/x.pkl", "c1/artifacts/b/x"):
        message = f"zkstore-payload-v1\n{key}\n{SHA}\n10".encode()
        forged = hmac.new(derive_job_key(KEY, "c1", "a"), message, hashlib.sha256).hexdigest()
        with pytest.raises(UntrustedPayload, match="signature does not match"):
            cluster.check(key, SHA, 10, forged)
    # Signatures made with the cluster key before job keys: the cluster's holders only.
    legacy = legacy_signature(a_key, SHA, 10)
    cluster.check(a_key, SHA, 10, legacy)
    assert cluster.is_legacy(a_key, SHA, 10, legacy)
    assert not cluster.is_legacy(a_key, SHA, 10, signature)
    with pytest.raises(UntrustedPayload, match="signature does not match"):
        job_a.check(a_key, SHA, 10, legacy)
    assert not job_a.is_legacy(a_key, SHA, 10, legacy)
    # Outside any job's prefix: the cluster key itself, which a driver does not hold.
    assert cluster.sign("c/p", SHA, 1) == legacy_signature("c/p", SHA, 1)
    with pytest.raises(UntrustedPayload):
        job_a.sign("c/p", SHA, 1)
    with pytest.raises(ConfigError):
        Signer(KEY, JobKey("c1", "a", bytes(32)))


def test_a_drivers_configuration_holds_its_jobs_key_and_never_the_clusters() -> None:
    config = StoreConfig(signing_key=KEY, cluster_id="c1")
    driver = config.for_job("job-a")
    assert driver.signing_key is None
    assert driver.job_key == JobKey("c1", "job-a", derive_job_key(KEY, "c1", "job-a"))
    text = driver.to_json()
    assert KEY.hex() not in text and KEY.decode() not in text
    assert StoreConfig.from_json(text) == driver
    assert KEY.hex() not in repr(driver) and derive_job_key(KEY, "c1", "job-a").hex() not in (
        repr(driver)
    )
    assert StoreConfig(cluster_id="c1").for_job("a") == StoreConfig(cluster_id="c1")
    with pytest.raises(ConfigError):
        replace(driver, signing_key=KEY)
    with pytest.raises(ConfigError):
        replace(driver, cluster_id="c2")
    with pytest.raises(ConfigError):
        config.for_job("../x")


def test_a_driver_writes_nothing_outside_its_job(tmp_path: Path) -> None:
    job_a = Signer(job_key=JobKey("c1", "a", derive_job_key(KEY, "c1", "a")))
    storage = StateStorage(f"file://{tmp_path}/s", signer=job_a)
    ref = storage.write("c1/jobs/a/checkpoints", b"{}")
    assert ref.hmac == Signer(KEY).sign(storage.key_of(ref.uri), ref.sha256, ref.size)
    with pytest.raises(UntrustedPayload, match="cannot sign c1/jobs/b"):
        storage.write("c1/jobs/b/definition", b"forged")
    with pytest.raises(UntrustedPayload, match="cannot sign"):
        storage.create("c1/jobs/b/logs/attempt-1/00000000.log", b"forged")
    assert not (tmp_path / "s" / "c1" / "jobs" / "b").exists(), "refused before writing"


def make_legacy(cluster: Cluster, node: str) -> Handle:
    """Rewrite the handle at ``node`` as zkstore wrote it before job keys."""
    data, stat = cluster.zk.get(node)
    handle = Handle.from_znode(data, stat, node)
    key = cluster.storage.key_of(handle.uri)
    legacy = replace(handle, hmac=legacy_signature(key, handle.sha256, handle.size))
    cluster.zk.set(node, legacy.to_bytes(), version=stat.version)
    return legacy


def test_resign_rewrites_the_signature_of_legacy_handles_and_nothing_else(
    config: StoreConfig,
) -> None:
    signed = config.with_changes(signing_key=KEY)
    with Cluster.open(signed) as cluster, Client(signed) as client:
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


@pytest.mark.slow
def test_a_job_submitted_before_job_keys_runs_on_from_its_checkpoint(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """Definition and checkpoints signed with the cluster key (as before this change): the CLI
    verifies them, and the daemon re-signs them before the launch, so the driver, which holds
    the job's key only, resumes from the checkpoint."""
    config = runtime_config.with_changes(signing_key=KEY)
    out = tmp_path / "out"
    with Client(config) as client:
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
