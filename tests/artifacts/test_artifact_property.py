"""The ownership property of invariant 10, over random sequences of what jobs do with artifacts.

After any sequence of registrations (in every spelling: schemes and their aliases, case,
trailing slashes, ``//``, ``.``, ``..``, percent-encoding; places in, above, beside and through
symlinks to the storage root, other jobs' prefixes, existing data, links at every level),
writes, finishes, releases, records planted in ZooKeeper and cleanups, with artifact roots
above, below, beside and through links to the storage root:

- every file that zkstore did not create is still there, byte for byte (a file the test wrote
  into a job's artifact may go only with that artifact's release or its job's cleanup, and a
  kept output stays; files under a job's own prefixes may go only with that job's cleanup);
- a configuration is refused exactly when a root overlaps the storage root or another root;
- a registration is accepted only at a place an independent oracle allows (real path under a
  root, the job's own prefix in the storage root, no overlap with another job's live artifact
  or kept output), and a plain, fresh, free place under a root is always accepted.

The code under test is the real one: ``ctx.artifacts`` (:class:`recovery.artifacts.
JobArtifacts`) over :class:`zkstore.jobs.job_artifacts.ArtifactStore` and
:class:`zkstore.payloads.artifacts.ArtifactSpace`, the job's cleanup, a real ZooKeeper, local disk
and a moto S3 server. The oracle is written from the contract, not from the code: real paths from
``os.path.realpath``, overlaps as prefixes of case-folded segments.

Examples per run: ``ZKSTORE_OWNERSHIP_EXAMPLES`` (default 100 on local disk and 30 on S3, where
a new cluster's S3 sessions cost a third of a second; each is 10-25 s here). For a long run
by hand: ``ZKSTORE_OWNERSHIP_EXAMPLES=3000 pytest tests/test_artifact_property.py
--hypothesis-show-statistics``. Steps are weighted towards what makes jobs meet (two jobs
mostly, a few hot places, places relative to another job's artifact, a link put on the way
just before a release): about 70% of local examples register something, 40% meet another
job's artifact. Measured against mutations of the code at the default counts: no claims,
case-sensitive claims, fsspec's ``rm`` instead of the no-follow delete, no claim check before a
delete, no freshness check, no own-prefix rule: each found by the local property under 3 of 3
seeds, URIs not resolved (roots still are) under 2 of 3; on S3 the five that apply there, each
under the seed tried.
"""

from __future__ import annotations

import os
import re
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context, event

from recovery.driver.artifact_registry import JobArtifacts
from recovery.driver.signals import AttemptSuperseded
from tests.helpers import examples as scaled
from tests.servers import S3Server
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up
from zkstore.config import StoreConfig
from zkstore.errors import (
    ConfigError,
    HandleExists,
    HandleNotFound,
    UntrustedPayload,
    WrongState,
)
from zkstore.jobs.job_artifacts import ATTEMPT, JOB, Artifact
from zkstore.payloads.artifacts import ArtifactRootRefused, check_roots
from zkstore.records.job_states import FAILED, SUCCEEDED
from zkstore.records.strict import utc_now
from zkstore.zookeeper.ops import Fence
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration

JOBS = ("a", "b", "c")
NAMES = ("n1", "n2", "n3")
PLANTED = ("p1", "p2")
#: spellings the artifact URI parser refuses whatever the place
REFUSED_SPELLINGS = frozenset({"double", "dot", "dotdot", "pct", "pctslash"})


def note(what: str) -> None:
    """Count ``what`` in Hypothesis's statistics (``--hypothesis-show-statistics``)."""
    if currently_in_test_context():
        event(what)


def examples(full: int) -> int:
    """``ZKSTORE_OWNERSHIP_EXAMPLES`` if set (to hunt with many), else the suite's share of
    ``full`` (:func:`tests.helpers.examples`)."""
    return int(os.environ.get("ZKSTORE_OWNERSHIP_EXAMPLES", scaled(full)))


# -- the worlds: a tree of files, links and roots ---------------------------------------------


@dataclass(frozen=True)
class Spot:
    """A place as the oracle sees it: the protocol family and its real path's segments."""

    family: str
    segments: tuple[str, ...]

    def folded(self) -> tuple[str, ...]:
        return tuple(s.casefold() for s in self.segments)

    def overlaps(self, other: Spot) -> bool:
        n = min(len(self.segments), len(other.segments))
        return self.family == other.family and self.folded()[:n] == other.folded()[:n]

    def under(self, root: Spot) -> bool:
        n = len(root.segments)
        return (
            self.family == root.family
            and len(self.segments) > n
            and self.segments[:n] == root.segments
        )


