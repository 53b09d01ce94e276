"""No record can crash, stall or mislead the cluster: garbage and hostile state in every record.

Anybody with write access to ZooKeeper can put any bytes in any znode. Each test plants such
state next to healthy jobs and checks that no daemon exits, the healthy jobs run, the broken job
is quarantined or reported, and every CLI command answers in one line, never with a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.cli import answers, every_command_answers
from tests.helpers import hands_client, plant, wait_for, wait_quarantined
from zkstore.config import StoreConfig
from zkstore.errors import HandleNotFound
from zkstore.records.handle import Handle, PayloadRef
from zkstore.records.job_states import CANCELLED, QUARANTINED, SUCCEEDED
from zkstore.records.strict import utc_now
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.e2e

DEEP = b"[" * 5000


def plant_handle(zk: ZooKeeper, path: str, data: bytes) -> None:
    """A handle the way the store publishes one: the node and its ``locks`` child (without it,
    the entry counts as marked for deletion and nothing would run it)."""
    plant(zk, path, data)
    if zk.exists(f"{path}/locks") is None:
        # The leader may have acted on the garbage already (quarantined the job: its handle
        # and locks gone) between the plant and this line: that is the point, not an error.
        with contextlib.suppress(HandleNotFound):
            zk.create(f"{path}/locks")


def test_garbage_in_any_record_never_takes_a_daemon_down(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """A NUL byte in a URI, nesting deeper than the stack, a time without a zone, a persistent
    ``running`` node: each in one job's records, two daemons, a healthy job."""
    planted = {
        "nul-uri": ("handle", None),
        "deep-handle": ("handle", b"[" * 1000),
        "deep-status": ("status", DEEP),
        "naive-status": ("status", None),
        "deep-outcome": ("outcome", DEEP),
        "deep-cancel": ("cancel", DEEP),
        "deep-result": ("result", DEEP),
        "fake-running": ("running", b"junk"),
    }
    for job_id in planted:
        client.submit_function(jobs.steps, str(tmp_path / job_id), 2, 0.01, job_id=job_id)
    layout = client.cluster.layout
    zk = client.cluster.zk
    handle = json.loads(zk.get(layout.job_handle("nul-uri"))[0])
    plant(
        zk, layout.job_handle("nul-uri"), json.dumps({**handle, "uri": "file:///a\u0000b"}).encode()
    )
    plant(zk, layout.job_handle("deep-handle"), planted["deep-handle"][1] or b"")
    plant(zk, layout.status("deep-status"), DEEP)
    naive = {"state": "RESTARTING", "attempt": 1, "failures": 1, "updated": utc_now()}
    naive["not_before"] = "2026-01-01T00:00:00"
    plant(zk, layout.status("naive-status"), json.dumps(naive).encode())
    starting = {"state": "STARTING", "attempt": 1, "failures": 0, "updated": utc_now()}
    plant(zk, layout.status("deep-outcome"), json.dumps(starting).encode())
    plant(zk, layout.outcome("deep-outcome"), DEEP)
    plant(zk, layout.cancel("deep-cancel"), DEEP)
    plant(zk, layout.result("deep-result"), DEEP)
    plant(zk, layout.running("fake-running"), b"junk")  # persistent: no driver's
    every_command_answers(runtime_config, list(planted))

    local.start_daemon("d1")
    local.wait_for_leader()
    local.start_daemon("d2")
    good = client.submit_function(jobs.steps, str(tmp_path / "good"), 3, 0.01, job_id="good")
    assert client.wait(good, timeout=90).outcome == SUCCEEDED
    assert client.wait("deep-outcome", timeout=60).outcome == SUCCEEDED, "an unreadable outcome "
    "is a lost attempt: the job runs again"
    assert client.wait("deep-cancel", timeout=60).outcome == CANCELLED
    for job_id in ("nul-uri", "deep-handle", "deep-status", "naive-status", "fake-running"):
        wait_for(lambda j=job_id: client.status(j).state == QUARANTINED, timeout=30, what=job_id)
    wait_for(lambda: client.status("deep-result").quarantine is not None, timeout=30)
    assert all(d.alive for d in local.daemons.values()), "no daemon exits"
    every_command_answers(runtime_config, [*planted, "good"])


