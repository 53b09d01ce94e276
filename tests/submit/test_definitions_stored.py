"""Job definitions in currentJobs: put, recover, list, remove, watch; signing and versions."""

from __future__ import annotations

import json
import queue
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import (
    CorruptPayload,
    HandleExists,
    IncompatiblePayload,
    InvalidJobId,
    JobFinished,
    JobQuarantined,
    SerializationError,
    UntrustedPayload,
)
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.graph import ADDED, REMOVED
from zkstore.jobs.snapshot import read_snapshots
from zkstore.payloads.serializers import PickleSerializer
from zkstore.records.handle import Handle
from zkstore.records.job_states import SUCCEEDED

pytestmark = pytest.mark.integration


def triple(ctx: Any, x: int) -> int:
    return x * 3


def function_job(job_id: str = "job-1", **kwargs: Any) -> JobDefinition:
    return JobDefinition.for_function(job_id, triple, args=(7,), **kwargs)


def test_function_definition_round_trip(any_cluster: Cluster) -> None:
    definition = function_job(spark_conf={"spark.sql.shuffle.partitions": "4"}, max_attempts=5)
    handle = any_cluster.jobs.submit(definition)
    assert handle.summary["name"] == "triple"
    assert handle.summary["kind"] == "function"
    recovered = any_cluster.jobs.recover("job-1").state
    function, args = recovered.load_function()
    assert function(None, *args) == 21
    assert recovered.spark_conf == {"spark.sql.shuffle.partitions": "4"}
    assert recovered.max_attempts == 5
    assert any_cluster.jobs.job_ids() == ["job-1"]


def test_script_definition_round_trip(any_cluster: Cluster) -> None:
    source = "import sys\nprint(sys.argv)\n"
    definition = JobDefinition.for_script(
        "etl", source, filename="/home/me/etl.py", args=["--day", "2026-11-21"], name="nightly"
    )
    any_cluster.jobs.submit(definition)
    recovered = any_cluster.jobs.recover("etl").state
    assert (recovered.kind, recovered.source, recovered.args) == (
        "script",
        source,
        ("--day", "2026-11-21"),
    )
    assert recovered.entry_point == "etl.py"
    assert any_cluster.jobs.summaries()["etl"].summary["name"] == "nightly"


def test_put_releases_its_lock_so_cleanup_is_never_blocked(cluster: Cluster) -> None:
    cluster.jobs.submit(function_job())
    assert cluster.zk.children(f"{cluster.layout.job_handle('job-1')}/locks") == []


def test_duplicate_job_id_is_refused(cluster: Cluster) -> None:
    cluster.jobs.submit(function_job())
    with pytest.raises(HandleExists):
        cluster.jobs.submit(function_job())


def test_finished_job_is_never_resubmitted(cluster: Cluster) -> None:
    cluster.results.create_dirty("job-1", SUCCEEDED, attempts=1)
    with pytest.raises(JobFinished, match="already has a result"):
        cluster.jobs.submit(function_job())
    assert cluster.jobs.job_ids() == []
    assert cluster.storage.list(cluster.storage_layout.jobs) == [], "nothing left behind"


def test_quarantined_job_id_is_refused(cluster: Cluster) -> None:
    cluster.jobs.submit(function_job())
    cluster.quarantine.move_in("job-1", "operator says so")
    with pytest.raises(JobQuarantined):
        cluster.jobs.submit(function_job())


@pytest.mark.parametrize("job_id", ["../x", "a/b", "with space", "x" * 200, ""])
def test_hostile_job_ids_never_become_paths(cluster: Cluster, job_id: str) -> None:
    with pytest.raises(InvalidJobId):
        function_job(job_id)
    with pytest.raises(InvalidJobId):
        cluster.jobs.recover(job_id)
    with pytest.raises(InvalidJobId):
        cluster.jobs.remove(job_id)


def test_function_cloudpickle_cannot_serialize_is_a_clear_error(cluster: Cluster) -> None:
    import threading

    lock = threading.Lock()
    with pytest.raises(SerializationError, match="cannot serialize"):
        JobDefinition.for_function("locky", lambda ctx: lock.acquire())
    assert cluster.jobs.job_ids() == []


class OtherPythonSerializer(PickleSerializer[Any]):
    """Writes payloads whose header claims another Python minor version."""

    def dumps(self, state: Any) -> bytes:
        data = super().dumps(state)
        header = self.header(data)
        other = json.dumps({**header, "python": "3.9"}).encode()
        magic_len = data.index(b"\n") + 1
        body = data[magic_len + data[magic_len:].index(b"\n") + 1 :]
        return data[:magic_len] + other + b"\n" + body


def test_definition_from_another_python_is_refused_clearly(cluster: Cluster) -> None:
    cluster.jobs.handles.serializer = OtherPythonSerializer()
    cluster.jobs.submit(function_job())
    cluster.jobs.handles.serializer = PickleSerializer()
    with pytest.raises(IncompatiblePayload, match=r"written by Python 3\.9"):
        cluster.jobs.recover("job-1")