@dataclass
class Owned:
    """A file (or link) in the world and who may delete it: None (nobody: zkstore did not
    create it), ("prefix", job) (zkstore's own, for that job's cleanup), or (job, name) (the
    test wrote it into that artifact)."""

    data: bytes
    owner: tuple[str, str] | None


class World:
    """What a world offers the property: roots, places, spellings, reading every file."""

    kind = ""
    storage_url = ""
    storage_options: dict[str, Any] = {}
    root_candidates: tuple[str, ...] = ()
    #: roots most examples use: overlaps between jobs happen there
    common_roots: tuple[tuple[str, ...], ...] = ()
    places: tuple[str, ...] = ()
    #: places drawn half of the time: where jobs meet, and the places that must be refused
    hot_places: tuple[str, ...] = ()
    spellings: tuple[str, ...] = ()
    plain_spellings: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.files: dict[str, Owned] = {}

    def spot(self, uri: str) -> Spot:
        raise NotImplementedError

    def place_uri(self, place: str) -> str:
        raise NotImplementedError

    def spell(self, place_uri: str, spelling: str) -> str:
        raise NotImplementedError

    def read_all(self) -> dict[str, bytes]:
        raise NotImplementedError

    def write(self, uri: str, name: str, data: bytes) -> str:
        raise NotImplementedError

    def exists(self, uri: str) -> bool:
        raise NotImplementedError

    def link(self, uri: str, name: str, target: str) -> str | None:
        return None

    def swap(self, uri: str, root: str, target: str, tag: str) -> dict[str, str] | None:
        """Replace the directory holding ``uri`` (below ``root``) by a link to ``target``, as a
        hostile job would after registering; returns the paths moved (old: new)."""
        return None

    def plain(self, spelling: str) -> bool:
        return spelling not in REFUSED_SPELLINGS


