"""The control plane of one job in the store: desired, acknowledged, declared, and its history.

The desired object (``R/jobs/<job>/control``) is changed by anybody with a compare-and-set:
:meth:`ControlStore.set` checks the keys and values (against the job's declaration, once it has
one) before anything is stored, stores the change in one transaction with a check that the job
is still current, then records it in the history. The driver of the live attempt writes the
acknowledgement and the declaration, each fenced on its attempt (:meth:`acknowledge`,
:meth:`declare`): a superseded attempt's write is refused by ZooKeeper.

A crash between storing a change and recording it in the history leaves the change without its
entry (a gap in the versions the history shows); nothing else is left half done, since each write
is one transaction. This is the Python API of ``zkstore control`` (and of the HTTP API).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from zkstore.errors import (
    ConfigError,
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    JobNotFound,
    NewerRecord,
    SerializationError,
    StoreUnavailable,
    VersionConflict,
    WaitTimeout,
    WrongState,
    ZkStoreError,
)
from zkstore.jobs.control.control_history import ControlHistory, HistoryEntry, diff
from zkstore.jobs.control.control_records import ControlAck, ControlKeys
from zkstore.jobs.control.values import DeclaredKey, is_builtin, value_error
from zkstore.jobs.job_state_store import who
from zkstore.layout import Layout, StorageLayout, validate_job_id
from zkstore.payloads.storage import StateStorage
from zkstore.records.job_records import ControlObject
from zkstore.records.record import Record, read_record
from zkstore.records.strict import escape_control, time_text, utc_moment
from zkstore.zookeeper.ops import Check, Create, Fence, Op, SetData
from zkstore.zookeeper.retry import RACES, TryAgain
from zkstore.zookeeper.watch import NodeWatch

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["ControlChange", "ControlStore", "Declared", "Desired"]

logger = logging.getLogger(__name__)

R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class Desired:
    """The desired control object and its znode version (``None``: never set)."""

    values: dict[str, Any]
    version: int | None
    #: what an unreadable object held (cut short), which a change replaces
    replaced: str | None = None


@dataclass(frozen=True)
class ControlChange:
    """What :meth:`ControlStore.set` did: the version now stored and each key's old and new
    value (empty if the values were already so: nothing was written)."""

    job_id: str
    version: int | None
    previous: int | None
    values: dict[str, Any]
    changes: dict[str, dict[str, Any]]
    by: str
    when: datetime
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "version": self.version,
            "previous": self.previous,
            "values": self.values,
            "changes": self.changes,
            "by": self.by,
            "when": time_text(self.when),
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class Declared:
    """The job's declared keys (``None``: it declared none), or why they cannot be read."""

    keys: dict[str, DeclaredKey] | None
    record: ControlKeys | None = None
    error: str | None = None


@dataclass
class _Merge:
    updates: Mapping[str, Any]
    replace: bool
    remove: tuple[str, ...] = field(default_factory=tuple)

    def apply(self, current: dict[str, Any]) -> dict[str, Any]:
        if self.replace:
            merged = {k: v for k, v in current.items() if is_builtin(k)}
        else:
            merged = dict(current)
        merged.update(self.updates)
        for key in self.remove:
            merged.pop(key, None)
        return merged


