"""What job code can find in its own driver: never the cluster's signing key nor an API token,
only its own job's key, which signs nothing of another job. Real daemon, real drivers (forked
from the fork server, which forked another job's driver first), real HTTP."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import urllib.request
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import jobs, secret_jobs
from tests.helpers import hands_client, wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.records.handle import Handle
from zkstore.records.job_states import QUARANTINED, SUCCEEDED
from zkstore.signing import derive_job_key

pytestmark = pytest.mark.e2e

CLUSTER_KEY = b"the-cluster-signing-key-" + b"k" * 16
TOKEN = "change-t0ken-" + "c" * 20
READ_TOKEN = "read-t0ken-" + "r" * 20


def forms(secret: bytes) -> list[bytes]:
    """The ways a key could sit in memory or a file: raw, hex, base64, and as text."""
    return [secret, secret.hex().encode(), base64.b64encode(secret), secret.hex().upper().encode()]


def test_job_code_finds_neither_the_cluster_key_nor_a_token_and_its_key_forges_nothing(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    config = runtime_config.with_changes(signing_key=CLUSTER_KEY)
    local = LocalCluster(
        config,
        tmp_path / "rt",
        restart_backoff=0.2,
        http=True,
        extra_env={"ZKSTORE_API_TOKEN": TOKEN, "ZKSTORE_API_READ_TOKEN": READ_TOKEN},
    )
    out = tmp_path / "exposed"
    try:
        daemon = local.start_daemon("d1")
        with hands_client(config) as client:
            # Another job's driver first, from the same fork server: its key must not linger.
            first = client.submit_function(jobs.steps, str(tmp_path / "first"), 2, 0.0)
            assert client.wait(first, timeout=120).outcome == SUCCEEDED
            job = client.submit_function(secret_jobs.expose, str(out), "victim", job_id="nosy")
            assert client.wait(job, timeout=180).outcome == SUCCEEDED
            assert daemon.url is not None
            logs = urllib.request.Request(
                f"{daemon.url}/api/v1/jobs/{job}/logs",
                headers={"Authorization": f"Bearer {READ_TOKEN}"},
            )
            served = wait_for(
                lambda: (
                    (text := urllib.request.urlopen(logs, timeout=30).read())
                    and b"SUCCEEDED" in text
                    and text
                ),
                timeout=60,
                what="the driver's log served over HTTP",
            )
            found = json.loads((out / "found.json").read_text())
            own_key = derive_job_key(CLUSTER_KEY, config.cluster_id, "nosy")
            assert found["signing_keys"] == [], "no StoreConfig in the driver holds the cluster key"
            assert found["job_keys"] == [["nosy", own_key.hex()]], "the job's own key, derived"
            assert found["write_other"].startswith("UntrustedPayload: cannot sign"), found
            forged = forge_definition(config, stolen_from=out, victim="victim")
            wait_for(lambda: client.status("victim").state == QUARANTINED, timeout=120)
            entry = client.status("victim").quarantine
            assert entry is not None and "signature does not match" in entry.reason, entry
            assert forged and not (out / "pwned").exists(), "the forged code never ran"
    finally:
        local.stop()

    dumps = {path.name: path.read_bytes() for path in out.glob("*.bin")}
    dumps["served log"] = served
    assert own_key in dumps["strings.bin"], "the scan finds keys: its own"
    assert len(dumps["memory.bin"]) > 10_000_000, "the memory scan read the heap"
    assert any(name.startswith("file-fd_") for name in dumps), "open descriptors were read"
    secrets = {
        "the cluster key": forms(CLUSTER_KEY),
        "the API token": [TOKEN.encode()],
        "the read token": [READ_TOKEN.encode()],
        "the other job's key": forms(derive_job_key(CLUSTER_KEY, config.cluster_id, first)),
    }
    for name, data in dumps.items():
        for what, variants in secrets.items():
            assert not any(v in data for v in variants), f"{what} in {name}"


def forge_definition(config: StoreConfig, *, stolen_from: Path, victim: str) -> bool:
    """With the key the nosy job found, sign a definition of ``victim`` (a job whose code would
    write a file) and publish it as a hostile ZooKeeper writer would."""
    found = json.loads((stolen_from / "found.json").read_text())
    (_, stolen_hex) = found["job_keys"][0]
    with Cluster.open(config.with_changes(signing_key=None)) as unsigned:
        pwned = str(stolen_from / "pwned")
        unsigned.jobs.submit(JobDefinition.for_function(victim, jobs.sleeper, args=(pwned, 0.0)))
        node = unsigned.layout.job_handle(victim)
        data, stat = unsigned.zk.get(node)
        handle = Handle.from_znode(data, stat, node)
        key = unsigned.storage.key_of(handle.uri)
        message = f"zkstore-payload-v1\n{key}\n{handle.sha256}\n{handle.size}".encode()
        signature = hmac.new(bytes.fromhex(stolen_hex), message, hashlib.sha256).hexdigest()
        forged = Handle(**{**handle.__dict__, "hmac": signature})
        unsigned.zk.set(node, forged.to_bytes(), version=stat.version)
    return True
