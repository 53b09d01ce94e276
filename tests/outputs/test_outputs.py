"""Outputs committed with checkpoints (invariant 18), in the store, on local disk and S3 (moto):
a step's parts are committed in its checkpoint's transaction, fenced on the attempt, exactly
once; a superseded attempt's commit is refused and what it staged deleted; readers (the
manifest, the file next to the data, ``read_paths``) see only committed parts; the job's end
keeps a succeeded job's output and drops a failed one's, records first.

The attempts are stand-ins (tests/stand_in_attempts.py's ``Attempt``: the job's status
and a ``running`` node in a session of their own), the job context the driver's own class.
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any

import pytest

from recovery.driver.applied_config import DynamicConfig
from recovery.driver.artifact_registry import JobArtifacts
from recovery.driver.context import JobContext
from recovery.driver.output_staging import JobOutputs
from recovery.driver.signals import AttemptSuperseded
from tests.cli import run
from tests.crash_artifacts import write_data
from tests.stand_in_attempts import Attempt, Attempts, start
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up
from zkstore.errors import ConfigError, CorruptRecord, TooLarge
from zkstore.jobs.job_artifacts import release_dead_attempts, release_for_cleanup
from zkstore.jobs.outputs.manifest import MANIFESTS, chain, manifest_name, read_paths
from zkstore.jobs.outputs.output_records import MAX_PARTS, OutputCommit
from zkstore.layout import checkpoint_node_name
from zkstore.records.job_states import FAILED, SUCCEEDED

pytestmark = pytest.mark.integration


def context(cluster: Cluster, attempt: Attempt, job: str) -> JobContext:
    """The driver's job context for a stand-in attempt."""
    artifacts = JobArtifacts(
        cluster.artifacts(job),
        attempt=attempt.attempt,
        fence=attempt.fence,
        cancelled=threading.Event(),
    )
    return JobContext(
        job_id=job,
        name=job,
        attempt=attempt.attempt,
        spark_master="local[1]",
        spark_conf={},
        checkpoints=cluster.checkpoints(job),
        fence=attempt.fence,
        config=DynamicConfig(dict),
        cancelled=threading.Event(),
        artifacts=artifacts,
        outputs=JobOutputs(
            cluster.outputs(job), artifacts, attempt=attempt.attempt, fence=attempt.fence
        ),
    )


def stage_day(cluster: Cluster, ctx: JobContext, day: int) -> str:
    """Write day ``day``'s part (two files in a directory) under the attempt's staging."""
    assert ctx.outputs is not None
    staging = ctx.outputs.stage("days")
    for n in range(2):
        write_data(cluster, f"{staging}/day={day}", f"part-{n}.json", json.dumps([day, n]).encode())
    return f"{staging}/day={day}"


def objects(cluster: Cluster, uri: str) -> list[str]:
    return sorted(o.uri[len(uri) + 1 :] for o in cluster.storage.list(cluster.storage.key_of(uri)))


