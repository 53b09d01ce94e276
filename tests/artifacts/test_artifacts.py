"""Job artifacts in the store: records written before the data, released data first, fenced on
their writer, refused outside the roots, kept on success, found and released when they linger.

Every test runs over local storage and a moto S3 server (``any_cluster``). Crashes are real: a
child process dies at each step of an artifact's life (``tests/crash_artifacts.py``), and the
operator commands find exactly what it left and release it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.cli import json_of
from tests.crash_artifacts import LIFECYCLE, NAME, write_data
from tests.servers import S3Server
from tests.stand_in_attempts import Attempt, Attempts, start
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up
from zkstore.config import StoreConfig
from zkstore.errors import FenceLost, HandleExists, UntrustedPayload, WrongState
from zkstore.jobs.job_artifacts import (
    ATTEMPT,
    FINISHED,
    IN_PROGRESS,
    JOB,
    RELEASING,
    Artifact,
    release_dead_attempts,
)
from zkstore.payloads.artifacts import ArtifactUriRefused
from zkstore.records.job_records import RunningInfo
from zkstore.records.job_states import CANCELLED, FAILED, SUCCEEDED
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def files(cluster: Cluster, uri: str) -> list[str]:
    """The names of the files under the artifact ``uri`` (in the storage root)."""
    return sorted(
        o.uri.rsplit("/", 1)[1] for o in cluster.storage.list(cluster.storage.key_of(uri))
    )


def register(
    cluster: Cluster, attempt: Attempt, job: str, name: str, uri: str | None = None, **kw: Any
) -> Artifact:
    kw.setdefault("scope", ATTEMPT)
    kw.setdefault("keep", False)
    return cluster.artifacts(job).register(
        name, uri, attempt=attempt.attempt, fence=attempt.fence, **kw
    )


# -- registering ---------------------------------------------------------------------------------


def test_register_finish_release(any_cluster: Cluster, attempts: Attempts) -> None:
    cluster, first = any_cluster, start(any_cluster, attempts, "j")
    store = cluster.artifacts("j")
    prefix = f"{cluster.storage.root_url}/default/artifacts/j"
    staging = register(cluster, first, "j", "staging")
    parts = register(cluster, first, "j", "parts", scope=JOB)
    assert (staging.uri, parts.uri) == (f"{prefix}/attempt-1/staging", f"{prefix}/parts")
    assert (staging.state, staging.scope, staging.attempt) == (IN_PROGRESS, ATTEMPT, 1)
    write_data(cluster, staging.uri, "part-0", b"x" * 10)
    write_data(cluster, parts.uri, "part-0", b"y" * 5)
    assert register(cluster, first, "j", "staging") == staging, "registering again: the same"
    finished = store.finish("parts", attempt=1, fence=first.fence)
    assert finished is not None and finished.state == FINISHED and finished.finished
    assert store.get("parts") == finished
    assert cluster.artifact_space.size("j", staging.uri) == 10
    assert store.release("staging", fence=first.fence)
    assert store.get("staging") is None and files(cluster, staging.uri) == []
    assert not store.release("staging", fence=first.fence), "releasing again: nothing to do"
    assert [a.name for a in store.all()[0]] == ["parts"]
    assert files(cluster, parts.uri) == ["part-0"]


def test_a_resumed_attempt_reuses_job_artifacts_and_never_sees_attempt_ones(
    any_cluster: Cluster, attempts: Attempts
) -> None:
    cluster, first = any_cluster, start(any_cluster, attempts, "j")
    store = cluster.artifacts("j")
    staging = register(cluster, first, "j", "staging")
    parts = register(cluster, first, "j", "parts", scope=JOB)
    write_data(cluster, staging.uri, "half", b"half written")
    write_data(cluster, parts.uri, "part-0", b"done")
    store.finish("parts", attempt=1, fence=first.fence)
    first.end()
    # The leader, before it starts attempt 2 (no driver runs now).
    assert release_dead_attempts(store, fence=None) == []
    assert store.get("staging") is None and files(cluster, staging.uri) == []
    second = start(cluster, attempts, "j", 2)
    again = register(cluster, second, "j", "parts", scope=JOB)
    assert (again.uri, again.state, again.attempt) == (parts.uri, FINISHED, 1)
    assert files(cluster, parts.uri) == ["part-0"]
    fresh = register(cluster, second, "j", "staging")
    assert fresh.uri.endswith("/attempt-2/staging") and fresh.attempt == 2


def test_an_attempt_artifact_left_by_a_dead_attempt_is_released_by_the_next_one(
    any_cluster: Cluster, attempts: Attempts
) -> None:
    cluster, first = any_cluster, start(any_cluster, attempts, "j")
    shared = f"{cluster.storage.root_url}/default/artifacts/j/scratch"
    register(cluster, first, "j", "scratch", shared)
    write_data(cluster, shared, "old", b"from attempt 1")
    first.end()
    second = start(cluster, attempts, "j", 2)
    record = register(cluster, second, "j", "scratch", shared)
    assert record.attempt == 2 and files(cluster, shared) == [], "attempt 1's data is gone"


def test_uris_outside_the_roots_are_refused(
    any_cluster: Cluster, attempts: Attempts, tmp_path: Path
) -> None:
    cluster, first = any_cluster, start(any_cluster, attempts, "j")
    root = cluster.storage.root_url
    for uri in (
        "/etc/zkstore-artifact",
        "file:///etc",
        f"{root}/default/jobs/j/definition/x",  # the job's own payloads
        f"{root}/default/artifacts/other/x",  # another job's prefix
        f"{root}/default/artifacts/j/../../jobs/j",
        f"{root}/default/artifacts/j",  # the prefix itself
        "relative/path",
        "s3a://bucket/x",
    ):
        with pytest.raises(ArtifactUriRefused, match="artifact URI") as refused:
            register(cluster, first, "j", "x", uri)
        assert "\n" not in str(refused.value)
    with pytest.raises(ArtifactUriRefused) as refused:
        register(cluster, first, "j", "x", str(tmp_path / "elsewhere"))
    message = str(refused.value)
    assert "outside the artifact roots" in message and f"{root}/default/artifacts/j/" in message
    assert "--artifact-root" in message
    assert cluster.artifacts("j").all() == ([], {}), "nothing recorded"


def test_an_extra_root_takes_any_uri_below_it(
    any_cluster: Cluster, attempts: Attempts, tmp_path: Path
) -> None:
    extra = tmp_path / "scratch"
    config = any_cluster.config.with_changes(artifact_roots=(f"file://{extra}",))
    with Cluster.open(config) as cluster:
        first = start(cluster, attempts, "j")
        staging = register(cluster, first, "j", "staging", str(extra / "run" / "staging"))
        assert staging.uri == f"file://{extra}/run/staging"
        (extra / "run" / "staging" / "deep").mkdir(parents=True)
        (extra / "run" / "staging" / "deep" / "f").write_text("data")
        (extra / "run" / "staging2").mkdir()  # a sibling whose name starts the same
        (extra / "run" / "staging2" / "g").write_text("not ours")
        assert cluster.artifact_space.size("j", staging.uri) == 4
        with pytest.raises(HandleExists, match="overlaps"):
            register(cluster, first, "j", "inner", str(extra / "run" / "staging" / "deep"))
        cluster.artifacts("j").release("staging", fence=first.fence)
        assert not (extra / "run" / "staging").exists()
        assert (extra / "run" / "staging2" / "g").read_text() == "not ours"


def test_the_same_name_with_another_uri_or_scope_is_a_conflict(
    any_cluster: Cluster, attempts: Attempts
) -> None:
    cluster, first = any_cluster, start(any_cluster, attempts, "j")
    register(cluster, first, "j", "parts", scope=JOB)
    with pytest.raises(HandleExists, match="registered already"):
        register(cluster, first, "j", "parts", scope=ATTEMPT)
    with pytest.raises(HandleExists, match="registered already"):
        register(cluster, first, "j", "parts", scope=JOB, keep=True)


def test_writes_are_fenced_on_the_attempt(any_cluster: Cluster, attempts: Attempts) -> None:
    cluster, first = any_cluster, start(any_cluster, attempts, "j")
    register(cluster, first, "j", "staging")
    first.end()
    store = cluster.artifacts("j")
    with pytest.raises(FenceLost):
        register(cluster, first, "j", "late")
    with pytest.raises(FenceLost):
        store.finish("staging", attempt=1, fence=first.fence)
    with pytest.raises(FenceLost):
        store.release("staging", fence=first.fence)
    record = store.get("staging")
    assert record is not None and record.state == IN_PROGRESS, "nothing was written"
    second = start(cluster, attempts, "j", 2)
    with pytest.raises(WrongState, match="attempt 1"):
        store.finish("staging", attempt=2, fence=second.fence)


def test_an_artifact_finished_after_a_cancel_is_released_at_once(
    any_cluster: Cluster, attempts: Attempts
) -> None:
    cluster, first = any_cluster, start(any_cluster, attempts, "j")
    out = register(cluster, first, "j", "report", scope=JOB, keep=True)
    write_data(cluster, out.uri, "report.json", b"{}")
    cluster.state.request_cancel("j", reason="stop")
    assert cluster.artifacts("j").finish("report", attempt=1, fence=first.fence) is None
    assert cluster.artifacts("j").get("report") is None and files(cluster, out.uri) == []


def test_a_planted_record_never_deletes_outside_the_roots(
    any_cluster: Cluster, attempts: Attempts, tmp_path: Path
) -> None:
    cluster, first = any_cluster, start(any_cluster, attempts, "j")
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep-me").write_text("data")
    register(cluster, first, "j", "fine")
    planted = Artifact(
        version=None,
        name="evil",
        uri=f"file://{precious}",
        scope=ATTEMPT,
        attempt=1,
        registered=utc_now(),
    )
    cluster.zk.create(cluster.layout.artifact("j", "evil"), planted.to_bytes())
    with pytest.raises(UntrustedPayload, match="outside"):
        cluster.artifacts("j").release("evil", fence=None)
    first.end()
    cluster.results.create_dirty("j", FAILED, attempts=1)
    assert clean_up(cluster, "j")
    assert (precious / "keep-me").read_text() == "data", "nothing outside the roots deleted"
    assert cluster.zk.exists(cluster.layout.job_dir("j")) is None


def test_a_corrupt_record_is_reported_not_trusted(any_cluster: Cluster, attempts: Attempts) -> None:
    cluster, first = any_cluster, start(any_cluster, attempts, "j")
    register(cluster, first, "j", "fine")
    cluster.zk.create(cluster.layout.artifact("j", "junk"), b'{"name": "junk", "uri": 3}')
    records, unreadable = cluster.artifacts("j").all()
    assert [r.name for r in records] == ["fine"] and list(unreadable) == ["junk"]
    shown = json_of(cluster.config, "jobs", "show", "j")
    assert [a["name"] for a in shown["artifacts"]] == ["fine"]
    assert "artifact junk" in shown["record_errors"]


# -- the job's cleanup ---------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", [SUCCEEDED, FAILED, CANCELLED])
def test_cleanup_keeps_only_finished_outputs_of_a_succeeded_job(
    any_cluster: Cluster, attempts: Attempts, outcome: str
) -> None:
    cluster, first = any_cluster, start(any_cluster, attempts, "j")
    store = cluster.artifacts("j")
    made = {
        "staging": register(cluster, first, "j", "staging"),
        "parts": register(cluster, first, "j", "parts", scope=JOB),
        "report": register(cluster, first, "j", "report", scope=JOB, keep=True),
        "draft": register(cluster, first, "j", "draft", scope=JOB, keep=True),  # never finished
    }
    for record in made.values():
        write_data(cluster, record.uri, "data", record.name.encode())
    store.finish("report", attempt=1, fence=first.fence)
    stray = f"{cluster.artifact_space.job_prefix('j')}/unregistered"
    write_data(cluster, stray, "f", b"the job wrote it without registering")
    first.end()
    cluster.results.create_dirty("j", outcome, attempts=1)
    assert clean_up(cluster, "j")
    result = cluster.results.get("j")
    assert result is not None and result.state == "CLEAN"
    left = {o.uri for o in cluster.storage.list("default/artifacts/j")}
    if outcome == SUCCEEDED:
        assert result.outputs == {"report": made["report"].uri}
        assert left == {f"{made['report'].uri}/data"}
    else:
        assert result.outputs is None and left == set()
    assert cluster.zk.exists(cluster.layout.job_dir("j")) is None


# -- crashes at every step, then the operator commands -------------------------------------------


def lingering(config: StoreConfig) -> set[tuple[str, str]]:
    report = json_of(config, "handles", "lingering", "--min-age", "0s")
    return {(f["kind"], f["target"].rsplit("/", 1)[-1]) for f in report["findings"]}


def crash(config: StoreConfig, op: str, step: str, scope: str, status_version: int = 0) -> None:
    helpers.crash(
        config,
        op,
        "j",
        step,
        module="tests.crash_artifacts",
        scope=scope,
        status_version=status_version,
    )


def expected_leftover(step: str, scope: str) -> set[tuple[str, str]]:
    """What a driver dying at ``step`` leaves that nobody owns, once its attempt is over."""
    if step == "release:deleted":
        return set()
    if scope == JOB and not step.startswith("release:"):
        return set()  # the job owns it: a resumed attempt reuses it, the cleanup releases it
    return {("artifact-of-dead-attempt", NAME)}


@pytest.mark.parametrize("scope", [ATTEMPT, JOB])
@pytest.mark.parametrize("step", LIFECYCLE)
def test_a_crash_at_any_step_leaves_exactly_what_lingering_finds_and_cleanup_releases(
    any_cluster: Cluster, attempts: Attempts, step: str, scope: str
) -> None:
    cluster = any_cluster
    if scope == JOB and cluster.storage.root_url.startswith("s3://"):
        pytest.skip("the same steps as the attempt scope's on S3; the job scope runs locally")
    driver = start(cluster, attempts, "j")
    crash(cluster.config, "lifecycle", step, scope, driver.status_version)
    record = cluster.artifacts("j").get(NAME)
    written = files(cluster, f"{cluster.artifact_space.job_prefix('j')}/attempt-1/{NAME}")
    written += files(cluster, f"{cluster.artifact_space.job_prefix('j')}/{NAME}")
    state = {
        "register:recorded": (IN_PROGRESS, []),
        "register:data-half": (IN_PROGRESS, ["part-0"]),
        "register:data-written": (IN_PROGRESS, ["part-0", "part-1"]),
        "finish:marked": (FINISHED, ["part-0", "part-1"]),
        "release:marked": (RELEASING, ["part-0", "part-1"]),
        "release:data-deleted": (RELEASING, []),
        "release:deleted": (None, []),
    }[step]
    assert ((record.state if record else None), written) == state, "the record says what is left"
    assert lingering(cluster.config) == set(), "the attempt still runs: nothing lingers"
    driver.end()
    leftover = expected_leftover(step, scope)
    assert lingering(cluster.config) == leftover
    report = json_of(cluster.config, "handles", "cleanup", "--yes", "--min-age", "0s")
    assert [(r["kind"], r["done"]) for r in report["results"]] == [(k, True) for k, _ in leftover]
    assert lingering(cluster.config) == set()
    if leftover:
        assert cluster.artifacts("j").get(NAME) is None
    # Whatever is left belongs to the job, and its end releases it.
    cluster.results.create_dirty("j", SUCCEEDED, attempts=1)
    assert clean_up(cluster, "j")
    assert cluster.storage.list("default/artifacts/j") == []


@pytest.mark.parametrize("step", ["release:marked", "release:data-deleted", "release:deleted"])
def test_a_cleanup_that_crashes_mid_release_is_finished_by_the_next(
    any_cluster: Cluster, attempts: Attempts, step: str
) -> None:
    cluster, first = any_cluster, start(any_cluster, attempts, "j")
    parts = register(cluster, first, "j", "parts", scope=JOB)
    write_data(cluster, parts.uri, "part-0", b"data")
    first.end()
    cluster.results.create_dirty("j", FAILED, attempts=1)
    crash(cluster.config, "cleanup", step, JOB)
    assert lingering(cluster.config) == {("dirty-result", "j")}, "the dirty result owns the rest"
    json_of(cluster.config, "handles", "cleanup", "--yes", "--min-age", "0s")
    assert lingering(cluster.config) == set()
    assert cluster.storage.list("default/artifacts/j") == []
    result = cluster.results.get("j")
    assert result is not None and result.state == "CLEAN"


def test_artifacts_of_an_ended_job_and_a_live_driver_are_told_apart(
    any_cluster: Cluster, attempts: Attempts
) -> None:
    cluster = any_cluster
    gone, live = start(cluster, attempts, "gone"), start(cluster, attempts, "live")
    old = register(cluster, gone, "gone", "parts", scope=JOB)
    write_data(cluster, old.uri, "f", b"x")
    register(cluster, live, "live", "staging")
    gone.end()
    cluster.jobs.remove("gone")  # the job went away without its cleanup (an operator, a bug)
    assert lingering(cluster.config) == {
        ("artifact-of-ended-job", "parts"),
        ("empty-job-tree", "gone"),  # its records: deleted once its artifacts are released
    }
    # A driver that appears before the cleanup acts makes it keep the artifact.
    back = attempts.open_session()
    try:
        info = RunningInfo(version=None, attempt=2, host="h", pid=1, started=parse_time(utc_now()))
        back.create(cluster.layout.running("gone"), info.to_bytes(), ephemeral=True)
        report = json_of(cluster.config, "handles", "cleanup", "--yes", "--min-age", "0s")
        assert [(r["action"], r["done"]) for r in report["results"]] == [("kept", False)] * 2
    finally:
        back.stop()
    report = json_of(cluster.config, "handles", "cleanup", "--yes", "--min-age", "0s")
    assert [(r["kind"], r["done"]) for r in report["results"]] == [
        ("artifact-of-ended-job", True),
        ("empty-job-tree", True),
    ]
    assert cluster.storage.list("default/artifacts/gone") == []
    assert cluster.zk.exists(cluster.layout.job_dir("gone")) is None
    assert cluster.artifacts("live").get("staging") is not None, "the live attempt's is kept"


def test_an_extra_root_in_another_bucket_uses_the_storage_options(
    s3_server: S3Server, config: StoreConfig, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    import boto3

    storage_bucket = s3_server.new_bucket()  # resets the server: first
    scratch = f"b{uuid.uuid4().hex[:12]}"
    options = s3_server.options()
    boto3.client(
        "s3",
        endpoint_url=options["endpoint_url"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=scratch)
    config = config.with_changes(
        storage_url=f"s3://{storage_bucket}/zkstore",
        storage_options=options,
        artifact_roots=(f"s3://{scratch}/runs",),
    )
    with Cluster.open(config) as cluster:
        attempt = Attempt(cluster, stand_in_session(), "j")
        try:
            staging = register(cluster, attempt, "j", "staging", f"s3://{scratch}/runs/j/staging")
            fs = cluster.storage.fs
            fs.pipe_file(f"{scratch}/runs/j/staging/part-0", b"12345")
            fs.pipe_file(f"{scratch}/runs/j/staging-b/part-0", b"a sibling")
            assert cluster.artifact_space.size("j", staging.uri) == 5
            cluster.artifacts("j").release("staging", fence=attempt.fence)
            assert fs.find(f"{scratch}/runs") == [f"{scratch}/runs/j/staging-b/part-0"]
        finally:
            attempt.end()
