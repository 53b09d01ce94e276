"""The operator CLI: lingering state seeded by real crashes, found exactly, cleaned up safely."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests import jobs
from tests.cli import run
from tests.helpers import crash, wait_for
from zkstore.admin.inventory import read_inventory, verify
from zkstore.admin.lingering import find_lingering
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.records.job_states import SUCCEEDED
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration

MIN_AGE = 2.0


@pytest.fixture
def seeded(config: StoreConfig) -> Iterator[tuple[Cluster, set[tuple[str, str]]]]:
    """A store with one of every kind of lingering state, made by real write paths."""
    with Cluster.open(config) as cluster:
        for job in ("live", "damaged", "bad", "done", "late"):
            cluster.jobs.submit(JobDefinition.for_function(job, jobs.noop))
        cluster.checkpoints("live").add({"step": 1})
        crash(config, "put", "orphaned", "add:payload-written")  # orphan payload, no handle
        cluster.jobs.submit(JobDefinition.for_function("half-removed", jobs.noop))
        crash(config, "remove", "half-removed", "remove:marked")  # marked node + its payload
        crash(config, "checkpoints", "live", "remove:payload-discarded")  # marked checkpoint
        crash(config, "finish", "done", "finish:result-recorded")  # dirty result
        cluster.results.create_dirty("late", SUCCEEDED, attempts=1)
        assert clean_up(cluster, "late")  # a finished, cleaned-up job ...
        cluster.state.request_cancel("late", reason="too late")  # ... then a late cancel: tree
        damaged = cluster.jobs.handles.get_handle("damaged")
        cluster.storage.discard(damaged.uri)  # dangling handle: payload deleted from outside
        cluster.quarantine.move_in("bad", "operator put it there")
        expected = {
            ("orphan-payload", "orphaned"),
            ("marked-node", "half-removed"),
            ("marked-node", "live"),
            ("dirty-result", "done"),
            ("empty-job-tree", "late"),
            ("dangling-handle", "damaged"),
            ("quarantined-job", "bad"),
        }
        yield cluster, expected


def lingering_json(config: StoreConfig, min_age: float = 0.0) -> dict[str, Any]:
    result = run(config, "handles", "lingering", "--min-age", f"{min_age}s", "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def snapshot_everything(cluster: Cluster) -> tuple[Any, ...]:
    inventory = read_inventory(cluster.zk, cluster.layout)
    return (
        sorted((r.path, r.version, r.marked) for r in inventory.handles),
        sorted(inventory.trees),
        sorted((j, r.state) for j, r in inventory.results.items()),
        sorted(inventory.quarantine),
        sorted(o.uri for o in cluster.storage.list(cluster.storage_layout.jobs)),
    )


def test_lingering_reports_every_kind_and_nothing_else(
    seeded: tuple[Cluster, set[tuple[str, str]]], config: StoreConfig
) -> None:
    _cluster, expected = seeded
    report = lingering_json(config)
    found = {(f["kind"], f["job_id"]) for f in report["findings"]}
    assert found == expected
    orphans = [f for f in report["findings"] if f["kind"] == "orphan-payload"]
    assert all(f["garbage"] for f in orphans)
    quarantined = [f for f in report["findings"] if f["kind"] == "quarantined-job"]
    assert [f["garbage"] for f in quarantined] == [False]
    assert report["summary"]["marked-node"] == 2
    older_only = lingering_json(config, min_age=3600)["findings"]
    assert [(f["kind"], f["job_id"]) for f in older_only] == [
        ("dangling-handle", "damaged"),  # damage at any age
        ("quarantined-job", "bad"),
    ], "nothing else younger than --min-age is reported"


def test_cleanup_dry_run_changes_nothing(
    seeded: tuple[Cluster, set[tuple[str, str]]], config: StoreConfig
) -> None:
    cluster, expected = seeded
    before = snapshot_everything(cluster)
    result = run(config, "handles", "cleanup", "--dry-run", "--min-age", "0s", "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["dry_run"] is True and report["done"] == 0
    assert {(r["kind"], r["job_id"]) for r in report["results"]} == {
        k for k in expected if k[0] != "quarantined-job"
    }
    assert snapshot_everything(cluster) == before


def test_cleanup_removes_exactly_the_garbage_while_a_workload_runs(
    seeded: tuple[Cluster, set[tuple[str, str]]], config: StoreConfig
) -> None:
    cluster, _ = seeded
    stop = threading.Event()
    written: list[str] = []
    errors: list[BaseException] = []

    def workload() -> None:
        with Cluster.open(config) as own:
            i = 0
            while not stop.is_set():
                try:
                    own.jobs.submit(JobDefinition.for_function(f"work-{i}", jobs.noop))
                    own.checkpoints("live", retain=2).add({"work": i})
                    version = own.jobs.handles.exists(f"work-{i}")
                    assert version is not None
                    own.jobs.handles.replace(
                        f"work-{i}", version, JobDefinition.for_function(f"work-{i}", jobs.noop)
                    )
                    written.append(f"work-{i}")
                except BaseException as exc:
                    errors.append(exc)
                    return
                i += 1

    seeded_at = time.time()
    thread = threading.Thread(target=workload)
    thread.start()
    try:
        # The seeded state must be older than --min-age, the workload's newest payloads younger.
        wait_for(lambda: time.time() > seeded_at + MIN_AGE + 0.5, timeout=30, what="aging")
        wait_for(lambda: len(written) >= 3, timeout=30, what="workload")
        result = run(config, "handles", "cleanup", "--yes", "--min-age", "2s", "--format", "json")
        wait_for(lambda: len(written) >= 10, timeout=30, what="more workload")
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    actions = {(r["kind"], r["job_id"]): r for r in report["results"]}
    assert actions[("orphan-payload", "orphaned")]["done"]
    assert actions[("dangling-handle", "damaged")]["action"] == "quarantine job"
    assert report["freed_bytes"] > 0
    remaining = {(f["kind"], f["job_id"]) for f in lingering_json(config)["findings"]}
    assert remaining == {("quarantined-job", "bad"), ("quarantined-job", "damaged")}
    inventory = read_inventory(cluster.zk, cluster.layout)
    live = [r for r in inventory.handles if not r.marked and r.kind != "quarantined"]
    problems = verify(cluster.storage, cluster.storage_layout, live)
    assert problems == [], "every live handle still verifies"
    assert {f"work-{i}" for i in range(10)} <= {r.job_id for r in live}
    assert cluster.results.get("done") is not None and cluster.results.get("done").state == "CLEAN"


def test_verify_catches_a_flipped_byte_and_a_deleted_payload(config: StoreConfig) -> None:
    with Cluster.open(config) as cluster:
        for job in ("fine", "flipped", "deleted"):
            cluster.jobs.submit(JobDefinition.for_function(job, jobs.noop))
        cluster.checkpoints("fine").add({"step": 1})
        clean = run(config, "handles", "verify", "--format", "json")
        assert clean.returncode == 0 and json.loads(clean.stdout) == {"checked": 4, "problems": []}
        flipped = cluster.jobs.handles.get_handle("flipped")
        path = cluster.storage.path_of(flipped.uri)
        data = cluster.storage.fs.cat_file(path)
        cluster.storage.fs.pipe_file(path, data[:-1] + bytes([data[-1] ^ 1]))
        cluster.storage.discard(cluster.jobs.handles.get_handle("deleted").uri)
    result = run(config, "handles", "verify", "--format", "json")
    assert result.returncode == 1
    problems = {p["job"]: p["problem"] for p in json.loads(result.stdout)["problems"]}
    assert set(problems) == {"flipped", "deleted"}
    assert "sha256" in problems["flipped"] and "PayloadMissing" in problems["deleted"]
    table = run(config, "handles", "verify")
    printed = table.stdout + table.stderr
    assert "2 problem(s)" in printed and "flipped" in printed


@pytest.mark.parametrize(
    "command", [["verify"], ["lingering"], ["cleanup", "--dry-run"]], ids=" ".join
)
def test_the_store_is_read_after_catching_up_with_the_ensemble(
    config: StoreConfig, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Its session's server may be a follower that lags: verify, lingering and cleanup sync it
    before reading, so a handle deleted with its payload moments ago is not reported as one
    missing its payload (a chaos run on a loaded host saw exactly that), nor a payload whose
    handle was just published as an orphan to remove."""
    calls: list[str] = []
    real_sync, real_children = ZooKeeper.sync, ZooKeeper.children

    def sync(self: ZooKeeper, path: str, **kwargs: Any) -> None:
        calls.append(f"sync {path}")
        real_sync(self, path, **kwargs)

    def children(self: ZooKeeper, path: str, **kwargs: Any) -> list[str]:
        calls.append("read")
        return real_children(self, path, **kwargs)

    monkeypatch.setattr(ZooKeeper, "sync", sync)
    monkeypatch.setattr(ZooKeeper, "children", children)
    with Cluster.open(config) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("j", jobs.noop))
        calls.clear()
        assert run(config, "handles", *command, "--format", "json").returncode == 0
        assert calls and calls[0] == f"sync {cluster.layout.base}", calls