class LocalWorld(World):
    kind = "file"
    root_candidates = (
        ".",  # contains the storage root
        "storage/default",  # inside it
        "storage-link",  # the storage root through a link
        "scratch",
        "scratch-link",  # scratch through a link: overlaps scratch
        "SCRATCH",  # scratch in another case: overlaps it (compared ignoring case)
        "outside/area",
    )
    common_roots = (
        ("scratch",),
        ("scratch", "outside/area"),
        ("scratch-link", "outside/area"),
    )
    hot_places = (
        "scratch/new{i}",
        "scratch/new{i}/deep",
        "scratch/run/out{i}",
        "scratch-link/run/out{i}",
        "scratch/NEW{i}",
        "scratch/existing",
        "scratch/existing/new{i}",
        "scratch/link-out/new{i}",
        "scratch-link/new{i}",
        "storage/default/artifacts/{job}/x{i}",
        "storage/default/artifacts/{job}/x{i}/deep",
        "storage/default/artifacts/{other}/x{i}",
        "outside/area/new{i}",
    )
    places = (
        ".",
        "precious.txt",
        "storage",
        "storage/default",
        "storage/default/jobs/a",
        "storage/default/artifacts/{job}",
        "storage/default/artifacts/{job}/x{i}",
        "storage/default/artifacts/{job}/x{i}/deep",
        "storage/default/artifacts/{other}/x{i}",
        "storage-link/default/artifacts/{job}/y{i}",
        "scratch",
        "scratch/new{i}",
        "scratch/new{i}/deep",
        "scratch/NEW{i}",
        "scratch/existing",
        "scratch/existing/new{i}",
        "scratch/sub/precious.txt",
        "scratch/link-out/new{i}",
        "scratch/link-in/new{i}",
        "scratch/link-storage/default/artifacts/{job}/z{i}",
        "scratch/dangling",
        "scratch-link/new{i}",
        "SCRATCH/new{i}",
        "outside/new{i}",
        "outside/area/new{i}",
    )
    spellings = (
        "path",
        "file",
        "file1",
        "local",
        "FILE",
        "slash",
        "double",
        "dot",
        "dotdot",
        "pct",
        "pctslash",
    )
    plain_spellings = ("path", "file")

    def __init__(self, base: Path, storage_via_link: bool) -> None:
        super().__init__()
        self.base = base
        tree = {
            "precious.txt": None,
            "storage/other.txt": None,
            "scratch/existing/precious.txt": None,
            "scratch/sub/precious.txt": None,
            "outside/precious.txt": None,
            "outside/area/precious.txt": None,
            # what a delete through a link would hit: the names artifacts have
            "outside/deep/precious.txt": None,
            "outside/x0/precious.txt": None,
            "outside/new0/precious.txt": None,
        }
        for job in JOBS:
            tree[f"storage/default/jobs/{job}/definition/p.pkl"] = ("prefix", job)
        for job in JOBS[:2]:
            tree[f"storage/default/artifacts/{job}/pre/f"] = ("prefix", job)
        for rel, owner in tree.items():
            path = base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            data = f"{rel}\n".encode()
            path.write_bytes(data)
            self.files[str(path)] = Owned(data, owner)
        links = {
            "scratch/link-out": "outside",
            "scratch/link-in": "scratch/sub",
            "scratch/link-storage": "storage",
            "scratch/dangling": "nowhere",
            "scratch-link": "scratch",
            "storage-link": "storage",
        }
        for rel, target in links.items():
            (base / rel).symlink_to(base / target)
            self.files[str(base / rel)] = Owned(str(base / target).encode(), None)
        storage = "storage-link" if storage_via_link else "storage"
        self.storage_url = f"file://{base / storage}"

    def spot(self, uri: str) -> Spot:
        path = re.sub(r"^(file|local)://|^file:", "", uri, flags=re.IGNORECASE)
        real = os.path.realpath(path)
        return Spot("file", tuple(s for s in real.split("/") if s))

    def place_uri(self, place: str) -> str:
        return f"file://{self.base}" if place == "." else f"file://{self.base / place}"

    def spell(self, place_uri: str, spelling: str) -> str:
        path = place_uri.removeprefix("file://")
        head, _, last = path.rpartition("/")
        return {
            "path": path,
            "file": f"file://{path}",
            "file1": f"file:{path}",
            "local": f"local://{path}",
            "FILE": f"FILE://{path}",
            "slash": f"file://{path}/",
            "double": f"file://{head}//{last}",
            "dot": f"file://{head}/./{last}",
            "dotdot": f"file://{path}/../{last}",
            "pct": f"file://{path}/%2e%2e/{last}",
            "pctslash": f"file://{head}%2F{last}",
        }[spelling]

    def read_all(self) -> dict[str, bytes]:
        found = {}
        for directory, dirs, files in os.walk(self.base):
            for name in dirs + files:
                path = os.path.join(directory, name)
                if os.path.islink(path):
                    found[path] = os.readlink(path).encode()
                elif os.path.isfile(path):
                    found[path] = Path(path).read_bytes()
        return found

    def write(self, uri: str, name: str, data: bytes) -> str:
        directory = Path(uri.removeprefix("file://"))
        directory.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(data)
        return os.path.join(os.path.realpath(directory), name)  # as a walk of the tree finds it

    def exists(self, uri: str) -> bool:
        return os.path.lexists("/" + "/".join(self.spot(uri).segments))

    def link(self, uri: str, name: str, target: str) -> str | None:
        directory = Path(uri.removeprefix("file://"))
        directory.mkdir(parents=True, exist_ok=True)
        (directory / name).symlink_to(self.base / target)
        return os.path.join(os.path.realpath(directory), name)

    def swap(self, uri: str, root: str, target: str, tag: str) -> dict[str, str] | None:
        real = os.path.realpath(uri.removeprefix("file://"))
        holder = os.path.dirname(real)
        top = os.path.realpath(root.removeprefix("file://"))
        if not holder.startswith(top + "/") or not os.path.isdir(holder):
            return None
        aside = f"{holder}.moved-{tag}"
        os.rename(holder, aside)
        os.symlink(self.base / target, holder)
        return {holder: aside}


_FILESYSTEMS: dict[str, Any] = {}


def _s3_filesystem(s3: S3Server) -> Any:
    """One s3fs filesystem per server for the test's own reads and writes (a new one costs a
    session, a third of a second)."""
    if s3.endpoint not in _FILESYSTEMS:
        import fsspec

        _FILESYSTEMS[s3.endpoint] = fsspec.filesystem(
            "s3", skip_instance_cache=True, use_listings_cache=False, **s3.options()
        )
    return _FILESYSTEMS[s3.endpoint]


