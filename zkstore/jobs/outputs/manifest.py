"""What a reader of an output sees: the committed parts, and the manifest files next to them.

The manifest of an output as of commit ``N`` is every commit whose id is at most ``N``, read
from ZooKeeper once ``N`` is committed. That set never changes afterwards: commit ids are
checkpoint ids, which only grow, and a commit is created in its checkpoint's transaction, fenced
on its attempt, so no commit with a smaller id can appear later (a stale attempt's is refused).
So the ``i``-th commit of an output (its *position*, from 1) is fixed once it exists.

The files, ``<uri>/_manifests/<N:019d>.json``, one per commit ``N`` (at position ``i``), hold a
block of commits as a binary counter does (a Fenwick tree): the ``lowbit(i)`` commits ending at
``i`` (``i & -i``: 1 for an odd position, 2 for ``i = 6``, 256 for ``i = 256``), and
``previous``, the id of the commit just before the block (0: the block starts at position 1).
A reader takes the file with the highest name and follows ``previous`` back to 0: at most
``log2(i) + 1`` files, together every commit up to ``N``, each once. Each commit is written in
at most ``log2(n) + 1`` files, so ``n`` commits write ``O(n log n)`` bytes, not the ``O(n^2)`` a
whole manifest per commit would (Spark's ``_spark_metadata`` compacts every 10 batches, which
only divides its quadratic growth by 10).

Each file has one possible content (the commits it names are fixed): it is written create-only,
by whoever gets there first (the driver after its commit, the cleanup at the job's end), and
never rewritten; the writer of a file first writes the files its chain reads that are missing
(a driver died before writing them), so a file exists only once every file it leads to does.
A reader gets committed parts only, all of them up to that commit, whatever a fenced attempt
did or does. The newest file can lag ZooKeeper by the commits of a driver that died before
writing it (the next commit, or the job's end, writes a newer one); ``zkstore outputs paths``
reads ZooKeeper itself.

:func:`read_paths` needs fsspec alone (no ZooKeeper, no zkstore runtime): pandas, DuckDB or a
plain ``spark.read.parquet(*read_paths(uri))`` use it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from zkstore.jobs.outputs.output_records import OutputCommit, part_problem

__all__ = [
    "FORMAT",
    "MANIFESTS",
    "Manifest",
    "ManifestFile",
    "block_size",
    "chain",
    "hadoop_url",
    "manifest_name",
    "newest_file",
    "read_manifest",
    "read_paths",
]

FORMAT = 1
MANIFESTS = "_manifests"
#: A manifest file is read up to this many bytes (10,000 commits of a few parts fit).
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
#: A reader follows at most this many files (2^64 commits need 64).
MAX_CHAIN = 64


def block_size(position: int) -> int:
    """How many commits the file of the commit at ``position`` (from 1) holds: its lowest
    set bit."""
    return position & -position


def chain(position: int) -> list[int]:
    """The positions whose files a reader of the file at ``position`` reads, newest first."""
    found = []
    while position > 0:
        found.append(position)
        position -= block_size(position)
    return found


def manifest_name(commit: int) -> str:
    return f"{commit:019d}.json"


def hadoop_url(uri: str) -> str:
    """The URL Spark's Hadoop filesystems know for an fsspec URL (``s3://`` is ``s3a://``)."""
    return "s3a://" + uri.removeprefix("s3://") if uri.startswith("s3://") else uri


@dataclass(frozen=True)
class Manifest:
    """An output's committed parts (oldest commit first), as of commit :attr:`commit`."""

    job_id: str
    output: str
    uri: str
    commits: tuple[OutputCommit, ...]

    @property
    def commit(self) -> int:
        """The newest commit's id (the checkpoint it was committed with); 0: none yet."""
        return self.commits[-1].commit if self.commits else 0

    @property
    def parts(self) -> list[str]:
        return [part for commit in self.commits for part in commit.parts]

    @property
    def paths(self) -> list[str]:
        """The committed parts' URIs (fsspec's: ``s3://``, ``file://``)."""
        return [f"{self.uri}/{part}" for part in self.parts]

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "job_id": self.job_id,
            "output": self.output,
            "uri": self.uri,
            "commit": self.commit,
            "paths": self.paths,
            "commits": [_commit_dict(c) for c in self.commits],
        }


def _commit_dict(commit: OutputCommit) -> dict[str, Any]:
    return {
        "commit": commit.commit,
        "attempt": commit.attempt,
        "committed": commit.committed,
        "parts": list(commit.parts),
    }