def test_handles_list_shows_kinds_versions_and_locks(config: StoreConfig) -> None:
    with Cluster.open(config) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("a", jobs.noop), keep_lock=True)
        cluster.checkpoints("a").add({"step": 1})
        result = run(config, "handles", "list", "--format", "json")
        items = json.loads(result.stdout)
        assert [(i["kind"], i["job"], i["version"]) for i in items] == [
            ("job", "a", 0),  # sorted by path: .../currentJobs/a before .../jobs/a/checkpoints
            ("checkpoint", "a", 0),
        ]
        job = next(i for i in items if i["kind"] == "job")
        assert job["locks"] == [cluster.instance_id]
        assert job["uri"].startswith(cluster.storage.root_url) and len(job["sha256"]) == 64
        table = run(config, "handles", "list")
        assert table.stdout.splitlines()[0].split()[:4] == [
            "KIND",
            "JOB",
            "NAME",
            "VERSION",
        ]


def test_cleanup_needs_dry_run_or_yes(config: StoreConfig) -> None:
    result = run(config, "handles", "cleanup")
    assert result.returncode == 2
    assert "--dry-run" in result.stderr


def test_jobs_and_checkpoints_listing_in_json(config: StoreConfig) -> None:
    with Cluster.open(config) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("listed", jobs.noop, max_attempts=4))
        cluster.checkpoints("listed").add({"step": 1})
        cluster.checkpoints("listed").add({"step": 2})
    listed = json.loads(run(config, "jobs", "list", "--format", "json").stdout)
    assert [(j["job_id"], j["state"], j["max_attempts"], j["kind"]) for j in listed] == [
        ("listed", "SUBMITTED", 4, "function")
    ]
    shown = json.loads(run(config, "jobs", "show", "listed", "--format", "json").stdout)
    assert [c["id"] for c in shown["checkpoints"]] == [1, 2]
    checkpoints = json.loads(
        run(config, "checkpoints", "list", "listed", "--format", "json").stdout
    )
    assert [c["id"] for c in checkpoints] == [1, 2]
    missing = run(config, "jobs", "show", "nope")
    assert missing.returncode == 4 and "no job 'nope'" in missing.stderr


def test_a_handle_replaced_after_the_listing_is_not_reported_dangling(config: StoreConfig) -> None:
    """The second look: lingering re-reads a suspect znode before calling it dangling."""
    with Cluster.open(config) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("moving", jobs.noop))
        stale = read_inventory(cluster.zk, cluster.layout)  # read before the replace
        version = cluster.jobs.handles.exists("moving")
        assert version is not None
        cluster.jobs.handles.replace(
            "moving", version, JobDefinition.for_function("moving", jobs.noop)
        )
        found = find_lingering(cluster, min_age=3600, inventory=stale)
        assert [f.kind for f in found] == [], "the old payload is gone, but so is its handle"
        cluster.storage.discard(cluster.jobs.handles.get_handle("moving").uri)
        found = find_lingering(cluster, min_age=3600)
        assert [(f.kind, f.job_id) for f in found] == [("dangling-handle", "moving")]
