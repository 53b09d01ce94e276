"""A job's artifacts: ``R/jobs/<job>/artifacts/<name>``, one small JSON record per artifact.

The record is written before the data exists and deleted only after the data is gone, so that
ZooKeeper always knows of every artifact that may have data somewhere (the reverse of
invariant 1: a record may point at nothing, data is never without its record)::

    register   create the record (IN_PROGRESS)            -> the job writes the data
    finish     IN_PROGRESS -> FINISHED                     (not if the job was cancelled meanwhile:
                                                            then the artifact is released at once)
    release    mark RELEASING -> delete the data -> delete the record

Each step is one conditional ZooKeeper write (fenced on the writer's standing: the driver's
attempt, the leader's election node, or an operator's re-check) or one idempotent delete of data;
a crash between any two steps leaves a record that says what is left, and running the release
again finishes it. RELEASING says the data may be half deleted: nobody reuses such an artifact,
whoever meets it first finishes the release. No data is deleted before the writer's fence was
checked (the mark, or for a RELEASING record a check of it under the fence).

Ownership (invariant 10, :mod:`zkstore.payloads.artifacts`): under an extra artifact root, the
record is created in one transaction with the place's claim (:mod:`zkstore.jobs.claims`), which
fails if another artifact of any job overlaps it, and only at a place that holds no data yet; before
the data is deleted, the claim is read again and must be this artifact's alone; it is deleted
with the record.

Scopes: an ``attempt`` artifact belongs to the attempt that registered it (a staging directory):
the leader releases it before the next attempt starts. A ``job`` artifact outlives attempts
(intermediate results a resumed attempt reuses). The job's cleanup releases every artifact,
except those marked ``keep`` and FINISHED when the job SUCCEEDED: those are listed in the job's
result (``outputs``) and left in place.

Why one module: register, finish, release and the job's end are one record's life, each step
written against the crash analysis above and the same fences; the claims (:mod:`.claims`) and
the outputs' commits (:mod:`.outputs`) already live apart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from zkstore.config import validate_id
from zkstore.errors import (
    ArtifactExists,
    ArtifactNotFound,
    ConfigError,
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    InvalidName,
    NotEmpty,
    TooLarge,
    UntrustedPayload,
    VersionConflict,
    WrongState,
)
from zkstore.jobs.claims import ArtifactClaims, Claim, LeftClaim
from zkstore.jobs.outputs.output_store import ARTIFACT_PREFIX, OutputStore
from zkstore.jobs.results import JobResultStore
from zkstore.layout import Layout
from zkstore.payloads.artifacts import ArtifactSpace, overlap
from zkstore.records.handle import ZnodeStatLike
from zkstore.records.job_states import SUCCEEDED, ArtifactScope, ArtifactState
from zkstore.records.record import Record
from zkstore.records.result_records import JobResult
from zkstore.records.strict import utc_now
from zkstore.zookeeper.ops import Check, Create, Delete, Fence, Guard, Op, SetData, absent
from zkstore.zookeeper.retry import RACES, TryAgain

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "ATTEMPT",
    "FINISHED",
    "IN_PROGRESS",
    "JOB",
    "MAX_ARTIFACTS",
    "MAX_KEPT",
    "RELEASING",
    "SCOPES",
    "STATES",
    "Artifact",
    "ArtifactStore",
    "release_dead_attempts",
    "release_for_cleanup",
    "validate_name",
]

logger = logging.getLogger(__name__)

ATTEMPT = ArtifactScope.ATTEMPT
JOB = ArtifactScope.JOB
SCOPES = tuple(ArtifactScope)

IN_PROGRESS = ArtifactState.IN_PROGRESS
FINISHED = ArtifactState.FINISHED
RELEASING = ArtifactState.RELEASING
STATES = tuple(ArtifactState)

#: Artifacts one job may have at once, and outputs it may keep (they are listed in its result,
#: a ZooKeeper record: 64 kept URIs of at most 512 bytes stay well under its 64 KB).
MAX_ARTIFACTS = 256
MAX_KEPT = 64


@dataclass(frozen=True)
class Artifact(Record):
    """``R/jobs/<job>/artifacts/<name>``: what the job registered, and how far it got."""

    name: str = ""
    uri: str = ""
    scope: str = ATTEMPT
    attempt: int = 0
    state: str = IN_PROGRESS
    keep: bool = False
    registered: str = ""
    finished: str | None = None

    optional = frozenset({"finished"})
    times = frozenset({"registered", "finished"})
    choices = {"scope": SCOPES, "state": STATES}

    def describe(self) -> str:
        owner = f"attempt {self.attempt}" if self.scope == ATTEMPT else "the job"
        return f"{self.state}, of {owner}{', kept on success' if self.keep else ''}: {self.uri}"


def validate_name(name: str) -> str:
    try:
        return validate_id(name, "artifact name")
    except ConfigError as exc:
        raise InvalidName(str(exc)) from None


class ArtifactStore:
    """The artifact records of one job, and the release of their data.

    ``on_step`` is called with the name of each step as it is done (crash tests stop there).
    Every write takes the writer's ``fence``; a lost fence raises its error and writes nothing.
    """

    def __init__(
        self,
        zk: ZooKeeper,
        layout: Layout,
        space: ArtifactSpace,
        job_id: str,
        *,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        self.zk = zk
        self.layout = layout
        self.space = space
        self.job_id = job_id
        self.claims = ArtifactClaims(zk, layout)
        self._on_step = on_step

    def _step(self, step: str) -> None:
        if self._on_step is not None:
            self._on_step(step)

    # -- reads ---------------------------------------------------------------------------------

    def _names(self) -> list[str] | None:
        """The names of the job's artifacts, None if it never had any (no parent node)."""
        try:
            return sorted(self.zk.children(self.layout.artifacts(self.job_id)))
        except HandleNotFound:
            return None

    def all(self, names: list[str] | None = None) -> tuple[list[Artifact], dict[str, str]]:
        """Every readable record (by name) and, by name, why the others cannot be read."""
        parent = self.layout.artifacts(self.job_id)
        names = self._names() if names is None else names
        if not names:
            return [], {}
        found = self.zk.get_many([f"{parent}/{name}" for name in names])
        records: list[Artifact] = []
        unreadable: dict[str, str] = {}
        for name, item in zip(names, found, strict=True):
            if item is None:
                continue
            try:
                records.append(self._parse(name, item[0], item[1]))
            except (CorruptRecord, InvalidName) as exc:
                unreadable[name] = str(exc)
        return records, unreadable

    def get(self, name: str) -> Artifact | None:
        found = self.zk.get_if_exists(self.layout.artifact(self.job_id, validate_name(name)))
        return None if found is None else self._parse(name, *found)

    def _parse(self, name: str, data: bytes, stat: ZnodeStatLike) -> Artifact:
        path = self.layout.artifact(self.job_id, validate_name(name))
        record = Artifact.from_znode(data, stat, path)
        if record.name != name:
            raise CorruptRecord(f"{path}: names artifact {record.name!r:.140}, not its own")
        return record

    # -- register ------------------------------------------------------------------------------

    def register(
        self,
        name: str,
        uri: str | None,
        *,
        scope: str,
        keep: bool,
        attempt: int,
        fence: Fence | None,
    ) -> Artifact:
        """Record the artifact before its data exists; returns the record (its URI to write to).

        Registering again what is registered returns the existing record: a job-scoped artifact
        of an earlier attempt (``state`` says whether it was finished), or this attempt's own.
        An attempt-scoped record of an earlier attempt, or one whose release was interrupted, is
        released first. Raises :class:`ArtifactUriRefused` (a ConfigError) for a URI outside the
        roots or holding data already, :class:`HandleExists` for the name taken with another
        URI, scope or keep, or a URI that overlaps another artifact (of any job, live or kept).
        """
        validate_name(name)
        if scope not in SCOPES:
            raise ConfigError(f"artifact scope {scope!r}: use {' or '.join(map(repr, SCOPES))}")
        if uri is None:
            target = self.space.default_uri(
                self.job_id, name, attempt if scope == ATTEMPT else None
            )
        else:
            target = self.space.resolve(self.job_id, uri)
        wanted = Artifact(
            version=None,
            name=name,
            uri=target,
            scope=scope,
            attempt=attempt,
            keep=keep,
            registered=utc_now(),
        )

        def register_once() -> Artifact:
            names = self._names()
            records, unreadable = self.all(names or [])
            existing = next((r for r in records if r.name == name), None)
            if existing is not None:
                if existing.state == RELEASING or (
                    existing.scope == ATTEMPT and existing.attempt != attempt
                ):
                    self.release(name, fence=fence)
                    raise TryAgain(f"released {existing.describe()} first")
                return self._same(existing, wanted)
            self._check_room(wanted, records, len(unreadable))
            try:
                ops = self._creation(wanted, names is not None, fence)  # raises: not its place
            except LeftClaim as exc:
                self._release_left(exc.claim, attempt, fence)
                raise TryAgain(str(exc)) from exc
            try:
                self.zk.commit(ops, fence=fence)
            except (HandleExists, HandleNotFound, NotEmpty) as exc:
                if isinstance(exc, HandleExists) or self.claims.is_claim_path(exc.path):
                    # raced with ourselves after a lost answer, or the parent appeared, or a
                    # claim changed meanwhile: read again
                    raise TryAgain(str(exc)) from exc
                raise
            self._step("register:recorded")
            return wanted.with_version(0)

        return RACES.call(register_once, what=f"register of artifact {name!r} of {self.job_id}")

    def _same(self, existing: Artifact, wanted: Artifact) -> Artifact:
        if (existing.uri, existing.scope, existing.keep) != (wanted.uri, wanted.scope, wanted.keep):
            raise ArtifactExists(
                f"artifact {existing.name!r} of job {self.job_id} is registered already "
                f"({existing.scope} scope, keep={existing.keep}, {existing.uri})",
                path=self.layout.artifact(self.job_id, existing.name),
            )
        return existing

    def _check_room(self, wanted: Artifact, records: list[Artifact], unreadable: int) -> None:
        for other in records:
            if overlap(other.uri, wanted.uri):
                raise ArtifactExists(
                    f"artifact {wanted.name!r} at {wanted.uri} overlaps artifact "
                    f"{other.name!r} at {other.uri}: releasing one would delete the other",
                    path=self.layout.artifact(self.job_id, other.name),
                )
        if len(records) + unreadable >= MAX_ARTIFACTS:
            raise TooLarge(f"job {self.job_id} has {MAX_ARTIFACTS} artifacts already")
        if wanted.keep and sum(r.keep for r in records) >= MAX_KEPT:
            raise TooLarge(f"job {self.job_id} keeps {MAX_KEPT} outputs already")

    def _creation(self, record: Artifact, parent_exists: bool, fence: Fence | None) -> list[Op]:
        """The ops that create the record (and its place's claim). Raises
        :class:`HandleExists` if the place overlaps another artifact's,
        :class:`ArtifactUriRefused` if it holds data already."""
        ops: list[Op] = [Create(self.layout.artifact(self.job_id, record.name), record.to_bytes())]
        if not parent_exists:
            # Created in the same transaction, under the same fence: a stale writer never leaves
            # an empty parent behind a cleanup.
            ops.insert(0, Create(self.layout.artifacts(self.job_id)))
        if self.space.claimed(record.uri):
            claim = Claim(
                version=None,
                job=self.job_id,
                name=record.name,
                uri=record.uri,
                claimed=record.registered,
                attempt=record.attempt,
            )
            ops += self.claims.claim_ops(claim, fence=fence)  # raises if it overlaps another
        self.space.check_fresh(self.job_id, record.uri)
        return ops

    # -- finish --------------------------------------------------------------------------------

    def finish(self, name: str, *, attempt: int, fence: Fence | None) -> Artifact | None:
        """Mark the artifact FINISHED; returns the record, or None if the job had been cancelled:
        then the artifact was released instead (a cancelled job keeps nothing it finishes late).

        Finishing a finished artifact returns it. Raises :class:`HandleNotFound` (not
        registered) and :class:`WrongState` (being released, or another attempt's).
        """
        path = self.layout.artifact(self.job_id, validate_name(name))
        not_cancelled = Fence(
            (Guard(absent(self.layout.cancel(self.job_id)), WrongState, "job cancelled"),)
        )

        def finish_once() -> Artifact | None:
            current = self._finishable(name, attempt)
            if current.state == FINISHED:
                return current
            assert current.version is not None
            done = replace(current, state=FINISHED, finished=utc_now())
            try:
                self.zk.commit(
                    [SetData(path, done.to_bytes(), current.version)],
                    fence=not_cancelled if fence is None else fence + not_cancelled,
                )
            except WrongState:
                logger.warning(
                    "artifact %s of %s finished after a cancel: released", name, self.job_id
                )
                self.release(name, fence=fence)
                return None
            self._step("finish:marked")
            return done.with_version(current.version + 1)

        return RACES.call(
            finish_once,
            what=f"finish of artifact {name!r} of {self.job_id}",
            retry_on=(VersionConflict,),
            path=path,
        )

    def _finishable(self, name: str, attempt: int) -> Artifact:
        current = self.get(name)
        if current is None:
            raise ArtifactNotFound(
                f"job {self.job_id} has no artifact {name!r}: register it first",
                path=self.layout.artifact(self.job_id, name),
            )
        if current.state == RELEASING:
            raise WrongState(f"artifact {name!r} of job {self.job_id} is being released")
        if current.scope == ATTEMPT and current.attempt != attempt:
            raise WrongState(f"artifact {name!r} belongs to attempt {current.attempt}")
        return current

    # -- release -------------------------------------------------------------------------------

    def release(self, name: str, *, fence: Fence | None) -> bool:
        """Delete the artifact's data, then its record; True if there was one to release.

        Idempotent, and safe to run again after a crash at any step, by anybody holding a
        fence; no data is deleted unless the fence holds just before. Raises
        :class:`UntrustedPayload` (nothing deleted, record kept) for a record whose URI is not
        one the job could have registered with this configuration (outside the roots, not
        claimed by it alone, or reached through a symbolic link).
        """
        path = self.layout.artifact(self.job_id, validate_name(name))

        def release_once() -> bool:
            current = self.get(name)
            if current is None:
                return False
            assert current.version is not None
            version = current.version
            try:
                claim = self._holder(current)  # not its own to delete: nothing done
                if current.state != RELEASING:
                    marked = replace(current, state=RELEASING)
                    self.zk.commit([SetData(path, marked.to_bytes(), version)], fence=fence)
                    version += 1
                    self._step("release:marked")
                else:  # marked by somebody before: the writer's standing is checked all the same
                    self.zk.commit([Check(path, version)], fence=fence)
                self.space.delete(self.job_id, current.uri)
                self._step("release:data-deleted")
                unclaim = self.claims.unclaim_ops(claim) if claim is not None else []
                self.zk.commit([Delete(path, version), *unclaim], fence=fence)
            except HandleNotFound as exc:
                if exc.path != path:
                    raise
                return False  # released meanwhile by somebody else
            self._step("release:deleted")
            if claim is not None:
                self.claims.prune(current.uri, fence)
            logger.info("artifact %s of %s released (%s)", name, self.job_id, current.uri)
            return True

        return RACES.call(
            release_once,
            what=f"release of artifact {name!r} of {self.job_id}",
            retry_on=(VersionConflict,),
            path=path,
        )

    def _holder(self, record: Artifact) -> Claim | None:
        """The claim that makes the record's place its own (None under the storage root, where
        the job's prefix is); :class:`UntrustedPayload` if the place is not the job's."""
        self.space.check(self.job_id, record.uri)
        if not self.space.claimed(record.uri):
            return None
        return self.claims.holder(self.job_id, record.name, record.uri, record.attempt)

    def _release_left(self, left: Claim, attempt: int, fence: Fence | None) -> None:
        """Release the place an attempt that is gone claimed and left without its record (its
        job's code deleted the record, say): its data was that attempt's, never this one's. The
        claim is checked as any release checks it (the job's own, nothing overlapping), and the
        data deleted only once the writer's fence holds."""
        claim = self.claims.holder(self.job_id, left.name, left.uri, left.attempt)
        assert claim.version is not None
        mark = self.claims.unclaim_ops(claim)[0].path
        self.zk.commit([Check(mark, claim.version)], fence=fence)
        what = f"artifact {left.name} of {self.job_id} at {left.uri}: attempt {left.attempt}"
        logger.warning("%s left its claim without its record: released for %d", what, attempt)
        self.space.delete(self.job_id, left.uri)
        self.zk.commit(self.claims.unclaim_ops(claim), fence=fence)
        self.claims.prune(left.uri, fence)

    def release_many(self, records: Iterable[Artifact], *, fence: Fence | None) -> list[str]:
        """Release each record; returns the names left alone because their URI is outside this
        configuration's roots (logged: their data is not ours to delete)."""
        refused = []
        for record in records:
            try:
                self.release(record.name, fence=fence)
            except UntrustedPayload as exc:
                logger.error("artifact %s of %s not released: %s", record.name, self.job_id, exc)
                refused.append(record.name)
        return refused