class S3World(World):
    kind = "s3"
    root_candidates = (
        "s3://{B}",  # contains the storage root
        "s3://{B}/zk/sub",  # inside it
        "s3://{B}/ZK",  # the storage root in another case
        "s3a://{B}/zk",  # the storage root by another protocol name
        "s3://{B}/scratch",
        "s3a://{B}/scratch/",  # the same root, spelled otherwise
        "s3://{B}/scratch2",
        "s3://{B2}/x",
    )
    common_roots = (("s3://{B}/scratch",), ("s3://{B}/scratch", "s3://{B2}/x"))
    hot_places = (
        "{B}/scratch/new{i}",
        "{B}/scratch/new{i}/deep",
        "{B}/scratch/NEW{i}",
        "{B}/scratch/existing",
        "{B}/scratch/existing/new{i}",
        "{B}/zk/default/artifacts/{job}/x{i}",
        "{B}/zk/default/artifacts/{other}/x{i}",
        "{B2}/x/new{i}",
    )
    places = (
        "{B}",
        "{B}/zk",
        "{B}/zk/default",
        "{B}/zk/default/jobs/a",
        "{B}/zk/default/artifacts/{job}",
        "{B}/zk/default/artifacts/{job}/x{i}",
        "{B}/zk/default/artifacts/{job}/x{i}/deep",
        "{B}/zk/default/artifacts/{other}/x{i}",
        "{B}/scratch",
        "{B}/scratch/new{i}",
        "{B}/scratch/new{i}/deep",
        "{B}/scratch/NEW{i}",
        "{B}/Scratch/new{i}",
        "{B}/scratch/existing",
        "{B}/scratch/existing/new{i}",
        "{B}/scratch2/new{i}",
        "{B}/outside/new{i}",
        "{B2}/x/new{i}",
        "{B2}/x/existing",
    )
    spellings = ("s3", "s3a", "S3", "slash", "double", "dot", "dotdot", "pct", "pctslash")
    plain_spellings = ("s3",)

    def __init__(self, s3: S3Server) -> None:
        super().__init__()
        self.fs = _s3_filesystem(s3)
        self.bucket = f"b{uuid.uuid4().hex[:12]}"  # every example has buckets of its own
        self.other = f"{self.bucket}-2"
        for bucket in (self.bucket, self.other):
            self.fs.call_s3("create_bucket", Bucket=bucket)
        self.storage_url = f"s3://{self.bucket}/zk"
        self.storage_options = s3.options()
        B, B2 = self.bucket, self.other
        tree: dict[str, tuple[str, str] | None] = {
            f"{B}/precious": None,
            f"{B}/zk/other": None,
            f"{B}/scratch/existing/precious": None,
            f"{B}/outside/precious": None,
            f"{B2}/x/existing/precious": None,
        }
        for job in JOBS:
            tree[f"{B}/zk/default/jobs/{job}/definition/p.pkl"] = ("prefix", job)
        for job in JOBS[:2]:
            tree[f"{B}/zk/default/artifacts/{job}/pre/f"] = ("prefix", job)
        self.fs.pipe({key: f"{key}\n".encode() for key in tree})
        for key, owner in tree.items():
            self.files[key] = Owned(f"{key}\n".encode(), owner)

    def fill(self, template: str) -> str:
        return template.replace("{B2}", self.other).replace("{B}", self.bucket)

    def spot(self, uri: str) -> Spot:
        path = uri.split("://", 1)[1]
        return Spot("s3", tuple(s for s in path.split("/") if s))

    def place_uri(self, place: str) -> str:
        return f"s3://{self.fill(place)}"

    def spell(self, place_uri: str, spelling: str) -> str:
        path = place_uri.removeprefix("s3://")
        head, _, last = path.rpartition("/")
        if not head:
            head, last = path, ""
        return {
            "s3": f"s3://{path}",
            "s3a": f"s3a://{path}",
            "S3": f"S3://{path}",
            "slash": f"s3://{path}/",
            "double": f"s3://{head}//{last}",
            "dot": f"s3://{head}/./{last}",
            "dotdot": f"s3://{path}/../{last}",
            "pct": f"s3://{path}/%2e%2e/{last}",
            "pctslash": f"s3://{head}%2F{last}",
        }[spelling]

    def read_all(self) -> dict[str, bytes]:
        keys = [key for bucket in (self.bucket, self.other) for key in self.fs.find(bucket)]
        found: dict[str, bytes] = self.fs.cat(keys) if keys else {}
        return found

    def write(self, uri: str, name: str, data: bytes) -> str:
        key = f"{uri.split('://', 1)[1]}/{name}"
        self.fs.pipe_file(key, data)
        return key

    def exists(self, uri: str) -> bool:
        return bool(self.fs.exists("/".join(self.spot(uri).segments)))


