"""What a reader of an output sees: the committed parts, and the manifest file next to them.

The manifest of an output as of commit ``N`` is every commit whose id is at most ``N``, read
from ZooKeeper once ``N`` is committed. That set never changes afterwards: commit ids are
checkpoint ids, which only grow, and a commit is created in its checkpoint's transaction, fenced
on its attempt, so no commit with a smaller id can appear later (a stale attempt's is refused).
So the file ``<uri>/_manifests/<N:019d>.json`` has one possible content; it is written
create-only, by whoever gets there first (the driver after its commit, the cleanup at the job's
end), and never rewritten. A reader takes the file with the highest name: it names committed
parts only, all of them up to that commit, whatever a fenced attempt did or does. The newest
file can lag ZooKeeper by the commits of a driver that died before writing it (the next commit,
or the job's end, writes a newer one); ``zkstore outputs paths`` reads ZooKeeper itself.

:func:`read_paths` needs fsspec alone (no ZooKeeper, no zkstore runtime): pandas, DuckDB or a
plain ``spark.read.parquet(*read_paths(uri))`` use it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zkstore.jobs.outputs.records import OutputCommit

__all__ = [
    "FORMAT",
    "MANIFESTS",
    "Manifest",
    "hadoop_url",
    "manifest_name",
    "newest_file",
    "read_paths",
]

FORMAT = 1
MANIFESTS = "_manifests"
#: A manifest file is read up to this many bytes (10,000 commits of a few parts fit).
MAX_MANIFEST_BYTES = 64 * 1024 * 1024


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

    def file_uri(self) -> str:
        return f"{self.uri}/{MANIFESTS}/{manifest_name(self.commit)}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "job_id": self.job_id,
            "output": self.output,
            "uri": self.uri,
            "commit": self.commit,
            "paths": self.paths,
            "commits": [
                {
                    "commit": c.commit,
                    "attempt": c.attempt,
                    "committed": c.committed,
                    "parts": list(c.parts),
                }
                for c in self.commits
            ],
        }

    def to_bytes(self) -> bytes:
        return json.dumps(self.as_dict(), sort_keys=True, indent=1).encode()


def newest_file(names: Sequence[str]) -> str | None:
    """The manifest file a reader takes among ``names`` (base names), None if there is none."""
    found = sorted(n for n in names if len(n) == 24 and n.endswith(".json") and n[:19].isdigit())
    return found[-1] if found else None


def read_paths(uri: str, **storage_options: Any) -> list[str]:
    """The committed parts of the output at ``uri`` (its place: ``ctx.outputs.uri(name)``, or
    a kept output as ``zkstore jobs show`` lists it), from its newest manifest file: fsspec
    alone, no ZooKeeper. An output with no commit yet has none: ``[]``."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(uri, **storage_options)
    fs.invalidate_cache(f"{root}/{MANIFESTS}")  # s3fs caches listings: a newer file is missed
    try:
        names = [str(p).rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(f"{root}/{MANIFESTS}")]
    except FileNotFoundError:
        return []
    newest = newest_file(names)
    if newest is None:
        return []
    data = json.loads(fs.cat_file(f"{root}/{MANIFESTS}/{newest}"))
    paths = data["paths"]
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ValueError(f"{uri}/{MANIFESTS}/{newest}: not a manifest")
    return paths
