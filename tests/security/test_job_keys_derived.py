"""Job signing keys: derived per cluster and job, scoped to their job, the only key a driver's
configuration holds."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers import KEY, legacy_signature
from zkstore.config import StoreConfig
from zkstore.errors import ConfigError, UntrustedPayload
from zkstore.payloads.storage import StateStorage
from zkstore.signing import JobKey, Signer, derive_job_key

pytestmark = pytest.mark.unit

SHA = "ab" * 32


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
