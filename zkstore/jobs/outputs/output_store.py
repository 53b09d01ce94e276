"""The outputs of one job: declared, committed with checkpoints, read, swept, removed.

Order of writes (what a crash at any line leaves):

- ``declare``: the output's record before any part is staged (its data is an artifact of the
  job, registered before it, so nothing is ever written where no record says so);
- a commit: one node, created in the transaction of the checkpoint it is committed with, fenced
  on the attempt (:meth:`OutputStore.commit_ops`); then its manifest file, create-only, after
  the files its chain reads (:meth:`OutputStore.write_manifest`): a crash in between leaves the
  newest file one commit behind;
- ``sweep``: once no attempt is alive, every staged object that no commit names is deleted,
  after a check of the sweeper's fence (the leader's);
- ``remove``: the output's nodes go before its data (the artifact's release), so a reader never
  gets a path whose data is being deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from zkstore.config import validate_id
from zkstore.errors import (
    ArtifactExists,
    ConfigError,
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    InvalidName,
    UntrustedPayload,
)
from zkstore.jobs.outputs.manifest import (
    MANIFESTS,
    Manifest,
    ManifestFile,
    block_size,
    chain,
    manifest_name,
)
from zkstore.jobs.outputs.output_records import Output, OutputCommit
from zkstore.layout import Layout, checkpoint_node_name, is_checkpoint_node_name
from zkstore.payloads.artifacts import ArtifactSpace
from zkstore.payloads.storage import StoredObject
from zkstore.records.strict import utc_now
from zkstore.zookeeper.ops import Create, Fence, Op
from zkstore.zookeeper.retry import RACES, TryAgain

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["ARTIFACT_PREFIX", "MAX_NAME", "OutputStore", "artifact_name", "validate_output_name"]

logger = logging.getLogger(__name__)

#: An output's name is at most this long (its artifact is ``output.<name>``).
MAX_NAME = 100


def validate_output_name(name: str) -> str:
    try:
        validate_id(name, "output name")
    except ConfigError as exc:
        raise InvalidName(str(exc)) from None
    if len(name) > MAX_NAME:
        raise InvalidName(f"output name {name[:40]!r}...: at most {MAX_NAME} characters")
    return name


def artifact_name(name: str) -> str:
    """The artifact that owns an output's data (kept when the job succeeds)."""
    return f"{ARTIFACT_PREFIX}{validate_output_name(name)}"


#: the names of the artifacts that own outputs' data begin so (an output is declared with its
#: artifact: a job none of whose artifacts does has no output to settle)
ARTIFACT_PREFIX = "output."