class ControlStore:
    """Read and change the control plane of one job."""

    def __init__(
        self,
        zk: ZooKeeper,
        layout: Layout,
        storage: StateStorage,
        storage_layout: StorageLayout,
        job_id: str,
        *,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        self._on_step = on_step or (lambda step: None)  # crash points, for the tests
        self.zk = zk
        self.layout = layout
        self.job_id = validate_job_id(job_id)
        self.path = layout.control(job_id)
        self.ack_path = layout.control_ack(job_id)
        self.keys_path = layout.control_keys(job_id)
        self.history = ControlHistory(storage, storage_layout.control_history(job_id))

    # -- desired (anybody) -----------------------------------------------------------------------

    def desired(self) -> Desired:
        """The desired object; :class:`CorruptRecord` if the node holds no JSON object."""
        found = read_record(self.zk, ControlObject, self.path)
        return Desired({}, None) if found is None else Desired(found.values, found.version)

    def set(
        self,
        updates: Mapping[str, Any],
        *,
        expect_version: int | None = None,
        replace: bool = False,
        remove: tuple[str, ...] = (),
        by: str | None = None,
    ) -> ControlChange:
        """Change the desired object: merge ``updates`` into it (``replace``: instead of the job's
        keys; built-in controls are kept unless given), less the keys in ``remove``.

        Refused before anything is stored: a key or value that is not valid, or (once the job
        declared its keys) an unknown key or a value of the wrong type (:class:`ConfigError`);
        ``expect_version`` that is not the stored version (:class:`VersionConflict`); a job that
        is not current (:class:`WrongState`, :class:`JobNotFound`). Without ``expect_version``,
        a concurrent change is merged again (:data:`~zkstore.zookeeper.retry.RACES`). The change is
        then recorded in the history; a failure there is a warning of the result, not an error.
        """
        declared = self.declared()
        warnings: tuple[str, ...] = ()
        if declared.error is not None:
            warnings = (f"the job's declared keys are unreadable, not checked: {declared.error}",)
        for key, value in updates.items():
            problem = value_error(key, value, declared.keys)
            if problem is not None:
                raise ConfigError(f"job {self.job_id}: {key}={json.dumps(value)}: {problem}")
        merge = _Merge(dict(updates), replace, tuple(remove))

        def set_once() -> ControlChange:
            current = self._replaceable()
            if expect_version is not None and current.version != expect_version:
                raise VersionConflict(
                    f"job {self.job_id}: control is at version "
                    f"{'none' if current.version is None else current.version}, "
                    f"not {expect_version}",
                    path=self.path,
                )
            merged = merge.apply(current.values)
            try:
                return self._store(current, merged, by or who(), warnings)
            except (VersionConflict, HandleExists) as exc:
                if expect_version is not None or exc.path not in (self.path, None):
                    raise
                raise TryAgain(f"changed meanwhile: {exc}") from exc

        return RACES.call(set_once, what=f"control of job {self.job_id}", path=self.path)

    def _replaceable(self) -> Desired:
        """The desired object, or, when the node holds something no reader takes for one
        (garbage, planted by hand), what it held: a change replaces it at its version. One
        written by a newer zkstore is not garbage (:class:`NewerRecord` is raised)."""
        try:
            return self.desired()
        except NewerRecord:
            raise
        except CorruptRecord:
            found = self.zk.get_if_exists(self.path)
            if found is None:
                return Desired({}, None)
            text = escape_control(found[0][:200].decode("utf-8", errors="replace"))
            return Desired({}, found[1].version, replaced=text)

    def _store(
        self, current: Desired, merged: dict[str, Any], by: str, warnings: tuple[str, ...]
    ) -> ControlChange:
        changes = diff(current.values, merged)
        when = utc_moment()
        if current.replaced is not None:
            warnings += (
                f"replaced an unreadable control object (version {current.version}), which "
                f"held: {current.replaced}",
            )
        elif not changes and current.version is not None:
            return ControlChange(
                self.job_id, current.version, current.version, merged, {}, by, when, warnings
            )
        data = ControlObject(version=None, values=merged).to_bytes()
        try:
            ControlObject.from_znode(data, None, self.path)  # what readers will accept
        except CorruptRecord as exc:
            raise ConfigError(f"control object refused: {exc}") from None
        self._commit(current.version, data)
        self._on_step("control:stored")
        version = 0 if current.version is None else current.version + 1
        entry = HistoryEntry(version, current.version, by, when, changes)
        try:
            self.history.record(entry)
            self._on_step("control:recorded")
        except (ZkStoreError, SerializationError) as exc:
            warnings += (f"version {version} is stored, but not in the history: {exc}",)
            logger.info("control history of %s: %s", self.job_id, exc)
        return ControlChange(
            self.job_id, version, current.version, merged, changes, by, when, warnings
        )

    def _commit(self, version: int | None, data: bytes) -> None:
        """Store ``data`` at ``version`` in one transaction with a check that the job is current:
        its handle exists and it has no result (a finished job keeps its handle until the
        leader has cleaned it up)."""
        handle = self.layout.job_handle(self.job_id)
        ops: list[Op] = [Check(handle)]
        if version is None:
            if self.zk.exists(self.layout.job_dir(self.job_id)) is None:
                ops.append(Create(self.layout.job_dir(self.job_id)))
            ops.append(Create(self.path, data))
        else:
            ops.append(SetData(self.path, data, version))
        finished = Fence.absent(
            self.layout.result(self.job_id),
            error=WrongState,
            description=f"job {self.job_id} is not current (finished)",
        )
        try:
            self.zk.commit(ops, fence=finished)
        except HandleNotFound as exc:
            if exc.path == handle:
                raise self._not_current() from None
            raise VersionConflict(f"{self.path} was removed meanwhile", path=self.path) from exc
        except HandleExists as exc:
            # the job's directory or the object appeared meanwhile: read again and merge
            raise HandleExists(str(exc), path=self.path) from exc

    def _not_current(self) -> ZkStoreError:
        traces = self.zk.exists_many(
            [self.layout.result(self.job_id), self.layout.quarantine_entry(self.job_id)]
        )
        if traces[1] is not None:
            return WrongState(
                f"job {self.job_id} is quarantined, not current: `zkstore quarantine release "
                f"{self.job_id}` runs it again, `zkstore jobs cancel {self.job_id}` ends it "
                "(and any driver of it still running)"
            )
        if traces[0] is not None:
            return WrongState(f"job {self.job_id} is not current (finished)")
        return JobNotFound(f"no job {self.job_id!r} in this cluster")

    # -- acknowledgement and declaration (the driver of the live attempt, fenced) ---------------

    def acknowledgement(self) -> ControlAck | None:
        """The last acknowledgement, or None; :class:`CorruptRecord` if it does not parse."""
        found = self._get(self.ack_path)
        return None if found is None else ControlAck.from_znode(*found, self.ack_path)

    def acknowledge(self, ack: ControlAck, *, fence: Fence) -> ControlAck:
        """Replace the acknowledgement with ``ack``, fenced on the writer's attempt; returns it
        with its new znode version. ``ack.version`` is the version it replaces (None: whatever
        is there); a concurrent writer is overwritten only through the fence: the live attempt
        owns the record. Raises the fence's error when the attempt lost its standing."""
        return self._replace(self.ack_path, ack, fence)

    def declared(self) -> Declared:
        """The keys the job declared; an unreadable declaration is reported, not raised."""
        try:
            found = self._get(self.keys_path)
            if found is None:
                return Declared(None)
            record = ControlKeys.from_znode(*found, self.keys_path)
        except CorruptRecord as exc:
            return Declared(None, error=str(exc))
        return Declared(record.declared_keys(), record)

    def declare(self, record: ControlKeys, *, fence: Fence) -> ControlKeys:
        """Replace the declaration, fenced on the writer's attempt."""
        return self._replace(self.keys_path, record, fence)

    def _get(self, path: str) -> tuple[bytes, Any] | None:
        try:
            return self.zk.get(path)
        except HandleNotFound:
            return None

    def _replace(self, path: str, record: R, fence: Fence) -> R:
        expected = record.version  # the version to replace; None: whatever is there now

        def replace_once() -> R:
            nonlocal expected
            version = expected
            if version is None:
                stat = self.zk.exists(path)
                version = None if stat is None else stat.version
            op: Op = (
                Create(path, record.to_bytes())
                if version is None
                else SetData(path, record.to_bytes(), version)
            )
            try:
                self.zk.commit([op], fence=fence)
            except (VersionConflict, HandleExists, HandleNotFound) as exc:
                if isinstance(exc, HandleNotFound) and exc.path != path:
                    raise
                logger.info("%s changed under its writer (%s): writing again", path, exc)
                expected = None
                raise TryAgain(str(exc)) from exc
            return record.with_version(0 if version is None else version + 1)

        return RACES.call(replace_once, what=f"replacing {path}", path=path)

    # -- waiting -------------------------------------------------------------------------------

    def wait(self, done: Callable[[ControlAck], bool], *, timeout: float, what: str) -> ControlAck:
        """Block until an acknowledgement satisfies ``done``; :class:`WaitTimeout` (exit 7) after
        ``timeout`` seconds. An unreadable acknowledgement is waited past, not raised."""
        changed = threading.Event()
        watch = NodeWatch(self.zk, self.ack_path, lambda _: changed.set())
        end = time.monotonic() + timeout
        try:
            while True:
                changed.clear()
                try:
                    ack = self.acknowledgement()
                except (CorruptRecord, StoreUnavailable) as exc:
                    logger.warning("waiting on %s: %s", self.ack_path, exc)
                    ack = None
                if ack is not None and done(ack):
                    return ack
                remaining = end - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeout(f"job {self.job_id}: {what} within {timeout:g} s")
                changed.wait(min(remaining, 5.0))  # the bound covers a watch lost to a reconnect
        finally:
            watch.stop()

    def wait_applied(self, version: int, *, timeout: float) -> ControlAck:
        """Block until an attempt acknowledged ``version`` (or a later one)."""
        return self.wait(
            lambda ack: ack.applied_version >= version,
            timeout=timeout,
            what=f"no attempt acknowledged control version {version}",
        )