def flip_last_byte(cluster: Cluster, job_id: str) -> Handle:
    handle = cluster.jobs.handles.get_handle(job_id)
    path = cluster.storage.path_of(handle.uri)
    data = cluster.storage.fs.cat_file(path)
    cluster.storage.fs.pipe_file(path, data[:-1] + bytes([data[-1] ^ 0xFF]))
    return handle


def test_tampered_payload_refused_without_signing(cluster: Cluster) -> None:
    cluster.jobs.submit(function_job())
    flip_last_byte(cluster, "job-1")
    with pytest.raises(CorruptPayload, match="sha256"):
        cluster.jobs.recover("job-1")


def test_signed_definitions(config: StoreConfig) -> None:
    signed_config = config.with_changes(signing_key=b"team-secret")
    with Cluster.open(signed_config) as signed:
        signed.jobs.submit(function_job("signed"))
        assert signed.jobs.recover("signed").state.load_function()[1] == (7,)
        handle = flip_last_byte(signed, "signed")
        with pytest.raises(CorruptPayload):
            signed.jobs.recover("signed")
        # An attacker who can also rewrite the handle's sha256 still lacks the key.
        data = signed.storage.fs.cat_file(signed.storage.path_of(handle.uri))
        forged = Handle(
            **{**handle.__dict__, "sha256": __import__("hashlib").sha256(data).hexdigest()}
        )
        signed.zk.set(signed.layout.job_handle("signed"), forged.to_bytes())
        with pytest.raises(UntrustedPayload, match="signature does not match"):
            signed.jobs.recover("signed")
    with Cluster.open(config) as unsigned:
        unsigned.jobs.submit(function_job("unsigned"))
    with Cluster.open(signed_config) as signed, pytest.raises(UntrustedPayload, match="not signed"):
        signed.jobs.recover("unsigned")


def test_broken_definitions_are_reported_not_raised_by_recover_all(cluster: Cluster) -> None:
    for i in range(3):
        cluster.jobs.submit(function_job(f"job-{i}"))
    flip_last_byte(cluster, "job-1")
    result = cluster.jobs.recover_all()
    assert sorted(e.name for e in result.entries) == ["job-0", "job-2"]
    assert [b.name for b in result.broken] == ["job-1"]


def test_remove_deletes_handle_and_payload(cluster: Cluster) -> None:
    cluster.jobs.submit(function_job())
    assert cluster.jobs.remove("job-1") is True
    assert cluster.jobs.job_ids() == []
    assert cluster.storage.list(cluster.storage_layout.jobs) == []


def test_watch_reports_added_and_removed(cluster: Cluster) -> None:
    cluster.jobs.submit(function_job("before"))
    events: queue.Queue[tuple[str, str]] = queue.Queue()
    watch = cluster.jobs.watch(lambda kind, job: events.put((kind, job)), initial=True)
    assert events.get(timeout=5) == (ADDED, "before")
    cluster.jobs.submit(function_job("after"))
    assert events.get(timeout=5) == (ADDED, "after")
    cluster.jobs.remove("before")
    assert events.get(timeout=5) == (REMOVED, "before")
    watch.stop()
    cluster.jobs.submit(function_job("unwatched"))
    cluster.jobs.remove("after")
    with pytest.raises(queue.Empty):
        events.get(timeout=0.5)


@pytest.fixture
def patient_cluster(config: StoreConfig) -> Iterator[Cluster]:
    """A cluster whose reads have a generous deadline: thousands of pipelined reads in one
    deadline must not fail because the machine is busy with other work."""
    with Cluster.open(config.with_changes(timeout=60.0)) as opened:
        yield opened


def test_listing_1000_jobs_reads_no_payload(patient_cluster: Cluster, config: StoreConfig) -> None:
    """Summaries and snapshots come from handles alone: they work with storage gone."""
    from zkstore.zookeeper.ops import Op

    cluster = patient_cluster
    definition = function_job("template")
    ops: list[Op] = []
    for i in range(1000):
        job_id = f"job-{i:04d}"
        ref = cluster.storage.write(cluster.storage_layout.definitions(job_id), b"payload")
        summary = {**definition.summary(), "job_id": job_id}
        handle = Handle.for_payload(ref, cluster.instance_id, summary)
        ops += cluster.jobs.handles.publish_ops(job_id, handle, lock=False)
        if len(ops) >= 200:
            cluster.zk.commit(ops)
            ops = []
    shutil.rmtree(config.storage_url.removeprefix("file://"))
    summaries = cluster.jobs.summaries()
    assert len(summaries) == 1000
    assert summaries["job-0999"].summary["name"] == "triple"
    snapshots = read_snapshots(cluster.zk, cluster.layout, summaries)
    assert {s.state for s in snapshots.values()} == {"SUBMITTED"}


def test_put_is_durable_before_it_returns(cluster: Cluster, config: StoreConfig) -> None:
    """Another session sees the job the moment put returns."""
    cluster.jobs.submit(function_job())
    with Cluster.open(config) as other:
        wait_for(lambda: other.jobs.job_ids() == ["job-1"], timeout=2)
        assert other.jobs.recover("job-1").state.load_function()[1] == (7,)
