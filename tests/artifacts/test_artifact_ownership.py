"""zkstore deletes only what it created (invariant 10), over local storage and a moto S3 server.

- artifact roots never overlap the storage root (nor each other): the configuration is refused
  by the library, the daemon and every command that takes ``--artifact-root``;
- paths are resolved (symlinks included) before any check, and nothing is deleted through a
  symlink: not at registration, not at release, not in the cleanup's sweep;
- two jobs' artifacts never overlap, live or kept, whatever the spelling of the URI.

Every test here but the sweep's failed on d1eeb4d (the check there protected URIs strictly under
the storage root only, followed links, and compared one job's artifacts with its own alone).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from recovery.cli.main import cli
from recovery.driver.artifact_registry import JobArtifacts
from tests.cli import connection
from tests.servers import S3Server
from tests.stand_in_attempts import ctx_artifacts
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up
from zkstore.config import StoreConfig
from zkstore.errors import HandleExists, UntrustedPayload
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.job_artifacts import ATTEMPT, JOB, Artifact
from zkstore.payloads.artifacts import ArtifactRootRefused, ArtifactUriRefused
from zkstore.records.job_states import FAILED, SUCCEEDED
from zkstore.records.strict import utc_now

pytestmark = pytest.mark.integration


def noop(ctx: Any) -> None:
    return None


def plant(cluster: Cluster, job_id: str, name: str, uri: str) -> None:
    """An artifact record written into ZooKeeper by hand (anybody may, under the open ACL)."""
    cluster.zk.ensure_path(cluster.layout.artifacts(job_id))
    record = Artifact(
        version=None, name=name, uri=uri, scope=ATTEMPT, attempt=1, registered=utc_now()
    )
    cluster.zk.create(cluster.layout.artifact(job_id, name), record.to_bytes())


def submitted(cluster: Cluster, *job_ids: str) -> None:
    """Jobs whose definitions (payloads) are in storage: what a bad release would delete."""
    for job_id in job_ids:
        cluster.jobs.submit(JobDefinition.for_function(job_id, noop))


def payloads_intact(cluster: Cluster, *job_ids: str) -> None:
    for job_id in job_ids:
        entry = cluster.jobs.recover(job_id, lock=False)
        assert entry.state.job_id == job_id, f"{job_id}'s definition is readable"


@pytest.fixture
def s3(s3_server: S3Server) -> Iterator[S3Server]:
    yield s3_server


# -- 1. roots that overlap the storage root --------------------------------------------------


def test_a_local_root_overlapping_the_storage_root_is_refused(
    config: StoreConfig, tmp_path: Path
) -> None:
    d = tmp_path / "d"
    storage = d / "storage"
    storage.mkdir(parents=True)
    (d / "link").symlink_to(storage)
    config = config.with_changes(storage_url=f"file://{storage}")
    refused = {
        f"file://{d}": "contains the storage root",
        f"file://{storage}": "is the storage root",
        f"file://{storage}/": "is the storage root",
        f"local://{storage}": "is the storage root",
        f"file://{storage}/default/artifacts": "lies inside the storage root",
        f"file://{d}/link": "is the storage root",  # a symlink to it
        f"file://{d}/link/default": "lies inside the storage root",
        f"file://{d}/STORAGE": "is the storage root",  # compared ignoring case: the safe side
    }
    for root, why in refused.items():
        with pytest.raises(ArtifactRootRefused, match=why):
            Cluster.open(config.with_changes(artifact_roots=(root,)))
    with pytest.raises(ArtifactRootRefused, match="lies inside the artifact root"):
        Cluster.open(config.with_changes(artifact_roots=(f"file://{d}/a", f"file://{d}/a/b")))
    beside = (f"file://{d}/storage2", f"file://{d}/scratch")  # "storage2" starts like "storage"
    with Cluster.open(config.with_changes(artifact_roots=beside)) as cluster:
        assert cluster.artifact_space.roots == (f"file://{storage}", *beside)


def test_an_s3_root_overlapping_the_storage_root_is_refused(
    s3: S3Server, config: StoreConfig
) -> None:
    bucket = s3.new_bucket()
    config = config.with_changes(storage_url=f"s3://{bucket}/zk", storage_options=s3.options())
    refused = {
        f"s3://{bucket}": "contains the storage root",
        f"s3a://{bucket}/zk": "is the storage root",  # the same filesystem, another name
        f"s3://{bucket}/zk/": "is the storage root",
        f"s3://{bucket}/zk/default": "lies inside the storage root",
        f"s3://{bucket}/ZK": "is the storage root",
        f"S3://{bucket.upper()}/zk/x": "lies inside the storage root",
    }
    for root, why in refused.items():
        with pytest.raises(ArtifactRootRefused, match=why):
            Cluster.open(config.with_changes(artifact_roots=(root,)))
    with Cluster.open(
        config.with_changes(artifact_roots=(f"s3://{bucket}/zk2", f"s3a://{bucket}-other/zk"))
    ) as cluster:
        assert cluster.artifact_space.roots[1:] == (f"s3://{bucket}/zk2", f"s3://{bucket}-other/zk")


def test_the_storage_root_itself_is_never_an_artifact(any_cluster: Cluster, tmp_path: Path) -> None:
    """The registration of d1eeb4d's report: with the root beside the storage root now (the
    report's root above it is refused at start), no spelling of the storage root, of a place
    in it or above it is accepted, and the other jobs' payloads stay."""
    cluster = any_cluster
    root = cluster.storage.root_url
    protocol, path = root.split("://", 1)
    beside = f"{root}-scratch"
    config = cluster.config.with_changes(artifact_roots=(beside,))
    submitted(cluster, "a", "b")
    with Cluster.open(config) as scoped:
        artifacts = ctx_artifacts(scoped, "j")
        spellings = [root, f"{root}/", f"{root}/default", f"{root}/default/jobs/a", f"{root}//x"]
        spellings += [f"{protocol.upper()}://{path}", f"{beside}/../{path.rsplit('/', 1)[-1]}"]
        spellings += [f"{beside}/%2e%2e/x", f"{root}/default/artifacts/j/%2e%2e/%2e%2e/jobs"]
        if protocol == "file":
            spellings += [path, f"file:{path}", f"local://{path}", f"{path}/default/artifacts"]
        else:
            spellings += [f"s3a://{path}", f"s3a://{path}/default/jobs/a"]
        for uri in spellings:
            with pytest.raises(ArtifactUriRefused):
                artifacts.register("evil", uri)
        assert artifacts.list() == []
        for uri in (root, f"{root}/", f"{root}/default"):
            plant(scoped, "j", "planted", uri)
            with pytest.raises(UntrustedPayload):
                artifacts.release("planted")
            scoped.zk.delete(scoped.layout.artifact("j", "planted"))
    payloads_intact(cluster, "a", "b")