# -- the steps -------------------------------------------------------------------------------


@dataclass
class Model:
    """What the oracle knows: live artifacts (job, name) -> (uri, keep, finished), kept outputs
    (uri -> job), planted records, cleaned jobs."""

    live: dict[tuple[str, str], tuple[str, bool, bool]] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    planted: dict[tuple[str, str], str] = field(default_factory=dict)
    cleaned: set[str] = field(default_factory=set)
    writes: int = 0


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each drawn with its weight (``one_of`` weighs branches alike)."""
    indexes = [i for i, (weight, _) in enumerate(choices) for _ in range(weight)]
    return st.sampled_from(indexes).flatmap(lambda i: choices[i][1])


def steps(world: type[World]) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Sequences of steps, weighted towards what makes jobs meet: two jobs mostly, places
    relative to the other job's artifacts (the same, below, above, in another case) half of the
    time, a few hot places, and links put on the way just before a release."""
    job = st.sampled_from(("a", "b", "a", "b", "c"))
    name = st.sampled_from(NAMES)
    place = weighted(
        (
            2,
            st.tuples(st.sampled_from(("@same", "@child", "@parent", "@upper")), st.integers(0, 3)),
        ),
        (2, st.tuples(st.sampled_from(("@child", "@upper")), st.integers(0, 3))),
        (3, st.tuples(st.sampled_from(world.hot_places), st.sampled_from((0, 0, 0, 1)))),
        (1, st.tuples(st.sampled_from(world.places), st.sampled_from((0, 1)))),
    )
    spelling = weighted(
        (3, st.sampled_from(world.plain_spellings)), (1, st.sampled_from(world.spellings))
    )
    register = st.tuples(
        st.just("register"),
        job,
        name,
        place,
        spelling,
        st.sampled_from((ATTEMPT, JOB)),
        st.booleans(),
    )
    step = weighted(
        (8, register),
        (2, st.tuples(st.just("release"), job, st.sampled_from(NAMES + PLANTED))),
        (2, st.tuples(st.just("release_live"), st.integers(0, 7))),
        (2, st.tuples(st.just("swap_release"), st.integers(0, 7), st.just("outside"))),
        (1, st.tuples(st.just("finish"), job, name)),
        (1, st.tuples(st.just("cleanup"), job, st.sampled_from((SUCCEEDED, FAILED)))),
        (
            1,
            st.tuples(
                st.just("plant"),
                job,
                st.sampled_from(PLANTED),
                weighted((1, place), (1, st.just(("@live", 0)))),
                spelling,
            ),
        ),
        (
            1,
            st.tuples(
                st.just("link"),
                job,
                name,
                st.sampled_from(("outside", "storage", "outside/precious.txt", "scratch/sub")),
            ),
        ),
        (
            1,
            st.tuples(
                st.just("swap_live"), st.integers(0, 7), st.sampled_from(("outside", "storage"))
            ),
        ),
    )
    return st.lists(step, min_size=8, max_size=16)