def test_a_superseded_attempts_commit_is_refused_and_each_step_is_committed_once(
    any_cluster: Cluster, attempts: Attempts
) -> None:
    cluster = any_cluster
    first = start(cluster, attempts, "j")
    ctx1 = context(cluster, first, "j")
    assert ctx1.outputs is not None
    day1 = stage_day(cluster, ctx1, 1)
    assert ctx1.checkpoint({"day": 1}, commit={"days": [day1]}) == 1
    place = ctx1.outputs.uri("days")
    assert ctx1.outputs.paths("days") == [f"{place}/attempt-1/day=1"]
    # the file next to the data, as a reader without ZooKeeper reads it
    options = cluster.config.storage_options
    assert read_paths(place, **options) == [f"{place}/attempt-1/day=1"]

    # Attempt 1 staged day 2 and froze before its commit; it is known gone, the leader
    # releases its artifacts (its uncommitted staging), attempt 2 redoes day 2 and commits.
    stale_day2 = stage_day(cluster, ctx1, 2)
    first.end()
    release_dead_attempts(cluster.artifacts("j"), fence=None)
    assert objects(cluster, place) == [
        "_manifests/0000000000000000001.json",
        "attempt-1/day=1/part-0.json",
        "attempt-1/day=1/part-1.json",
    ], "attempt 1's uncommitted day 2 deleted, its committed day 1 kept"
    second = start(cluster, attempts, "j", 2)
    ctx2 = context(cluster, second, "j")
    assert ctx2.latest_checkpoint() == {"day": 1}
    day2 = stage_day(cluster, ctx2, 2)
    assert ctx2.checkpoint({"day": 2}, commit={"days": [day2]}) == 2

    # Attempt 1 wakes up: its part is gone, or it writes it again; its commit is refused.
    with pytest.raises(AttemptSuperseded):
        ctx1.checkpoint({"day": 2}, commit={"days": [stale_day2]})
    stage_day(cluster, ctx1, 2)
    with pytest.raises(AttemptSuperseded):
        ctx1.checkpoint({"day": 2}, commit={"days": [stale_day2]})
    assert not [o for o in objects(cluster, place) if o.startswith("attempt-1/day=2")], (
        "the refused commit's staging deleted"
    )
    manifest = cluster.outputs("j").manifest("days")
    assert manifest.parts == ["attempt-1/day=1", "attempt-2/day=2"], "one part per step"
    assert [(c.commit, c.attempt) for c in manifest.commits] == [(1, 1), (2, 2)]
    assert ctx2.latest_checkpoint() == {"day": 2}
    newest = objects(cluster, f"{place}/{MANIFESTS}")[-1]
    assert newest == "0000000000000000002.json"
    assert read_paths(place, **options) == manifest.paths


def test_a_commit_is_all_or_nothing_with_its_checkpoint(
    any_cluster: Cluster, attempts: Attempts
) -> None:
    """A commit that cannot be written (its node is there, planted) writes no checkpoint
    either; a part that is not this attempt's staging, or holds nothing, is refused first."""
    cluster = any_cluster
    first = start(cluster, attempts, "j")
    ctx = context(cluster, first, "j")
    assert ctx.outputs is not None
    day1 = stage_day(cluster, ctx, 1)
    cluster.zk.create(f"{cluster.layout.output('j', 'days')}/{1:019d}", b"{}")
    with pytest.raises(Exception, match="exists"):
        ctx.checkpoint({"day": 1}, commit={"days": [day1]})
    assert ctx.latest_checkpoint() is None, "no checkpoint without its commit"
    cluster.zk.delete(f"{cluster.layout.output('j', 'days')}/{1:019d}")
    place = ctx.outputs.uri("days")
    for wrong, why in (
        (f"{place}/attempt-2/day=1", "not under this attempt's staging"),
        (f"{place}/elsewhere", "not under this attempt's staging"),
        (f"{place}/attempt-1/day=9", "nothing was written"),
        (f"{place}/attempt-1/../attempt-2", "'..'"),
    ):
        with pytest.raises(ConfigError, match=why):
            ctx.checkpoint({"day": 1}, commit={"days": [wrong]})
    with pytest.raises(ConfigError, match="list of paths"):
        ctx.checkpoint({"day": 1}, commit={"days": day1})  # type: ignore[dict-item]
    assert ctx.latest_checkpoint() is None
    # relative to the staging place works too
    assert ctx.checkpoint({"day": 1}, commit={"days": ["day=1"]}) == 1
    assert cluster.outputs("j").manifest("days").parts == ["attempt-1/day=1"]