class OutputStore:
    """The outputs of one job (``R/jobs/<job>/outputs``) and their data's place."""

    def __init__(self, zk: ZooKeeper, layout: Layout, space: ArtifactSpace, job_id: str) -> None:
        self.zk = zk
        self.layout = layout
        self.space = space
        self.job_id = job_id

    # -- reads ---------------------------------------------------------------------------------

    def names(self) -> list[str]:
        try:
            return sorted(self.zk.children(self.layout.outputs(self.job_id)))
        except HandleNotFound:
            return []

    def get(self, name: str) -> Output | None:
        path = self.layout.output(self.job_id, validate_output_name(name))
        found = self.zk.get_if_exists(path)
        if found is None:
            return None
        record = Output.from_znode(found[0], found[1], path)
        if record.name != name:
            raise CorruptRecord(f"{path}: names output {record.name!r:.140}, not its own")
        self.space.check(self.job_id, record.uri)  # planted elsewhere: never read or swept
        return record

    def commits(self, name: str) -> list[OutputCommit]:
        """Every commit of the output, oldest first. A commit that cannot be read raises
        :class:`CorruptRecord`, and one listed but gone when read :class:`HandleNotFound`
        (only a finished job's cleanup removes commits, node by node, once its kept outputs'
        manifest files are written): a reader must never get a manifest with parts missing."""
        ids = self.commit_ids(name)
        commits = self._read(name, ids)
        for commit_id, commit in zip(ids, commits, strict=True):
            if commit is None:
                raise HandleNotFound(
                    f"job {self.job_id}: commit {commit_id} of output {name!r} was removed "
                    "as it was read (the job's records are being removed)",
                    path=f"{self.layout.output(self.job_id, name)}/"
                    f"{checkpoint_node_name(commit_id)}",
                )
        return [c for c in commits if c is not None]

    def commit_ids(self, name: str) -> list[int]:
        """The ids of the output's commits, oldest first (its children's names alone)."""
        path = self.layout.output(self.job_id, validate_output_name(name))
        try:
            children = self.zk.children(path)
        except HandleNotFound:
            return []
        return sorted(int(c) for c in children if is_checkpoint_node_name(c))

    def _read(self, name: str, ids: Sequence[int]) -> list[OutputCommit | None]:
        """The commits ``ids`` of the output (None: removed meanwhile)."""
        path = self.layout.output(self.job_id, validate_output_name(name))
        found = self.zk.get_many([f"{path}/{checkpoint_node_name(i)}" for i in ids])
        commits: list[OutputCommit | None] = []
        for commit_id, item in zip(ids, found, strict=True):
            if item is None:
                commits.append(None)
                continue
            node = f"{path}/{checkpoint_node_name(commit_id)}"
            commit = OutputCommit.from_znode(item[0], item[1], node)
            if (commit.output, commit.commit) != (name, commit_id):
                raise CorruptRecord(f"{node}: names commit {commit.commit} of {commit.output!r}")
            commits.append(commit)
        return commits

    def manifest(self, name: str, *, upto: int | None = None) -> Manifest:
        """The output's committed parts (up to commit ``upto``); :class:`HandleNotFound` if the
        job has no such output."""
        output = self.get(name)
        if output is None:
            raise HandleNotFound(
                f"job {self.job_id} has no output {name!r}",
                path=self.layout.output(self.job_id, name),
            )
        commits = [c for c in self.commits(name) if upto is None or c.commit <= upto]
        return Manifest(self.job_id, name, output.uri, tuple(commits))

    def committed(self, name: str, attempt: int, parts: Sequence[str]) -> int | None:
        """The id of a commit of ``attempt`` that holds exactly ``parts``, or None: whether a
        commit whose answer was lost was applied."""
        for commit in self.commits(name):
            if commit.attempt == attempt and commit.parts == list(parts):
                return commit.commit
        return None

    # -- writes --------------------------------------------------------------------------------

    def declare(self, name: str, uri: str, *, fence: Fence | None) -> Output:
        """Record the output at ``uri`` (its artifact's URI) unless it is; returns the record.
        :class:`ArtifactExists` if it is recorded at another place."""
        path = self.layout.output(self.job_id, validate_output_name(name))
        wanted = Output(
            version=None, name=name, uri=uri, artifact=artifact_name(name), created=utc_now()
        )

        def declare_once() -> Output:
            existing = self.get(name)
            if existing is not None:
                if existing.uri != uri:
                    raise ArtifactExists(
                        f"output {name!r} of job {self.job_id} is at {existing.uri}, not {uri}",
                        path=path,
                    )
                return existing
            ops: list[Op] = [Create(path, wanted.to_bytes())]
            parent = self.layout.outputs(self.job_id)
            if self.zk.exists(parent) is None:  # made under the same fence, never left empty
                ops.insert(0, Create(parent))
            try:
                self.zk.commit(ops, fence=fence)
            except (HandleExists, HandleNotFound) as exc:
                raise TryAgain(str(exc)) from exc
            return wanted.with_version(0)

        return RACES.call(declare_once, what=f"declare output {name!r} of {self.job_id}")

    def commit_ops(self, name: str, commit_id: int, attempt: int, parts: Sequence[str]) -> list[Op]:
        """The op that commits ``parts`` (relative to the output's place, under ``attempt``'s
        staging) with checkpoint ``commit_id``: to be committed in that checkpoint's
        transaction. Raises :class:`TooLarge` past the bounds (nothing written)."""
        record = OutputCommit(
            version=None,
            output=name,
            commit=commit_id,
            attempt=attempt,
            parts=list(parts),
            committed=utc_now(),
        )
        path = self.layout.output(self.job_id, validate_output_name(name))
        return [Create(f"{path}/{checkpoint_node_name(commit_id)}", record.checked_bytes())]

    def write_manifest(self, name: str, *, upto: int | None = None) -> str | None:
        """Write the manifest file of commit ``upto`` (default: the newest), create-only, after
        the files its chain reads that are missing (:mod:`.manifest`); returns its URI (None:
        no commit yet, or the output was removed meanwhile). Idempotent: a file's content is
        fixed by its name. Reads only the commits of the files it writes."""
        output = self.get(name)
        if output is None:
            return None
        ids = [i for i in self.commit_ids(name) if upto is None or i <= upto]
        if not ids:
            return None
        newest = len(ids)
        uri = None
        for position in reversed(chain(newest)):  # oldest first: each file after its chain's
            size = block_size(position)
            uri = output.uri + f"/{MANIFESTS}/" + manifest_name(ids[position - 1])
            if position != newest and self.space.occupied(self.job_id, uri):
                continue
            commits = self._read(name, ids[position - size : position])
            if any(c is None for c in commits):
                return None  # the output is being removed
            block = ManifestFile(
                self.job_id,
                name,
                output.uri,
                position,
                ids[position - size - 1] if position > size else 0,
                tuple(c for c in commits if c is not None),
            )
            if not self.space.put_new(self.job_id, uri, block.to_bytes()):
                logger.error("manifest %s holds other bytes than the commits say: left alone", uri)
        return uri

    def sweep(self, *, fence: Fence | None, live_attempt: int | None = None) -> int:
        """Delete every staged object of every output that no commit names (but those of
        ``live_attempt``, whose driver may be writing); returns how many. The fence is
        checked before the first delete. Call only once the other attempts are known gone."""
        deleted = 0
        checked = False
        for name in self.names():
            try:
                stray = self._stray(name, live_attempt)
            except (CorruptRecord, InvalidName, UntrustedPayload) as exc:
                logger.error("output %s of %s not swept: %s", name, self.job_id, exc)
                continue
            if stray and not checked:
                self.zk.ensure_fence(fence)
                checked = True
            for item in stray:
                self.space.delete(self.job_id, item.uri)
                deleted += 1
        if deleted:
            logger.info("%s: %d staged object(s) never committed, deleted", self.job_id, deleted)
        return deleted

    def stray(self, live_attempt: int | None = None) -> list[StoredObject]:
        """The staged objects of every output that no commit names (``handles lingering``)."""
        found: list[StoredObject] = []
        for name in self.names():
            try:
                found += self._stray(name, live_attempt)
            except HandleNotFound:
                continue  # its records went meanwhile (the job's cleanup): nothing to tell
            except (CorruptRecord, InvalidName, UntrustedPayload) as exc:
                logger.error("output %s of %s not read: %s", name, self.job_id, exc)
        return found

    def _stray(self, name: str, live_attempt: int | None) -> list[StoredObject]:
        output = self.get(name)
        if output is None:
            return []
        committed = [f"{output.uri}/{part}" for c in self.commits(name) for part in c.parts]
        live = None if live_attempt is None else f"{output.uri}/attempt-{live_attempt}/"
        stray = []
        for item in self.space.objects(self.job_id, output.uri):
            if item.uri.startswith(f"{output.uri}/{MANIFESTS}/"):
                continue
            if live is not None and item.uri.startswith(live):
                continue
            if any(item.uri == p or item.uri.startswith(p + "/") for p in committed):
                continue
            stray.append(item)
        return stray

    def remove(self, name: str, *, fence: Fence | None) -> bool:
        """Delete the output's record and its commits (before its data goes); False if there
        was none."""
        return self.zk.delete_tree(
            self.layout.output(self.job_id, validate_output_name(name)), fence=fence
        )

    def settle(self, kept: Collection[str], *, fence: Fence | None) -> None:
        """The job ended (no attempt is alive): delete what its outputs staged and never
        committed; an output whose artifact is ``kept`` (names) gets its final manifest file
        (its records go with the job's), any other loses its records before its data goes."""
        names = self.names()
        if not names:
            return
        self.sweep(fence=fence)
        for name in names:
            try:
                if artifact_name(name) in kept:
                    self.write_manifest(name)
                else:
                    self.remove(name, fence=fence)
            except (CorruptRecord, InvalidName, UntrustedPayload) as exc:
                logger.error("output %s of %s: %s", name, self.job_id, exc)