# -- the runtime's releases -------------------------------------------------------------------


def release_dead_attempts(store: ArtifactStore, *, fence: Fence | None) -> list[str]:
    """No attempt of the job is alive: release every attempt-scoped artifact, and finish every
    interrupted release, so that the next attempt never sees half-written or half-deleted data.
    Returns the names left alone (outside the roots)."""
    records, _ = store.all()
    dead = [r for r in records if r.scope == ATTEMPT or r.state == RELEASING]
    refused = store.release_many(dead, fence=fence)
    outputs(store).sweep(fence=fence)  # what the dead attempts staged and never committed
    return refused


def outputs(store: ArtifactStore) -> OutputStore:
    """The outputs of the artifact store's job (their data is its artifacts')."""
    return OutputStore(store.zk, store.layout, store.space, store.job_id)


def release_for_cleanup(
    store: ArtifactStore,
    results: JobResultStore,
    *,
    fence: Fence | None,
    known: JobResult | None = None,
) -> JobResult | None:
    """The job ended (its result is recorded): release every artifact but the outputs to keep,
    then everything left under the job's own prefix in the storage root; returns the job's
    result as it stands after (its ``outputs``: the kept ones, name: URI).

    Outputs to keep (``keep`` and FINISHED, of a SUCCEEDED job) are written into the result
    before anything is deleted, so that a cleanup interrupted after the records are gone still
    knows what not to sweep. Records that cannot be read are logged: nothing says where their
    data is. ``known``: the result as its writer knows it (read here if not given).
    """
    result = known if known is not None else results.get(store.job_id)
    records, unreadable = store.all()
    for name, why in unreadable.items():
        logger.error("artifact %s of %s cannot be released: %s", name, store.job_id, why)
    kept = dict(result.outputs or {}) if result is not None else {}
    if result is not None and result.outcome == SUCCEEDED:
        new = {r.name: r.uri for r in records if r.keep and r.state == FINISHED}
        if any(kept.get(name) != uri for name, uri in new.items()):
            result = results.record_outputs(store.job_id, new, fence=fence)
            kept = result.outputs or {}
    if any(n.startswith(ARTIFACT_PREFIX) for n in [*kept, *(r.name for r in records)]):
        outputs(store).settle(kept, fence=fence)  # before their data may be released
    store.release_many([r for r in records if kept.get(r.name) != r.uri], fence=fence)
    # The sweep deletes in storage, where no fence reaches: the fence is checked before the
    # first delete (a job that wrote nothing unregistered costs no check).
    swept = store.space.sweep(
        store.job_id, keep=kept.values(), before_delete=lambda: store.zk.ensure_fence(fence)
    )
    if swept:
        logger.info(
            "cleanup of %s: %d unregistered object(s) under its prefix", store.job_id, swept
        )
    return result