def test_a_commits_node_stays_bounded() -> None:
    many = OutputCommit(
        version=None,
        output="days",
        commit=1,
        attempt=1,
        parts=[f"attempt-1/p{i}" for i in range(MAX_PARTS + 1)],
        committed="2026-11-28T00:00:00.000Z",
    )
    with pytest.raises(TooLarge, match="parts"):
        many.checked_bytes()
    long = OutputCommit(
        version=None,
        output="days",
        commit=1,
        attempt=1,
        parts=[f"attempt-1/{'x' * 1000}-{i}" for i in range(60)],
        committed="2026-11-28T00:00:00.000Z",
    )
    with pytest.raises(TooLarge, match="commit their directory"):
        long.checked_bytes()
    fine = OutputCommit(
        version=None,
        output="days",
        commit=3,
        attempt=2,
        parts=["attempt-2/day=3"],
        committed="2026-11-28T00:00:00.000Z",
    )
    assert OutputCommit.from_znode(fine.checked_bytes(), None, "/p") == fine
    for garbage in (
        {**json.loads(fine.to_bytes()), "parts": ["attempt-1/day=3"]},  # another attempt's
        {**json.loads(fine.to_bytes()), "parts": ["attempt-2/../x"]},
        {**json.loads(fine.to_bytes()), "parts": [3]},
        {**json.loads(fine.to_bytes()), "parts": "attempt-2/day=3"},
    ):
        with pytest.raises(CorruptRecord):
            OutputCommit.from_znode(json.dumps(garbage).encode(), None, "/p")


def test_parts_of_one_directory_are_looked_at_together_and_a_missing_one_refused(
    any_cluster: Cluster, attempts: Attempts
) -> None:
    """A commit of many files of one directory (on S3: one listing, not a request each): each
    must hold data, a directory part counts if anything is under it."""
    cluster = any_cluster
    ctx = context(cluster, start(cluster, attempts, "j"), "j")
    assert ctx.outputs is not None
    staging = ctx.outputs.stage("days")
    for n in range(3):
        write_data(cluster, f"{staging}/day=1", f"part-{n}.json", b"[1]")
    write_data(cluster, f"{staging}/day=1/sub", "x.json", b"[1]")
    files = [f"{staging}/day=1/part-{n}.json" for n in range(3)]
    for missing in (f"{staging}/day=1/part-3.json", f"{staging}/day=1/part-", f"{staging}/day"):
        with pytest.raises(ConfigError, match="nothing was written"):
            ctx.checkpoint({"day": 1}, commit={"days": [*files, missing]})
    assert ctx.latest_checkpoint() is None
    committed = [*files, f"{staging}/day=1/sub"]
    assert ctx.checkpoint({"day": 1}, commit={"days": committed}) == 1
    assert ctx.outputs.paths("days") == committed


MANY_STEPS = 300
#: the same on S3 (moto, in this process: 0.1 s of CPU a commit): past a power of two, where
#: the chain of files a reader reads grows
S3_STEPS = 70