class Run:
    """One example: a configuration, its cluster, the model, and the checks after each step."""

    def __init__(self, world: World, cluster: Cluster) -> None:
        self.world = world
        self.cluster = cluster
        self.model = Model()
        self.spots: dict[str, Spot] = {}
        self.storage = world.spot(world.storage_url)
        self.roots = [world.spot(r) for r in cluster.config.artifact_roots]
        self.jobs = {}
        for job_id in JOBS:
            cluster.zk.ensure_path(cluster.layout.job_dir(job_id))
            self.jobs[job_id] = JobArtifacts(
                cluster.artifacts(job_id),
                attempt=1,
                fence=Fence.check(cluster.layout.job_dir(job_id)),
                cancelled=threading.Event(),
            )

    def spot_of(self, uri: str) -> Spot:
        """Where an artifact's URI was when it was recorded (a link put on the way later does
        not move the artifact)."""
        if uri not in self.spots:
            self.spots[uri] = self.world.spot(uri)
        return self.spots[uri]

    def place(self, template: str, job: str, i: int) -> str:
        """The URI of a place: a template of the world, or one relative to an artifact of
        another job (``@same``, ``@child``, ``@parent``, ``@upper``: the same in another case),
        live or kept, as it was recorded."""
        if template.startswith("@"):
            theirs = sorted(
                {u for (j, _), (u, _, _) in self.model.live.items() if j != job}
                | {u for u, j in self.model.kept.items() if j != job}
            )
            if not theirs:
                return self.world.place_uri(self.world.hot_places[0].replace("{i}", "0"))
            uri = theirs[i % len(theirs)]
            head, _, last = uri.rpartition("/")
            return {
                "@same": uri,
                "@child": f"{uri}/deep",
                "@parent": head,
                "@upper": f"{head}/{last.upper()}",
            }[template]
        other = JOBS[(JOBS.index(job) + 1) % len(JOBS)]
        filled = template.replace("{job}", job).replace("{other}", other).replace("{i}", str(i))
        return self.world.place_uri(filled)

    # -- the oracle -------------------------------------------------------------------------

    def prefix(self, job: str) -> Spot:
        return Spot(self.storage.family, (*self.storage.segments, "default", "artifacts", job))

    def verdict(self, job: str, name: str, uri: str, spelling: str) -> str:
        """``refuse``, ``accept`` or ``either`` for a new registration, from the contract."""
        if not self.world.plain(spelling):
            return "refuse"
        spot = self.world.spot(uri)
        if spot.overlaps(self.storage):
            allowed = spot.under(self.prefix(job))
        else:
            allowed = any(spot.under(root) for root in self.roots)
        others = [
            (j, n, u) for (j, n), (u, _, _) in self.model.live.items() if (j, n) != (job, name)
        ] + [(j, "kept", u) for u, j in self.model.kept.items()]
        clash = [(j, n) for j, n, u in others if spot.overlaps(self.spot_of(u)) and j != job]
        if not allowed or clash:
            return "refuse"
        if not spot.overlaps(self.storage) and self.world.exists(uri):
            return "refuse"  # a job may register only a place that holds no data yet
        own = [u for (j, n), (u, _, _) in self.model.live.items() if j == job and n != name] + [
            u for (j, _), u in self.model.planted.items() if j == job
        ]
        if (
            job in self.model.cleaned
            or (job, name) in self.model.live
            or any(spot.overlaps(self.spot_of(u)) for u in own)
            or self.world.spot(uri).segments != _literal(uri)
        ):
            return "either"
        return "accept"

    # -- steps ------------------------------------------------------------------------------

    def step(self, step: tuple[Any, ...]) -> None:
        getattr(self, f"do_{step[0]}")(*step[1:])

    def do_register(
        self, job: str, name: str, place: tuple[str, int], spelling: str, scope: str, keep: bool
    ) -> None:
        uri = self.world.spell(self.place(place[0], job, place[1]), spelling)
        expected = self.verdict(job, name, uri, spelling)
        before = self.model.live.get((job, name))
        try:
            got = self.jobs[job].register(name, uri, scope=scope, keep=keep)
        except (ConfigError, HandleExists, UntrustedPayload, AttemptSuperseded) as exc:
            assert expected != "accept", f"refused a place the contract allows: {uri}: {exc}"
            note(f"register refused ({type(exc).__name__}, {expected})")
            return
        note(f"register accepted ({expected})")
        if before is not None:
            assert got == before[0], "registered again: the same artifact"
        else:
            assert expected != "refuse", f"accepted {uri!r} as {got!r}"
            assert self.spot_of(got) == self.world.spot(uri), "recorded its real place"
            self.model.live[(job, name)] = (got, keep, False)
        self.model.writes += 1
        written = self.world.write(got, f"f{self.model.writes}", f"{job}/{name}".encode())
        self.world.files[written] = Owned(f"{job}/{name}".encode(), (job, name))

    def do_finish(self, job: str, name: str) -> None:
        try:
            self.jobs[job].finish(name)
        except (HandleNotFound, WrongState, AttemptSuperseded):
            return
        if (job, name) in self.model.live:
            uri, keep, _ = self.model.live[(job, name)]
            self.model.live[(job, name)] = (uri, keep, True)

    def do_link(self, job: str, name: str, target: str) -> None:
        if (job, name) not in self.model.live:
            return
        self.model.writes += 1
        uri = self.model.live[(job, name)][0]
        made = self.world.link(uri, f"l{self.model.writes}", target)
        if made is not None:
            self.world.files[made] = Owned(os.readlink(made).encode(), (job, name))

    def live(self, k: int) -> tuple[str, str] | None:
        """The k-th live artifact (modulo how many there are), registered or planted."""
        found = sorted({*self.model.live, *self.model.planted})
        return found[k % len(found)] if found else None

    def do_release_live(self, k: int) -> None:
        found = self.live(k)
        if found is not None:
            self.do_release(*found)

    def do_swap_live(self, k: int, target: str) -> None:
        found = self.live(k)
        if found is not None:
            self.do_swap(*found, target)

    def do_swap_release(self, k: int, target: str) -> None:
        """A link put on the way to an artifact just before its release (a race, or a hostile
        job): the release must not follow it."""
        found = self.live(k)
        if found is not None:
            self.do_swap(*found, target)
            self.do_release(*found)

    def do_swap(self, job: str, name: str, target: str) -> None:
        if (job, name) not in self.model.live:
            return
        uri = self.model.live[(job, name)][0]
        spot = self.spot_of(uri)
        roots = [r for r in self.cluster.config.artifact_roots if spot.under(self.world.spot(r))]
        if spot.overlaps(self.storage):
            roots = [self.cluster.artifact_space.job_prefix(job)]  # its own prefix, no higher
        self.model.writes += 1
        moved = self.world.swap(uri, roots[0], target, str(self.model.writes)) if roots else None
        if moved:
            note("a link put on the way")
        for old, new in (moved or {}).items():
            for path in [p for p in self.world.files if p.startswith(old + "/")]:
                self.world.files[new + path[len(old) :]] = self.world.files.pop(path)
            self.world.files[old] = Owned(os.readlink(old).encode(), (job, name))

    def do_plant(self, job: str, name: str, place: tuple[str, int], spelling: str) -> None:
        if (job, name) in self.model.planted or job in self.model.cleaned:
            return
        if place[0] == "@live":  # another job's live artifact, as it was recorded
            others = sorted(u for (j, _), (u, _, _) in self.model.live.items() if j != job)
            if not others:
                return
            uri = others[0]
        else:
            uri = self.world.spell(self.place(place[0], job, place[1]), spelling)
        layout = self.cluster.layout
        self.cluster.zk.ensure_path(layout.artifacts(job))
        record = Artifact(
            version=None, name=name, uri=uri, scope=ATTEMPT, attempt=1, registered=utc_now()
        )
        self.cluster.zk.create(layout.artifact(job, name), record.to_bytes())
        self.model.planted[(job, name)] = uri

    def do_release(self, job: str, name: str) -> None:
        allowed = {path for path, f in self.world.files.items() if f.owner == (job, name)}
        if (job, name) in self.model.planted:  # trusted only in the job's own storage prefix
            allowed |= self.own_prefix_files(job)
        try:
            self.jobs[job].release(name)
        except (UntrustedPayload, AttemptSuperseded) as exc:  # refused: nothing may change
            note(f"release of {job}/{name} refused ({type(exc).__name__})")
        else:
            self.model.live.pop((job, name), None)
            self.model.planted.pop((job, name), None)
        self.check(allowed)

    def do_cleanup(self, job: str, outcome: str) -> None:
        if job in self.model.cleaned:
            return
        kept = {
            uri
            for (j, _), (uri, keep, finished) in self.model.live.items()
            if j == job and keep and finished and outcome == SUCCEEDED
        }
        allowed = {
            path
            for path, f in self.world.files.items()
            if f.owner is not None
            and f.owner[0] in (job, "prefix")
            and (f.owner[0] == job or f.owner[1] == job)
        } | self.own_prefix_files(job)
        allowed = {path for path in allowed if not any(self.inside(path, uri) for uri in kept)}
        self.cluster.results.create_dirty(job, outcome, attempts=1)
        assert clean_up(self.cluster, job)
        for key in [k for k in self.model.live if k[0] == job]:
            uri = self.model.live.pop(key)[0]
            if uri in kept:
                self.model.kept[uri] = job
        self.model.planted = {k: v for k, v in self.model.planted.items() if k[0] != job}
        self.model.cleaned.add(job)
        self.check(allowed)

    def own_prefix_files(self, job: str) -> set[str]:
        prefix = self.cluster.artifact_space.job_prefix(job)
        return {
            path
            for path, f in self.world.files.items()
            if f.owner is not None and job in f.owner and self.inside(path, prefix)
        }

    def inside(self, path: str, uri: str) -> bool:
        """True if the file ``path`` (as a walk of the tree names it: its directory real, the
        file itself maybe a link) is under the artifact ``uri``."""
        segments = tuple(s for s in path.split("/") if s)
        spot = self.spot_of(uri)
        return segments[: len(spot.segments)] == spot.segments

    # -- the property -----------------------------------------------------------------------

    def check(self, allowed: set[str]) -> None:
        """Every file the world knows is there, unchanged, unless it was allowed to go."""
        now = self.world.read_all()
        for path, owned in list(self.world.files.items()):
            if path in now and now[path] == owned.data:
                continue
            assert path in allowed, f"{path} (owner {owned.owner}) was deleted or changed"
            del self.world.files[path]


