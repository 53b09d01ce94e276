"""The schedule store: create, read, list, pause, resume and delete schedules.

A schedule's definition is stored once, as a job's is: a payload (a
:class:`~zkstore.jobs.definition.JobDefinition` whose ``job_id`` is the schedule's name, with
the job options of submit inside it) written create-only at a fresh key under
``<cluster>/schedules/<name>/definition/`` and signed with the schedule's key
(:mod:`zkstore.schedules.keys`), then its handle published inside the spec record
``R/schedules/<name>``, in one transaction with the schedule's first state. Invariant 1 holds
after a crash at any line: a crash before the transaction leaves an orphan payload under the
schedule's prefix and no schedule; after it, a schedule whose payload verifies.

Deleting a schedule deletes its two nodes (versioned, in one transaction), then its payload: a
crash in between leaves an orphan payload. Runs already fired are not touched: each has its own
copy of the definition, under its own job's prefix.

The leader's side (firing windows) is :mod:`zkstore.schedules.fire`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from zkstore.config import StoreConfig
from zkstore.errors import (
    ConfigError,
    CorruptPayload,
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    NotEmpty,
    OutcomeUnknown,
    StoreUnavailable,
    UntrustedPayload,
    VersionConflict,
    ZkStoreError,
)
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.sealed import DefinitionSerializer
from zkstore.layout import Layout, StorageLayout
from zkstore.payloads.entries import new_instance_id
from zkstore.payloads.storage import StateStorage
from zkstore.records.handle import Handle
from zkstore.records.strict import to_second, utc_moment
from zkstore.schedules.keys import ScheduleSigner
from zkstore.schedules.runs import validate_name
from zkstore.schedules.schedule_records import ScheduleSpec, ScheduleState
from zkstore.zookeeper.ops import Create, Deadline, Delete, Fence, Op, SetData
from zkstore.zookeeper.retry import RACES, TryAgain, within

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["BrokenSchedule", "Schedule", "ScheduleStore", "check", "commit_settled"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Schedule:
    """A schedule as read: its spec and its state, each with its znode version."""

    spec: ScheduleSpec
    state: ScheduleState

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class BrokenSchedule:
    """A schedule whose records cannot be read, and why (listing reports it, never raises)."""

    name: str
    error: ZkStoreError


class ScheduleStore:
    """The schedules of one cluster. ``storage`` signs with schedules' keys (see
    :meth:`for_config`); ``on_step`` is called between the steps of every write (tests inject
    crashes there)."""

    def __init__(
        self,
        zk: ZooKeeper,
        layout: Layout,
        storage_layout: StorageLayout,
        storage: StateStorage | Callable[[], StateStorage],
        *,
        instance_id: str | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        self.zk = zk
        self.layout = layout
        self.storage_layout = storage_layout
        self._storage = storage
        self.instance_id = instance_id or new_instance_id()
        self._on_step = on_step
        self._serializer = DefinitionSerializer()

    @property
    def storage(self) -> StateStorage:
        """The definitions' storage, built on first use when given as a function (reading
        schedules' records, ``schedules list``, never builds one: no fsspec is imported)."""
        if not isinstance(self._storage, StateStorage):
            self._storage = self._storage()
        return self._storage

    @classmethod
    def for_config(
        cls,
        config: StoreConfig,
        zk: ZooKeeper,
        *,
        instance_id: str | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> ScheduleStore:
        """The store of ``config``'s cluster over ``zk`` (a cluster's session); its storage is
        built when a definition is first written, read or discarded."""

        def storage() -> StateStorage:
            return StateStorage(
                config.storage_url,
                config.storage_options,
                signer=ScheduleSigner(config.signing_key),
                max_payload_bytes=config.max_payload_bytes,
                timeout=config.timeout,
            )

        return cls(
            zk,
            Layout(config.base_path),
            StorageLayout(config.cluster_id),
            storage,
            instance_id=instance_id,
            on_step=on_step,
        )

    def _step(self, name: str) -> None:
        if self._on_step is not None:
            self._on_step(name)

    # -- writes ----------------------------------------------------------------------------------

    def create(self, spec: ScheduleSpec, definition: JobDefinition) -> Schedule:
        """Store ``definition`` and publish the schedule ``spec`` (its ``definition`` field is
        filled in here). Durable once this returns.

        Raises :class:`~zkstore.errors.ConfigError` for a spec or definition that is not valid,
        :class:`HandleExists` if a schedule of that name exists, :class:`OutcomeUnknown` if the
        answer was lost and reading back could not settle it (the payload is kept then).
        """
        name = validate_name(spec.name)
        if definition.job_id != name:
            raise ConfigError(f"the definition of schedule {name} names {definition.job_id}")
        ref = self.storage.write(
            self.storage_layout.schedule_definitions(name),
            self._serializer.dumps(definition),
            suffix=".pkl",
        )
        self._step("create:payload-written")
        try:
            handle = Handle.for_payload(ref, self.instance_id, definition.summary())
            stored = replace(spec, definition=handle, version=None)
            check(stored)
            state = ScheduleState(version=None, updated=utc_moment())
            self.zk.ensure_path(self.layout.schedules)
            ops: list[Op] = [
                Create(self.layout.schedule(name), stored.to_bytes()),
                Create(self.layout.schedule_state(name), state.to_bytes()),
            ]
            self.commit(ops, applied=lambda: self._points_at(name, ref.uri))
        except OutcomeUnknown:
            raise
        except ZkStoreError as exc:
            self.storage.discard(ref.uri)
            if isinstance(exc, HandleExists):
                raise HandleExists(f"schedule {name} exists already", path=exc.path) from None
            raise
        self._step("create:committed")
        return Schedule(stored.with_version(0), state.with_version(0))

    def set_paused(self, name: str, paused: bool, *, now: datetime | None = None) -> ScheduleSpec:
        """Pause or resume (compare-and-set, retried on a race); the spec as written. Pausing
        a paused schedule (resuming a running one) changes nothing."""
        moment = to_second(now or datetime.now(UTC))

        def once() -> ScheduleSpec:
            spec = self.spec(name)
            if spec.paused == paused:
                return spec
            if paused:
                changed = replace(spec, paused=True, paused_at=moment, resumed_at=None)
            else:
                changed = replace(spec, paused=False, resumed_at=moment)
            assert spec.version is not None
            path = self.layout.schedule(name)
            self.commit(
                [SetData(path, changed.to_bytes(), spec.version)],
                applied=lambda: self.spec(name).paused == paused,
            )
            return changed.with_version(spec.version + 1)

        return RACES.call(
            once,
            what=f"{'pausing' if paused else 'resuming'} schedule {name}",
            retry_on=(VersionConflict,),
            path=self.layout.schedule(name),
        )

    def delete(self, name: str) -> bool:
        """Delete the schedule (its state and the leader's conditions on it in the same
        transaction, the conditions at the version read: a leader's change meanwhile makes it
        read again), then its definition payload; False if there was none. Its runs are left
        alone (each has its own copy of the definition)."""
        path, state = self.layout.schedule(name), self.layout.schedule_state(name)
        conditions = self.layout.conditions_of("schedules", name)

        def once() -> tuple[bool, Handle | None]:
            found = self.zk.get_if_exists(path)
            if found is None:
                return False, None
            ops: list[Op] = [Delete(path, found[1].version)]
            state_stat, conditions_stat = self.zk.exists_many([state, conditions])
            if state_stat is not None:
                ops.insert(0, Delete(state))
            if conditions_stat is not None:
                ops.append(Delete(conditions, conditions_stat.version))
            try:
                handle: Handle | None = ScheduleSpec.from_znode(found[0], found[1], path).handle
            except CorruptRecord:
                handle = None  # garbage: delete the nodes, leave any payload for cleanup
            self.commit(ops, applied=lambda: self.zk.exists(path) is None)
            return True, handle

        deleted, handle = RACES.call(
            once,
            what=f"deleting schedule {name}",
            retry_on=(HandleNotFound, VersionConflict, NotEmpty),
            path=path,
        )
        if not deleted:
            return False
        self._step("delete:deleted")
        if handle is not None and self.storage.is_under(
            handle.uri, self.storage_layout.schedule_definitions(name)
        ):
            self.discard_quietly(handle.uri)
        return True

    def commit(self, ops: list[Op], *, applied: Callable[[], bool]) -> None:
        """Commit ``ops``, a lost answer settled by ``applied`` (:func:`commit_settled`)."""
        commit_settled(self.zk, ops, applied=applied)

    @property
    def serializer(self) -> DefinitionSerializer:
        """How definitions are written (and read sealed)."""
        return self._serializer

    def discard_quietly(self, uri: str) -> None:
        """Delete a payload no record names any more; storage out of reach leaves it to
        ``handles cleanup`` (an orphan under the schedule's prefix)."""
        with contextlib.suppress(StoreUnavailable):
            self.storage.discard(uri)

    def _points_at(self, name: str, uri: str) -> bool:
        try:
            return self.spec(name).handle.uri == uri
        except (HandleNotFound, CorruptRecord):
            return False

    # -- reads -----------------------------------------------------------------------------------

    def spec(self, name: str) -> ScheduleSpec:
        """The schedule's spec; :class:`HandleNotFound` if there is none,
        :class:`CorruptRecord` if it is garbage."""
        path = self.layout.schedule(name)
        data, stat = self.zk.get(path)
        return ScheduleSpec.from_znode(data, stat, path)

    def get(self, name: str) -> Schedule:
        """Spec and state, read together (pipelined); :class:`HandleNotFound` if the schedule
        does not exist, :class:`CorruptRecord` if either record is garbage."""
        spec_path, state_path = self.layout.schedule(name), self.layout.schedule_state(name)
        found_spec, found_state = self.zk.get_many([spec_path, state_path])
        if found_spec is None:
            raise HandleNotFound(f"no schedule {name!r}", path=spec_path)
        if found_state is None:
            raise CorruptRecord(f"{state_path}: missing (the schedule has no state)")
        return Schedule(
            ScheduleSpec.from_znode(*found_spec, spec_path),
            ScheduleState.from_znode(*found_state, state_path),
        )

    def names(self) -> list[str]:
        try:
            return sorted(self.zk.children(self.layout.schedules))
        except HandleNotFound:
            return []

    def all(self) -> tuple[list[Schedule], list[BrokenSchedule]]:
        """Every schedule (pipelined reads); the unreadable ones reported apart."""
        names = self.names()
        paths = [p for n in names for p in (self.layout.schedule(n), self.layout.schedule_state(n))]
        found = self.zk.get_many(paths)
        good: list[Schedule] = []
        broken: list[BrokenSchedule] = []
        for index, name in enumerate(names):
            spec, state = found[2 * index], found[2 * index + 1]
            try:
                if spec is None or state is None:
                    raise CorruptRecord(f"schedule {name}: its spec or state is missing")
                good.append(
                    Schedule(
                        ScheduleSpec.from_znode(*spec, paths[2 * index]),
                        ScheduleState.from_znode(*state, paths[2 * index + 1]),
                    )
                )
            except CorruptRecord as exc:
                broken.append(BrokenSchedule(name, exc))
        return good, broken

    def check_payload(self, spec: ScheduleSpec) -> None:
        """Read the schedule's definition payload and check where it is, its size, sha256 and
        signature, without unpickling it (``handles verify``). Raises a
        :class:`~zkstore.errors.PayloadError` saying what is wrong, or :class:`StoreUnavailable`."""
        handle = spec.handle
        if not self.storage.is_under(
            handle.uri, self.storage_layout.schedule_definitions(spec.name)
        ):
            raise UntrustedPayload(
                f"the definition of schedule {spec.name} is not under its own prefix"
            )
        self.storage.read(handle.ref)

    def definition(self, spec: ScheduleSpec) -> JobDefinition:
        """The schedule's definition: read only from under its own prefix, verified (size,
        sha256, the schedule's signature) before it is unpickled. Raises a
        :class:`~zkstore.errors.PayloadError` or :class:`StoreUnavailable`."""
        handle = spec.handle
        if not self.storage.is_under(
            handle.uri, self.storage_layout.schedule_definitions(spec.name)
        ):
            raise UntrustedPayload(
                f"the definition of schedule {spec.name} is not under its own prefix"
            )
        definition = self._serializer.loads(self.storage.read(handle.ref))
        if not isinstance(definition, JobDefinition) or definition.job_id != spec.name:
            raise CorruptPayload(f"the payload of schedule {spec.name} is not its definition")
        return definition


def check(spec: ScheduleSpec) -> None:
    """Raise :class:`~zkstore.errors.ConfigError` unless ``spec`` is one the store would
    accept back (what its strict parser checks)."""
    problem = spec.problem()
    if problem is not None:
        raise ConfigError(f"schedule {spec.name}: {problem}")


def commit_settled(
    zk: ZooKeeper, ops: list[Op], *, applied: Callable[[], bool], fence: Fence | None = None
) -> None:
    """Commit ``ops`` (fenced); a lost answer is read back with ``applied`` and, if the write is
    not there, sent again: the ops are conditional, so a second apply fails and the read back
    sees the first. Raises the transaction's error, or :class:`OutcomeUnknown` if nothing
    settled it within the session's call deadline."""
    deadline = Deadline(zk.timeout)
    uncertain = False

    def once() -> None:
        nonlocal uncertain
        try:
            zk.commit(ops, fence=fence, timeout=max(deadline.remaining(), 0.5))
        except OutcomeUnknown as exc:
            uncertain = True
            if not _quietly(applied):
                raise TryAgain(f"answer lost ({exc}), the write not found") from exc
        except ZkStoreError:
            if not (uncertain and _quietly(applied)):
                raise

    within(deadline.seconds).call(
        once, what="a schedule write (it may or may not be applied)", error=OutcomeUnknown
    )


def _quietly(applied: Callable[[], bool]) -> bool:
    try:
        return applied()
    except StoreUnavailable:
        return False