def test_a_handle_aimed_at_a_directory_or_a_fifo_never_stalls_recovery(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    storage = client.cluster.storage
    for job_id in ("at-dir", "at-fifo"):
        client.submit_function(jobs.steps, str(tmp_path / job_id), 1, 0.01, job_id=job_id)
    layout, zk = client.cluster.layout, client.cluster.zk
    at_dir = Handle(
        uri=storage.url(runtime_config.cluster_id),
        size=10,
        sha256="0" * 64,
        created=utc_now(),
        writer="x",
    )
    plant(zk, layout.job_handle("at-dir"), at_dir.to_bytes())
    fifo_uri = storage.url(f"{client.cluster.storage_layout.definitions('at-fifo')}/f.pkl")
    os.mkfifo(storage.path_of(fifo_uri))
    plant(
        zk,
        layout.job_handle("at-fifo"),
        Handle(uri=fifo_uri, size=10, sha256="0" * 64, created=utc_now(), writer="x").to_bytes(),
    )
    verify = subprocess.run(
        [
            str(Path(sys.executable).parent / "zkstore"),
            "handles",
            "verify",
            "--zk",
            runtime_config.zk_hosts,
            "--root",
            runtime_config.root,
            "--storage",
            runtime_config.storage_url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert verify.returncode == 1 and "not a regular file" in verify.stdout, verify
    local.start_daemon("d1")
    good = client.submit_function(jobs.steps, str(tmp_path / "good"), 1, 0.01, job_id="good")
    assert client.wait(good, timeout=60).outcome == SUCCEEDED
    for job_id in ("at-dir", "at-fifo"):
        wait_for(lambda j=job_id: client.status(j).state == QUARANTINED, timeout=30, what=job_id)
    every_command_answers(runtime_config, ["at-dir", "at-fifo"])


def test_a_replayed_handle_never_runs_another_jobs_code(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """With a signing key: A's handle copied to B, and A's payload copied under B's prefix with a
    handle that carries A's signature. B is quarantined both ways; A runs, once, untouched."""
    config = runtime_config.with_changes(signing_key=b"k" * 32)
    local = LocalCluster(config, tmp_path / "rt", restart_backoff=0.2)
    try:
        with hands_client(config) as client:
            out = tmp_path / "a"
            client.submit_function(jobs.steps, str(out), 2, 0.01, job_id="a")
            cluster = client.cluster
            a_bytes, _ = cluster.zk.get(cluster.layout.job_handle("a"))
            plant_handle(
                cluster.zk, cluster.layout.job_handle("b"), a_bytes
            )  # same URI, A's prefix
            a_handle = Handle.parse(a_bytes, "a")
            payload = cluster.storage.fs.cat_file(cluster.storage.path_of(a_handle.uri))
            ref = cluster.storage.write(cluster.storage_layout.definitions("c"), payload)
            moved = Handle.for_payload(
                PayloadRef(ref.uri, ref.size, ref.sha256, a_handle.hmac), "attacker"
            )
            plant_handle(cluster.zk, cluster.layout.job_handle("c"), moved.to_bytes())
            local.start_daemon("d1")
            assert client.wait("a", timeout=60).outcome == SUCCEEDED
            for job_id, why in (("b", "is not where the payloads"), ("c", "signature")):
                wait_for(lambda j=job_id: client.status(j).quarantine is not None, timeout=30)
                entry = client.status(job_id).quarantine
                assert entry is not None and why in entry.reason, entry
        assert list(jobs.read_marks(str(out))) == [
            "start-attempt-1",
            "step-001-attempt-1",
            "step-002-attempt-1",
        ], "A ran once"
    finally:
        local.stop()


def test_a_payload_of_the_wrong_type_is_quarantined_not_retried(
    local: LocalCluster, client: Client
) -> None:
    client.cluster.jobs.handles.add("number", 5, summary={"name": "number", "max_attempts": 3})
    client.cluster.jobs.handles.release("number")
    local.start_daemon("d1")
    assert "holds a int" in wait_quarantined(client, "number").reason
    status = client.status("number").status
    assert status is not None and status.attempt == 1 and status.failures == 0


def test_a_job_meeting_its_own_corrupt_checkpoint_is_quarantined_not_retried(
    local: LocalCluster, client: Client, tmp_path: Path
) -> None:
    """The job reads its latest checkpoint and the handle is garbage: every next attempt would
    meet it again, so the attempt ends BROKEN and the job is quarantined with the reason."""
    job_id = client.submit_function(jobs.steps, str(tmp_path / "out"), 3, 0.01, max_attempts=3)
    plant_handle(
        client.cluster.zk, f"{client.cluster.layout.checkpoints(job_id)}/{'1'.zfill(19)}", b"\xff"
    )
    local.start_daemon("d1")
    wait_for(lambda: client.status(job_id).state == QUARANTINED, timeout=60, what="quarantine")
    entry = client.status(job_id).quarantine
    assert entry is not None and "its stored state is broken: CorruptHandle" in entry.reason
    assert "Traceback" not in entry.reason
    status = client.status(job_id).status
    assert status is not None and status.attempt == 1 and status.failures == 0


def test_the_signing_key_never_reaches_the_jobs_environment(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    key = b"very-secret-signing-key-0123456789"
    config = runtime_config.with_changes(signing_key=key)
    local = LocalCluster(config, tmp_path / "rt", restart_backoff=0.2)
    try:
        local.start_daemon("d1")
        with hands_client(config) as client:
            job_id = client.submit_function(jobs.environment, str(tmp_path / "env"))
            assert client.wait(job_id, timeout=60).outcome == SUCCEEDED
    finally:
        local.stop()
    seen: dict[str, Any] = jobs.read_marks(str(tmp_path / "env"))["environ"]["environ"]
    values = "\n".join(f"{k}={v}" for k, v in seen.items())
    for secret in (key.decode(), key.hex()):
        assert secret not in values
    assert "ZKSTORE_SIGNING_KEY" not in seen


# -- the property: any garbage, in any record, never crashes, stalls or misleads ----------------

RECORD_KINDS = (
    "handle",
    "status",
    "running",
    "outcome",
    "cancel",
    "result",
    "quarantine",
    "control",
    "checkpoint",
)


def valid_record(kind: str, job_id: str) -> dict[str, Any]:
    """What the record's own writer would have written (the base the garbage is made from)."""
    now = utc_now()
    return {
        "status": {"state": "STARTING", "attempt": 1, "failures": 0, "updated": now},
        "running": {"attempt": 1, "host": "h", "pid": 1, "started": now},
        "outcome": {"attempt": 1, "outcome": "SUCCEEDED", "finished": now},
        "cancel": {"requested": now},
        "result": {
            "job_id": job_id,
            "state": "DIRTY",
            "outcome": "FAILED",
            "attempts": 1,
            "finished": now,
        },
        "quarantine": {"job_id": job_id, "reason": "r", "since": now},
        "control": {"rate": 1},
    }.get(kind, {})


def garbage() -> Any:
    from hypothesis import strategies as st

    json_values = st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=30),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=8,
    )
    raw = st.binary(max_size=300)
    deep = st.integers(100, 6000).map(lambda n: b"[" * n)
    deep_object = st.integers(50, 3000).map(lambda n: b'{"a":' * n)
    text = st.sampled_from(
        [
            "a\x00b",
            "x\ny",
            "\x1b[2J",
            "2026-01-01T00:00:00",
            "yesterday",
            "\U0001f600" * 50,
            "x" * 60000,
        ]
    )
    return st.one_of(
        raw,
        deep,
        deep_object,
        st.tuples(
            st.sampled_from(
                [
                    "state",
                    "attempt",
                    "finished",
                    "started",
                    "requested",
                    "since",
                    "updated",
                    "job_id",
                    "outcome",
                    "host",
                    "pid",
                ]
            ),
            st.one_of(json_values, text),
        ),
    )


def test_any_garbage_in_any_record_never_crashes_stalls_or_misleads(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    local.start_daemon("d1")
    local.wait_for_leader()
    local.start_daemon("d2")
    healthy = client.submit_function(jobs.steps, str(tmp_path / "healthy"), 30, 0.2)
    planted: list[str] = []
    layout, zk = client.cluster.layout, client.cluster.zk

    @settings(
        max_examples=6,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(kind=st.sampled_from(RECORD_KINDS), bad=garbage())
    def plant_one(kind: str, bad: Any) -> None:
        job_id = f"evil-{len(planted)}"
        planted.append(job_id)
        client.submit_function(jobs.steps, str(tmp_path / job_id), 1, 0.01, job_id=job_id)
        if isinstance(bad, bytes):
            data = bad
        else:
            field, value = bad
            data = json.dumps({**valid_record(kind, job_id), field: value}).encode()
            data = data[:60000]
        path = {
            "handle": layout.job_handle(job_id),
            "status": layout.status(job_id),
            "running": layout.running(job_id),
            "outcome": layout.outcome(job_id),
            "cancel": layout.cancel(job_id),
            "result": layout.result(job_id),
            "quarantine": layout.quarantine_entry(job_id),
            "control": layout.control(job_id),
            "checkpoint": f"{layout.checkpoints(job_id)}/{'1'.zfill(19)}",
        }[kind]
        (plant_handle if kind in ("handle", "checkpoint") else plant)(zk, path, data)
        answers(runtime_config, "jobs", "show", job_id, codes=(0, 1))
        answers(runtime_config, "control", "get", job_id, codes=(0, 1))
        answers(runtime_config, "jobs", "list", codes=(0, 1))
        assert all(d.alive for d in local.daemons.values()), f"a daemon died on {kind}"

    plant_one()
    assert client.wait(healthy, timeout=180).outcome == SUCCEEDED
    for job_id in planted:  # every broken job settles: quarantined, or ended with a result
        wait_for(
            lambda j=job_id: (s := client.status(j)).quarantined or s.result is not None,
            timeout=120,
            what=f"{job_id} to settle",
        )
    assert all(d.alive for d in local.daemons.values())
    every_command_answers(runtime_config, planted)