def _literal(uri: str) -> tuple[str, ...]:
    """The segments of a plain URI as written (to tell a place reached through a link)."""
    path = re.sub(r"^[A-Za-z0-9]+://|^file:", "", uri)
    return tuple(s for s in path.split("/") if s)


def configure(world: World, config: StoreConfig, roots: list[str]) -> StoreConfig:
    """The world's configuration with the roots the oracle says can go together; checks that
    the library refuses exactly the overlapping ones on the way."""
    storage = world.spot(world.storage_url)
    chosen: list[str] = []
    base = config.with_changes(
        root=f"/p{uuid.uuid4().hex[:12]}",
        storage_url=world.storage_url,
        storage_options=world.storage_options,
    )
    for root in roots:
        spot = world.spot(root)
        if any(spot == world.spot(r) for r in chosen):
            continue  # the same place spelled again: refused, or taken once (either is safe)
        clash = spot.overlaps(storage) or any(spot.overlaps(world.spot(r)) for r in chosen)
        trial = base.with_changes(artifact_roots=(*chosen, root))
        if clash:
            with pytest.raises(ArtifactRootRefused):
                check_roots(trial)
        else:
            check_roots(trial)
            chosen.append(root)
    return base.with_changes(artifact_roots=tuple(chosen))


def run_example(
    world: World,
    config: StoreConfig,
    zk: ZooKeeper,
    roots: list[str],
    scenario: list[tuple[Any, ...]],
) -> None:
    config = configure(world, config, roots)
    note(f"{len(config.artifact_roots)} extra root(s)")
    note(f"{len(scenario) // 5 * 5}+ steps")
    with Cluster(config, zk=zk) as cluster:
        cluster.start()
        run = Run(world, cluster)
        for step in scenario:
            run.step(step)
        run.check(set())