# -- 2. symbolic links -------------------------------------------------------------------------


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """An artifact root with a link in it to a directory elsewhere holding precious data."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("not zkstore's")
    root = tmp_path / "scratch"
    root.mkdir()
    (root / "linkdir").symlink_to(elsewhere)
    return root


def test_a_symlink_in_a_root_cannot_lead_a_registration_elsewhere(
    cluster: Cluster, scratch: Path, tmp_path: Path
) -> None:
    config = cluster.config.with_changes(artifact_roots=(f"file://{scratch}",))
    (scratch / "inside").mkdir()
    (scratch / "to-inside").symlink_to(scratch / "inside")
    (scratch / "to-storage").symlink_to(tmp_path / "storage")
    with Cluster.open(config) as scoped:
        artifacts = ctx_artifacts(scoped, "j")
        for uri in (
            f"{scratch}/linkdir/precious.txt",
            f"file://{scratch}/linkdir/new",
            f"{scratch}/linkdir",
            f"{scratch}/to-storage/default/jobs",
        ):
            with pytest.raises(
                ArtifactUriRefused, match=r"outside the artifact roots|in the storage"
            ):
                artifacts.register("x", uri)
        # A link that stays inside the root is resolved: the real place is what is recorded.
        staged = artifacts.register("staged", f"{scratch}/to-inside/staged")
        assert staged == f"file://{scratch}/inside/staged"
        (scratch / "inside" / "staged").mkdir()
        (scratch / "inside" / "staged" / "f").write_text("ours")
        artifacts.release("staged")
        assert not (scratch / "inside" / "staged").exists()
    assert (tmp_path / "elsewhere" / "precious.txt").read_text() == "not zkstore's"


def test_nothing_is_deleted_through_a_symlink(
    cluster: Cluster, scratch: Path, tmp_path: Path
) -> None:
    """A link put on the way after registration refuses the release; a link inside the tree or
    at its place is removed, never followed; a planted record through a link is refused, and
    the job's cleanup (as after ``jobs cancel``) goes on without deleting anything there."""
    elsewhere = tmp_path / "elsewhere"
    config = cluster.config.with_changes(artifact_roots=(f"file://{scratch}",))
    with Cluster.open(config) as scoped:
        artifacts = ctx_artifacts(scoped, "j")
        swapped = Path(artifacts.register("swapped", f"{scratch}/run/out").removeprefix("file://"))
        swapped.mkdir(parents=True)
        (swapped / "part").write_text("ours")
        # The job (or anybody) replaces a directory on the way with a link elsewhere.
        (elsewhere / "out").mkdir()
        (elsewhere / "out" / "part").write_text("not zkstore's")
        os.rename(scratch / "run", scratch / "run-moved")
        (scratch / "run").symlink_to(elsewhere)
        with pytest.raises(UntrustedPayload, match="symbolic link"):
            artifacts.release("swapped")
        assert (elsewhere / "out" / "part").read_text() == "not zkstore's"
        inner = Path(artifacts.register("inner", f"{scratch}/inner").removeprefix("file://"))
        inner.mkdir()
        (inner / "link-to-elsewhere").symlink_to(elsewhere)
        (inner / "link-to-file").symlink_to(elsewhere / "precious.txt")
        artifacts.release("inner")
        assert not inner.exists()
        at = Path(artifacts.register("at", f"{scratch}/at").removeprefix("file://"))
        at.symlink_to(elsewhere)  # the artifact itself is a link: the link goes, not its target
        artifacts.release("at")
        assert not at.is_symlink() and not at.exists()
        plant(scoped, "j", "planted", f"file://{scratch}/linkdir/precious.txt")
        with pytest.raises(UntrustedPayload):
            artifacts.release("planted")
        scoped.results.create_dirty("j", FAILED, attempts=1)
        assert clean_up(scoped, "j")
    assert (elsewhere / "precious.txt").read_text() == "not zkstore's"
    assert (elsewhere / "out" / "part").read_text() == "not zkstore's"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["out", "precious.txt"]