def test_manifest_files_grow_as_n_log_n_and_every_reader_sees_each_commit_once(
    any_cluster: Cluster, attempts: Attempts
) -> None:
    """A commit per step for a few hundred steps (on S3, past the power of two at 64: the same
    code over another filesystem, at 0.1 s of CPU a commit): the manifest files take
    O(n log n) bytes (counted in storage: each is written once, create-only), not the O(n^2) of
    a whole manifest per commit; after every commit a reader without ZooKeeper reads at most
    log2(n) + 1 files and gets every committed part once, in order. A file a dead driver never
    wrote is written by the next commit whose chain reads it; until then readers see the
    commits before it."""
    cluster = any_cluster
    steps = S3_STEPS if cluster.config.storage_url.startswith("s3://") else MANY_STEPS
    turn = 2 ** int(math.log2(steps))  # the chain gains a file after it
    ctx = context(cluster, start(cluster, attempts, "j"), "j")
    assert ctx.outputs is not None
    staging = ctx.outputs.stage("days")
    place = ctx.outputs.uri("days")
    options = cluster.config.storage_options
    committed: list[str] = []
    for step in range(1, steps + 1):
        write_data(cluster, f"{staging}/s={step}", "p.json", b"[1]")
        commit = ctx.checkpoint({"step": step}, commit={"days": [f"{staging}/s={step}"]})
        committed.append(f"{place}/attempt-1/s={step}")
        if step == 2:  # as if the driver died between its commit and the file
            cluster.storage.fs.rm_file(
                cluster.storage.path_of(f"{place}/{MANIFESTS}/{manifest_name(commit)}")
            )
            assert read_paths(place, **options) == committed[:1], "the commits before it"
            continue
        if step <= 4 or step in (turn - 1, turn, turn + 1) or step % 50 == 0:
            assert read_paths(place, **options) == committed, f"after step {step}"
    files = cluster.storage.list(cluster.storage.key_of(f"{place}/{MANIFESTS}"))
    written = sum(len(cluster.storage.fs.cat_file(cluster.storage.path_of(f.uri))) for f in files)
    whole = len(json.dumps(cluster.outputs("j").manifest("days").as_dict(), indent=1))
    bound = (math.log2(steps) / 2 + 2) * whole
    assert written <= bound, (
        f"{written} bytes of manifest files for {steps} commits, over {bound:.0f} "
        f"((log2 n) / 2 + 2 times the whole manifest, {whole} bytes)"
    )
    assert len(files) == steps, "the file the dead driver left out written since"
    assert len(chain(steps)) <= math.log2(steps) + 1
    assert read_paths(place, **options) == committed == cluster.outputs("j").manifest("days").paths
    shown = run(cluster.config, "outputs", "paths", "j", "days", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == committed


@pytest.mark.parametrize("outcome", [SUCCEEDED, FAILED])
def test_the_jobs_end_keeps_a_succeeded_jobs_output_and_drops_a_failed_ones(
    any_cluster: Cluster, attempts: Attempts, outcome: str
) -> None:
    cluster = any_cluster
    first = start(cluster, attempts, "j")
    ctx = context(cluster, first, "j")
    assert ctx.outputs is not None
    ctx.checkpoint({"day": 1}, commit={"days": [stage_day(cluster, ctx, 1)]})
    stage_day(cluster, ctx, 2)  # staged, never committed
    place = ctx.outputs.uri("days")
    first.end()
    cluster.results.create_dirty("j", outcome, attempts=1)
    assert clean_up(cluster, "j")
    assert cluster.zk.exists(cluster.layout.job_dir("j")) is None
    result = cluster.results.get("j")
    assert result is not None
    if outcome == SUCCEEDED:
        assert (result.outputs or {}) == {"output.days": place}
        assert objects(cluster, place) == [
            "_manifests/0000000000000000001.json",
            "attempt-1/day=1/part-0.json",
            "attempt-1/day=1/part-1.json",
        ], "kept: the committed part and its manifest, not the uncommitted day 2"
    else:
        assert not result.outputs
        assert objects(cluster, place) == []


def test_an_output_read_as_the_cleanup_deletes_its_records_is_read_whole_from_its_manifest(
    any_cluster: Cluster, attempts: Attempts
) -> None:
    """A SUCCEEDED job's cleanup records its kept outputs in its result and writes their
    manifest files, then deletes its records node by node. A reader between two of those
    deletes (a commit gone, the output's record and a later commit still there) got a manifest
    "from zookeeper" with the first commit's parts missing; once the output's record was gone
    too, "job j has no output 'days'" (seen by a poll of ``outputs list``). It reads the kept
    output from its manifest files, whole, at every point of the deletion."""
    cluster = any_cluster
    first = start(cluster, attempts, "j")
    ctx = context(cluster, first, "j")
    assert ctx.outputs is not None
    for day in (1, 2):
        ctx.checkpoint({"day": day}, commit={"days": [stage_day(cluster, ctx, day)]})
    place = ctx.outputs.uri("days")
    whole = [f"{place}/attempt-1/day={day}" for day in (1, 2)]
    first.end()
    cluster.results.create_dirty("j", SUCCEEDED, attempts=1)
    release_for_cleanup(cluster.artifacts("j"), cluster.results, fence=None)
    output = cluster.layout.output("j", "days")
    commits = [
        f"{output}/{checkpoint_node_name(c)}" for c in cluster.outputs("j").commit_ids("days")
    ]
    assert len(commits) == 2

    def read() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        listed = run(cluster.config, "outputs", "list", "j", "--format", "json")
        shown = run(cluster.config, "outputs", "show", "j", "days", "--format", "json")
        assert listed.returncode == 0 and shown.returncode == 0, (listed.stderr, shown.stderr)
        return json.loads(listed.stdout), json.loads(shown.stdout)

    cluster.zk.delete(commits[0])  # the cleanup's first delete under the output
    listed, shown = read()
    assert shown["from"] == "manifest" and shown["paths"] == whole, shown
    assert [(o["name"], o["commits"], o["from"]) for o in listed] == [("days", 2, "manifest")]
    cluster.zk.delete(commits[1])
    cluster.zk.delete(output)  # the output's record gone, the job's others still there
    listed, shown = read()
    assert shown["from"] == "manifest" and shown["paths"] == whole, shown
    assert [(o["name"], o["commits"], o["from"]) for o in listed] == [("days", 2, "manifest")]


def test_staging_a_dead_attempt_never_committed_is_lingering_and_cleaned_up(
    any_cluster: Cluster, attempts: Attempts
) -> None:
    """A leader that died before its sweep: ``handles lingering`` finds the staged part of the
    dead attempt (never a committed one), ``handles cleanup`` deletes it; while a driver runs
    nothing of the job's outputs is lingering."""
    cluster = any_cluster
    first = start(cluster, attempts, "j")
    ctx = context(cluster, first, "j")
    assert ctx.outputs is not None
    ctx.checkpoint({"day": 1}, commit={"days": [stage_day(cluster, ctx, 1)]})
    stage_day(cluster, ctx, 2)
    place = ctx.outputs.uri("days")

    def lingering() -> list[dict[str, Any]]:
        shown = run(cluster.config, "handles", "lingering", "--min-age", "0s", "--format", "json")
        assert shown.returncode == 0, shown.stderr
        found = json.loads(shown.stdout)["findings"]
        return [f for f in found if f["kind"] == "output-staging"]

    assert lingering() == [], "a driver runs: its staging is its own"
    first.end()
    found = lingering()
    assert sorted(f["target"] for f in found) == [
        f"{place}/attempt-1/day=2/part-{n}.json" for n in range(2)
    ]
    assert all(f["job_id"] == "j" for f in found)
    cleaned = run(cluster.config, "handles", "cleanup", "--min-age", "0s", "--yes")
    assert cleaned.returncode == 0, cleaned.stderr
    assert lingering() == []
    assert [o for o in objects(cluster, place) if not o.startswith("_")] == [
        "attempt-1/day=1/part-0.json",
        "attempt-1/day=1/part-1.json",
    ]


def test_deleting_an_output_removes_its_records_then_its_data(
    any_cluster: Cluster, attempts: Attempts
) -> None:
    cluster = any_cluster
    first = start(cluster, attempts, "j")
    ctx = context(cluster, first, "j")
    assert ctx.outputs is not None
    ctx.checkpoint({"day": 1}, commit={"days": [stage_day(cluster, ctx, 1)]})
    place = ctx.outputs.uri("days")
    assert objects(cluster, place)
    ctx.outputs.delete("days")
    assert cluster.zk.exists(cluster.layout.output("j", "days")) is None
    assert cluster.artifacts("j").get("output.days") is None
    assert objects(cluster, place) == []
    shown = run(cluster.config, "outputs", "show", "j", "days")
    assert shown.returncode == 4, shown.stderr
    assert shown.stderr.strip().endswith("job j has no output 'days'"), shown.stderr
    assert "Traceback" not in shown.stderr
    listed = run(cluster.config, "outputs", "list", "nobody", "--format", "json")
    assert listed.returncode == 4 and "no job 'nobody'" in listed.stderr, listed.stderr