@dataclass(frozen=True)
class ManifestFile:
    """One file: the commits at positions ``position - len(commits) + 1 .. position`` (as
    many as :func:`block_size` says), and ``previous``, the commit before them (0: none)."""

    job_id: str
    output: str
    uri: str
    position: int
    previous: int
    commits: tuple[OutputCommit, ...]

    def __post_init__(self) -> None:
        if len(self.commits) != block_size(self.position) or (
            self.commits and self.previous >= self.commits[0].commit
        ):
            raise ValueError(f"not the block of position {self.position}")

    @property
    def commit(self) -> int:
        return self.commits[-1].commit

    def file_uri(self) -> str:
        return f"{self.uri}/{MANIFESTS}/{manifest_name(self.commit)}"

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "format": FORMAT,
                "job_id": self.job_id,
                "output": self.output,
                "uri": self.uri,
                "commit": self.commit,
                "position": self.position,
                "previous": self.previous,
                "commits": [_commit_dict(c) for c in self.commits],
            },
            sort_keys=True,
            indent=1,
        ).encode()


def newest_file(names: Sequence[str]) -> str | None:
    """The manifest file a reader takes among ``names`` (base names), None if there is none."""
    found = sorted(n for n in names if len(n) == 24 and n.endswith(".json") and n[:19].isdigit())
    return found[-1] if found else None


def read_manifest(
    names: Sequence[str], fetch: Callable[[str], bytes], *, where: str = MANIFESTS
) -> dict[str, Any] | None:
    """The manifest the files say, given their base names and how to read one (by base
    name): what :meth:`Manifest.as_dict` gives, from the newest file and the files its
    ``previous`` leads to; None if there is no file. :class:`ValueError` if a file is not
    what its name and its place in the chain say (written by no zkstore, or damaged)."""
    newest = newest_file(names)
    if newest is None:
        return None
    blocks: list[list[dict[str, Any]]] = []
    name: str | None = newest
    expect_position: int | None = None
    top: dict[str, Any] = {}
    while name is not None:
        if len(blocks) >= MAX_CHAIN:
            raise ValueError(f"{where}: a chain of over {MAX_CHAIN} files")
        data = json.loads(fetch(name))
        if not top:
            top = data
        problem = _file_problem(data, name, expect_position, top)
        if problem is not None:
            raise ValueError(f"{where}/{name}: not a manifest file ({problem})")
        blocks.append(data["commits"])
        expect_position = data["position"] - len(data["commits"])
        name = manifest_name(data["previous"]) if data["previous"] else None
    commits = [c for block in reversed(blocks) for c in block]
    uri = top["uri"]
    return {
        "format": FORMAT,
        "job_id": top["job_id"],
        "output": top["output"],
        "uri": uri,
        "commit": top["commit"],
        "paths": [f"{uri}/{p}" for c in commits for p in c["parts"]],
        "commits": commits,
    }


def _file_problem(data: Any, name: str, position: int | None, top: dict[str, Any]) -> str | None:
    """What is wrong with a file's content read as ``name``, ``position`` in the chain (None:
    the newest), beside the newest file's ``top``."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return "not of format 1"
    fields = ("job_id", "output", "uri")
    if any(not isinstance(data.get(f), str) or data.get(f) != top.get(f) for f in fields):
        return "another output's"
    at, previous, commits = data.get("position"), data.get("previous"), data.get("commits")
    if not isinstance(at, int) or at < 1 or (position is not None and at != position):
        return f"position {at!r}, not {position}"
    if not isinstance(commits, list) or len(commits) != block_size(at):
        return f"not the {block_size(at)} commits of position {at}"
    if not isinstance(previous, int) or previous < 0 or (previous == 0) != (at == len(commits)):
        return f"previous {previous!r}"
    last = previous
    for commit in commits:
        if not isinstance(commit, dict) or not isinstance(commit.get("commit"), int):
            return "a commit is not one"
        attempt, parts = commit.get("attempt"), commit.get("parts")
        if commit["commit"] <= last or not isinstance(attempt, int) or not isinstance(parts, list):
            return f"commit {commit['commit']} out of order or malformed"
        if any(part_problem(p, attempt) for p in parts):
            return f"commit {commit['commit']} names a part outside its attempt's staging"
        last = commit["commit"]
    if manifest_name(last) != name or data.get("commit") != last:
        return f"its newest commit is {last}"
    return None


def read_paths(uri: str, **storage_options: Any) -> list[str]:
    """The committed parts of the output at ``uri`` (its place: ``ctx.outputs.uri(name)``, or
    a kept output as ``zkstore jobs show`` lists it), from its manifest files: fsspec alone,
    no ZooKeeper. An output with no commit yet has none: ``[]``."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(uri, **storage_options)
    fs.invalidate_cache(f"{root}/{MANIFESTS}")  # s3fs caches listings: a newer file is missed
    try:
        names = [str(p).rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(f"{root}/{MANIFESTS}")]
    except FileNotFoundError:
        return []

    def fetch(name: str) -> bytes:
        data: bytes = fs.cat_file(f"{root}/{MANIFESTS}/{name}")
        return data

    found = read_manifest(names, fetch, where=f"{uri}/{MANIFESTS}")
    return [] if found is None else list(found["paths"])