def test_the_cleanup_sweep_follows_no_symlink_in_the_jobs_prefix(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Held on d1eeb4d too (fsspec's find lists a link without descending, its rm unlinks it):
    kept as the sweep now deletes through :func:`zkstore.payloads.storage._delete_local`."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "deep").mkdir(parents=True)
    (elsewhere / "deep" / "precious.txt").write_text("not zkstore's")
    artifacts = ctx_artifacts(cluster, "j")
    staging = Path(artifacts.register("staging").removeprefix("file://"))
    staging.mkdir(parents=True)
    (staging / "link").symlink_to(elsewhere)
    prefix = Path(cluster.artifact_space.job_prefix("j").removeprefix("file://"))
    (prefix / "stray-link").symlink_to(elsewhere)
    (prefix / "stray-file-link").symlink_to(elsewhere / "deep" / "precious.txt")
    cluster.results.create_dirty("j", FAILED, attempts=1)
    assert clean_up(cluster, "j")
    assert not prefix.exists()
    assert (elsewhere / "deep" / "precious.txt").read_text() == "not zkstore's"


# -- 3. two jobs' artifacts --------------------------------------------------------------------


@pytest.fixture
def shared(any_cluster: Cluster, tmp_path: Path) -> Iterator[tuple[Cluster, str]]:
    """A cluster with one extra root shared by every job (a bucket prefix on S3)."""
    root = f"{any_cluster.storage.root_url}-shared"
    if root.startswith("file://"):
        Path(root.removeprefix("file://")).mkdir()
    config = any_cluster.config.with_changes(artifact_roots=(root,))
    with Cluster.open(config) as cluster:
        yield cluster, root


def write(cluster: Cluster, uri: str, data: bytes = b"data") -> None:
    fs, path = cluster.storage.fs, uri.split("://", 1)[1]
    if uri.startswith("file://"):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    fs.pipe_file(path, data)


def read(cluster: Cluster, uri: str) -> bytes:
    data: bytes = cluster.storage.fs.cat_file(uri.split("://", 1)[1])
    return data


def test_a_job_cannot_register_another_jobs_kept_output(shared: tuple[Cluster, str]) -> None:
    cluster, root = shared
    a = ctx_artifacts(cluster, "a")
    report = a.register("report", f"{root}/reports/daily", scope=JOB, keep=True)
    write(cluster, f"{report}/part-0")
    a.finish("report")
    cluster.results.create_dirty("a", SUCCEEDED, attempts=1)
    assert clean_up(cluster, "a")
    result = cluster.results.get("a")
    assert result is not None and result.outputs == {"report": report}
    b = ctx_artifacts(cluster, "b")
    for uri in (
        report,
        f"{root}/reports/daily/",
        f"{root}/reports/daily/part-1",  # below it
        f"{root}/reports",  # above it
        f"{root}/Reports/Daily",  # another case: the safe side
    ):
        with pytest.raises(HandleExists, match="overlaps artifact 'report' of job a"):
            b.register("mine", uri)
    assert b.list() == []
    assert read(cluster, f"{report}/part-0") == b"data"
    # Once the result goes (retention, jobs forget) the output is nobody's: still, a job may
    # only register a place that holds no data, so it cannot take it over and delete it.
    runner = CliRunner()
    words = ["jobs", "forget", "a", "--yes", *connection(cluster.config)]
    forgot = runner.invoke(cli, words)
    assert forgot.exit_code == 0, forgot.output
    with pytest.raises(ArtifactUriRefused, match="holds data already"):
        b.register("mine", report)
    b.register("beside", f"{root}/reports/daily-b")
    assert read(cluster, f"{report}/part-0") == b"data"


def test_a_job_cannot_register_over_another_jobs_live_artifact(
    shared: tuple[Cluster, str],
) -> None:
    cluster, root = shared
    a, b = ctx_artifacts(cluster, "a"), ctx_artifacts(cluster, "b")
    parts = a.register("parts", f"{root}/runs/x/parts", scope=JOB)
    for uri in (parts, f"{root}/runs/x", f"{root}/runs/x/parts/p-0", f"{root}/runs/X/PARTS"):
        with pytest.raises(HandleExists, match="overlaps artifact 'parts' of job a"):
            b.register("theirs", uri)
    b.register("beside", f"{root}/runs/x/parts-b")  # a name that starts the same is beside
    write(cluster, f"{parts}/p-0")
    a.release("parts")
    b.register("now", f"{root}/runs/x/parts")  # released: free again
    # A record planted for job b at job a's place: its release deletes nothing.
    other = a.register("other", f"{root}/runs/y")
    write(cluster, f"{other}/keep-me")
    plant(cluster, "b", "planted", other)
    with pytest.raises(UntrustedPayload, match="claimed by artifact 'other' of job a"):
        b.release("planted")
    assert read(cluster, f"{other}/keep-me") == b"data"


def test_overlapping_registrations_racing_never_both_succeed(
    shared: tuple[Cluster, str],
) -> None:
    cluster, root = shared
    for round_ in range(5):
        places = [f"{root}/race-{round_}", f"{root}/race-{round_}/inner", f"{root}/race-{round_}"]
        jobs = [ctx_artifacts(cluster, f"r{round_}-{i}") for i in range(len(places))]
        won, lost = race(list(zip(jobs, places, strict=True)))
        assert len(won) == 1 and len(lost) == 2, (won, lost)


def race(calls: list[tuple[JobArtifacts, str]]) -> tuple[list[str], list[HandleExists]]:
    """Register every (job, URI) at the same moment; the URIs won and the overlaps refused."""
    barrier = threading.Barrier(len(calls))
    won: list[str] = []
    lost: list[HandleExists] = []

    def run(artifacts: JobArtifacts, uri: str) -> None:
        barrier.wait()
        try:
            won.append(artifacts.register("x", uri))
        except HandleExists as exc:
            lost.append(exc)

    threads = [threading.Thread(target=run, args=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return won, lost


# -- the user's side: the daemon and the commands refuse such roots ----------------------------


def test_a_garbage_claim_is_taken_as_claimed_and_deletes_nothing(
    shared: tuple[Cluster, str],
) -> None:
    """A claim node holding garbage (planted: the open ACL lets anybody write) refuses the
    place to every registration and lets no release delete its data: the safe side both ways."""
    cluster, root = shared
    place = f"{root}/runs/garbage"
    claims = cluster.artifacts("g").claims
    mark = f"{claims.nodes(place)[-1]}/="
    cluster.zk.ensure_path(mark)
    cluster.zk.set(mark, b'{"job": NaN}')
    g = ctx_artifacts(cluster, "g")
    with pytest.raises(HandleExists, match="unreadable claim"):
        g.register("out", place)
    write(cluster, f"{place}/keep-me")
    plant(cluster, "g", "planted", place)
    with pytest.raises(UntrustedPayload, match="no claim"):
        g.release("planted")
    assert read(cluster, f"{place}/keep-me") == b"data"