def root_picks(world: type[World]) -> st.SearchStrategy[list[str]]:
    return weighted(
        (3, st.sampled_from(world.common_roots).map(list)),
        (1, st.lists(st.sampled_from(world.root_candidates), max_size=3, unique=True)),
    )


@pytest.mark.property
@settings(
    max_examples=examples(100),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    roots=root_picks(LocalWorld),
    via_link=st.booleans(),
    scenario=steps(LocalWorld),
)
def test_nothing_zkstore_did_not_create_is_deleted_on_local_disk(
    config: StoreConfig,
    zk: ZooKeeper,
    tmp_path: Path,
    roots: list[str],
    via_link: bool,
    scenario: list[tuple[Any, ...]],
) -> None:
    base = tmp_path / uuid.uuid4().hex[:8]
    base.mkdir()
    world = LocalWorld(base, via_link)
    urls = [f"file://{base}" if r == "." else f"file://{base / r}" for r in roots]
    run_example(world, config, zk, urls, scenario)


@pytest.mark.property
@settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(roots=root_picks(S3World), scenario=steps(S3World))
def test_nothing_zkstore_did_not_create_is_deleted_on_s3(
    config: StoreConfig,
    zk: ZooKeeper,
    s3_server: S3Server,
    roots: list[str],
    scenario: list[tuple[Any, ...]],
) -> None:
    world = S3World(s3_server)
    run_example(world, config, zk, [world.fill(r) for r in roots], scenario)
