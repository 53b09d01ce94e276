"""The state handle store: payloads in object storage, small verified handles in ZooKeeper.

Layout under the store's ZooKeeper path ``P``::

    P/<name>                      JSON handle (see :mod:`zkstore.records.handle`)
    P/<name>/locks                present while the entry is live; absent = marked for deletion
    P/<name>/locks/<instance>     EPHEMERAL lock of a store instance using the entry

Invariant 1, *handle in ZooKeeper ⇒ payload exists and verifies*, holds after a crash at any line:
a payload is written (create-only, fresh key) before the transaction that publishes its handle, and
discarded only after the handle stopped pointing at it (replaced, or marked for deletion). A crash
can leave an orphan payload, never a dangling live handle. A node marked for deletion counts as
absent everywhere; :meth:`ZooKeeperStateHandleStore.remove` finishes it.

Why one module: invariant 1 is an order of writes and deletes across add, replace, release
and remove; one class keeps that order in one place, where a reviewer can see it whole.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Generic, TypeVar

from zkstore.errors import (
    CorruptHandle,
    CorruptRecord,
    FenceLost,
    HandleExists,
    HandleNotFound,
    InvalidName,
    NotEmpty,
    OutcomeUnknown,
    PayloadError,
    PayloadMissing,
    StoreUnavailable,
    UntrustedPayload,
    VersionConflict,
    ZkStoreError,
)
from zkstore.payloads.entries import Broken, Entry, GetAllResult, new_instance_id
from zkstore.payloads.serializers import Serializer
from zkstore.payloads.storage import StateStorage
from zkstore.records.handle import Handle, PayloadRef, SummaryValue
from zkstore.zookeeper.ops import Check, Create, Deadline, Delete, Fence, Op, SetData
from zkstore.zookeeper.retry import RACES, TryAgain, within

if TYPE_CHECKING:
    from kazoo.protocol.states import ZnodeStat

    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["LOCKS", "MAX_PUBLISH_DELAY", "ZooKeeperStateHandleStore", "is_marked"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

LOCKS = "locks"


def is_marked(stat: ZnodeStat) -> bool:
    """True if the entry whose stat this is is marked for deletion: its ``locks`` child is gone.

    ``locks`` is an entry's only child, so a childless entry node is a marked one. A marked entry
    counts as absent everywhere; :meth:`ZooKeeperStateHandleStore.remove` finishes it.
    """
    return bool(stat.numChildren == 0)


#: A handle is never published for a payload written longer ago than this. Lingering-payload
#: cleanup relies on it: a payload older than this (plus clock skew) that no handle references
#: will never be referenced, so it is garbage.
MAX_PUBLISH_DELAY = 60.0
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class ZooKeeperStateHandleStore(Generic[T]):
    """Entries of one kind under one ZooKeeper path, with payloads under storage prefixes.

    ``payload_prefix(name)`` gives the storage key prefix of an entry's payloads (it must name the
    owner, e.g. ``<cluster>/jobs/<job>/definition``). ``on_step`` is called with a step name
    between the steps of every write; tests use it to inject crashes. ``workers`` bounds the
    parallel payload fetches of :meth:`get_all` on remote storage (local reads run in line: threads
    only contend with kazoo's I/O thread there).
    """

    def __init__(
        self,
        zk: ZooKeeper,
        path: str,
        storage: StateStorage,
        serializer: Serializer[T],
        *,
        payload_prefix: Callable[[str], str],
        instance_id: str | None = None,
        workers: int = 16,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        self.zk = zk
        self.path = path.rstrip("/")
        self.storage = storage
        self.serializer = serializer
        self.payload_prefix = payload_prefix
        self.instance_id = instance_id or new_instance_id()
        self.workers = workers
        self._on_step = on_step
        self._locked: set[str] = set()

    def __repr__(self) -> str:
        return f"ZooKeeperStateHandleStore({self.path!r}, {self.storage!r})"

    # -- paths -----------------------------------------------------------------------------------

    def node(self, name: str) -> str:
        if not _NAME_RE.fullmatch(name) or name in {".", ".."}:
            raise InvalidName(f"invalid entry name {name!r}")
        return f"{self.path}/{name}"

    def _locks(self, name: str) -> str:
        return f"{self.node(name)}/{LOCKS}"

    def _lock(self, name: str) -> str:
        return f"{self._locks(name)}/{self.instance_id}"

    def _step(self, step: str) -> None:
        if self._on_step is not None:
            self._on_step(step)

    # -- writes ----------------------------------------------------------------------------------

    def add(
        self,
        name: str,
        state: T,
        *,
        summary: Mapping[str, SummaryValue] | None = None,
        fence: Fence | None = None,
        stem: str = "",
        lock: bool = True,
        with_ops: Sequence[Op] = (),
    ) -> Handle:
        """Store ``state`` and publish its handle under ``name``, locked by this instance
        (unless ``lock`` is False), in one transaction with ``with_ops`` (what the caller
        records with the entry: a schedule's state, say; their failure fails the publish).

        Raises :class:`HandleExists` if a live entry has that name (a node marked for deletion is
        removed first, then replaced), ``fence.error`` if the fence is lost, the error of a
        failing op of ``with_ops`` (with its ``path``), or :class:`OutcomeUnknown` if the answer
        was lost and could not be resolved (payload kept). On every other failure the new
        payload is discarded.
        """
        node = self.node(name)
        handle, written = self._write_payload(name, state, summary, stem)
        self._step("add:payload-written")
        ops = [*self.publish_ops(name, handle, lock=lock), *with_ops]

        def publish() -> None:
            self._commit(
                ops, fence, applied=lambda: self._points_at(node, handle.uri), written=written
            )

        with self._discard_on_failure(handle):
            try:
                publish()
            except HandleExists as exc:
                if exc.path != node:
                    raise  # a fence guard's error, e.g. "this job already has a result"
                if not self._is_marked(node):
                    raise HandleExists(f"{node} exists already", path=node) from None
                logger.info("%s is marked for deletion: finishing its removal first", node)
                self.remove(name)
                publish()
        if lock:
            self._locked.add(name)
        self._step("add:committed")
        return replace(handle, version=0)

    def add_many(
        self,
        entries: Sequence[tuple[str, T, Mapping[str, SummaryValue] | None]],
        *,
        fence: Fence | None = None,
        lock: bool = True,
        with_ops: Sequence[Op] = (),
    ) -> list[Handle]:
        """Store several ``(name, state, summary)`` and publish their handles in ONE
        transaction with ``with_ops``: all of them or none. The payloads are written first, at
        once (each create-only at a fresh key; fsyncs and requests overlap), then the handles
        are published, so invariant 1 holds as in :meth:`add`.

        Raises as :meth:`add` does, except that a name whose node is only marked for deletion
        raises :class:`HandleExists` too (:meth:`add` alone finishes such a removal first). The
        caller keeps the whole under ZooKeeper's request limit (each handle is at most
        :data:`~zkstore.records.handle.MAX_HANDLE_BYTES`). On every failure but
        :class:`OutcomeUnknown` the new payloads are discarded.
        """
        if not entries:
            return []
        nodes = [self.node(name) for name, _, _ in entries]
        workers = max(1, min(self.workers, len(entries)))
        with ThreadPoolExecutor(workers, thread_name_prefix="zkstore-add") as pool:
            futures = [
                pool.submit(self._write_payload, name, state, summary, "")
                for name, state, summary in entries
            ]
            written = [_settled(future) for future in futures]
        failed = next((item for item in written if isinstance(item, Exception)), None)
        if failed is not None:
            for item in written:
                if not isinstance(item, Exception):
                    self.storage.discard(item[0].uri)
            raise failed
        made = [item for item in written if not isinstance(item, Exception)]
        self._step("add:payload-written")
        ops = [
            op
            for (name, _, _), (handle, _) in zip(entries, made, strict=True)
            for op in self.publish_ops(name, handle, lock=lock)
        ]
        first_node, first = nodes[0], made[0][0]
        with contextlib.ExitStack() as stack:
            for handle, _ in made:
                stack.enter_context(self._discard_on_failure(handle))
            self._commit(
                [*ops, *with_ops],
                fence,
                applied=lambda: self._points_at(first_node, first.uri),
                written=min(when for _, when in made),
            )
        if lock:
            self._locked.update(name for name, _, _ in entries)
        self._step("add:committed")
        return [replace(handle, version=0) for handle, _ in made]

    def publish_ops(self, name: str, handle: Handle, *, lock: bool = True) -> list[Op]:
        """The ops that publish a live entry: its handle, its ``locks`` child and (with ``lock``)
        this instance's lock. The payload must be written first (invariant 1)."""
        node = self.node(name)
        ops: list[Op] = [Create(node, handle.to_bytes()), Create(f"{node}/{LOCKS}")]
        if lock:
            ops.append(Create(self._lock(name), ephemeral=True))
        return ops

    def removal_ops(self, name: str) -> tuple[bytes, ZnodeStat, list[Op]] | None:
        """The entry's data and stat, and the ops that delete it with its locks in one
        transaction, or None if it does not exist. The payload is left alone: whoever commits the
        ops decides what becomes of it (quarantine keeps a copy of the handle that references it).
        The delete is versioned: if the entry changes meanwhile, the transaction fails.
        """
        node = self.node(name)
        try:
            data, stat = self.zk.get(node)
        except HandleNotFound:
            return None
        ops: list[Op] = []
        if not is_marked(stat):
            locks = f"{node}/{LOCKS}"
            try:
                holders = self.zk.children(locks)
            except HandleNotFound:
                holders = None  # marked meanwhile: the versioned delete below decides
            if holders is not None:
                ops += [Delete(f"{locks}/{holder}") for holder in holders] + [Delete(locks)]
        ops.append(Delete(node, stat.version))
        return data, stat, ops

    def replace(
        self,
        name: str,
        expected_version: int,
        state: T,
        *,
        summary: Mapping[str, SummaryValue] | None = None,
        fence: Fence | None = None,
        stem: str = "",
    ) -> Handle:
        """Replace the entry's state if its znode is still at ``expected_version``.

        The summary is kept unless a new one is given.
        Raises :class:`VersionConflict` if it changed (the new payload is discarded),
        :class:`HandleNotFound` if it is gone or marked. On success the old payload is discarded
        (a crash right before that leaves it as an orphan).
        """
        node = self.node(name)
        data, stat = self.zk.get(node)
        if is_marked(stat):
            raise HandleNotFound(f"{node} is marked for deletion", path=node)
        if stat.version != expected_version:
            raise VersionConflict(
                f"{node} is at version {stat.version}, not {expected_version}", path=node
            )
        try:
            old: Handle | None = Handle.from_znode(data, stat, node)
        except CorruptHandle:
            old = None
        if summary is None and old is not None:
            summary = old.summary
        new, written = self._write_payload(name, state, summary, stem)
        self._step("replace:payload-written")
        ops: list[Op] = [Check(f"{node}/{LOCKS}"), SetData(node, new.to_bytes(), expected_version)]
        with self._discard_on_failure(new):
            self._commit(
                ops, fence, applied=lambda: self._points_at(node, new.uri), written=written
            )
        self._step("replace:committed")
        if old is not None and old.uri != new.uri and self._owns(name, old):
            self._discard_quietly(old.uri)
        self._step("replace:old-discarded")
        return replace(new, version=expected_version + 1)

    def _write_payload(
        self, name: str, state: T, summary: Mapping[str, SummaryValue] | None, stem: str
    ) -> tuple[Handle, float]:
        """Serialize and write ``state``; the handle that would point at it, and when it was
        written. A handle that cannot be built (too big) discards the payload again."""
        ref = self.storage.write(
            self.payload_prefix(name),
            self.serializer.dumps(state),
            suffix=self.serializer.suffix,
            stem=stem,
        )
        written = time.monotonic()
        with self._discard_on_failure(ref.uri):
            return Handle.for_payload(ref, self.instance_id, summary), written

    @contextlib.contextmanager
    def _discard_on_failure(self, target: Handle | str) -> Iterator[None]:
        """Discard the new payload if the block fails, unless the outcome is unknown (then the
        handle may have been published: keeping the payload keeps invariant 1)."""
        uri = target.uri if isinstance(target, Handle) else target
        try:
            yield
        except OutcomeUnknown:
            raise
        except ZkStoreError:
            self.storage.discard(uri)
            raise

    def release(self, name: str) -> None:
        """Drop this instance's lock on ``name`` (idempotent).

        A lock this instance does not know it holds is looked for first (one taken by a create
        whose answer was lost): a read, where deleting blindly would cost a failed write in
        ZooKeeper's log for every entry removed by an instance that never locked it.
        """
        lock = self._lock(name)
        if name in self._locked or self.zk.exists(lock) is not None:
            with contextlib.suppress(HandleNotFound):
                self.zk.delete(lock)
        self._locked.discard(name)

    def release_all(self) -> None:
        """Drop every lock this instance holds."""
        for name in sorted(self._locked):
            self.release(name)

    def remove(self, name: str, *, fence: Fence | None = None) -> bool:
        """Release our lock, then remove the entry and its payload unless someone else holds it.

        Returns False (and changes nothing else) while another instance holds a lock; True once
        the entry is gone. Steps: mark (delete ``locks``), discard the payload, delete the node.
        Each is idempotent, so calling again after a failure at any point finishes the job.
        """
        node = self.node(name)
        self.release(name)
        self._step("remove:lock-released")
        try:
            self._commit([Delete(f"{node}/{LOCKS}")], fence, applied=lambda: self._is_marked(node))
        except NotEmpty:
            logger.debug("%s is still locked by another instance", node)
            return False
        except HandleNotFound:
            pass  # already marked, or the node is gone
        self._step("remove:marked")
        try:
            data, stat = self.zk.get(node)
        except HandleNotFound:
            return True
        try:
            self.storage.discard(self.payload_ref(name, Handle.from_znode(data, stat, node)).uri)
        except (CorruptHandle, UntrustedPayload) as exc:
            # Never delete what is not this entry's own: a handle copied from elsewhere must not
            # take another job's payload with it.
            logger.warning("removing %s: its payload is left alone (%s)", node, exc)
        self._step("remove:payload-discarded")
        with contextlib.suppress(HandleNotFound):
            self._commit([Delete(node)], fence, applied=lambda: self.zk.exists(node) is None)
        self._step("remove:deleted")
        return True

    def _commit(
        self,
        ops: list[Op],
        fence: Fence | None,
        *,
        applied: Callable[[], bool],
        written: float | None = None,
    ) -> None:
        """Commit, resolving a lost answer by reading back and, if not applied, retrying.

        Retrying the same ops is safe: if the first attempt was applied after all, the retry fails
        and the read-back sees it. Unresolved by the deadline: :class:`OutcomeUnknown`. No attempt
        is sent later than :data:`MAX_PUBLISH_DELAY` after the payload was ``written``.
        """
        deadline = Deadline(self.zk.timeout)
        uncertain = False

        def commit_once() -> None:
            nonlocal uncertain
            window = None if written is None else written + MAX_PUBLISH_DELAY - time.monotonic()
            if window is not None and window <= 0:
                raise OutcomeUnknown(
                    f"write under {self.path} could not be published within "
                    f"{MAX_PUBLISH_DELAY:g} s of its payload; the payload is left for cleanup"
                )
            timeout = max(deadline.remaining(), 0.5)
            try:
                self.zk.commit(
                    ops, fence=fence, timeout=timeout if window is None else min(timeout, window)
                )
            except OutcomeUnknown as exc:
                uncertain = True
                if not self._applied_quietly(applied):
                    raise TryAgain(f"answer lost ({exc}), the write not found") from exc
            except (HandleExists, HandleNotFound, VersionConflict, NotEmpty, FenceLost):
                if not (uncertain and self._applied_quietly(applied)):
                    raise

        within(deadline.seconds).call(
            commit_once,
            what=f"write under {self.path} (it may or may not have been applied; its payload "
            "is kept)",
            error=OutcomeUnknown,
        )

    def _applied_quietly(self, applied: Callable[[], bool]) -> bool:
        try:
            return applied()
        except StoreUnavailable:
            return False

    def payload_ref(self, name: str, handle: Handle) -> PayloadRef:
        """The handle's payload reference, if it points where this entry's payloads live.

        A handle whose URI is anywhere else (copied from another job, another kind of entry or
        another cluster) raises :class:`UntrustedPayload`: it is never read, and never discarded.
        """
        if not self._owns(name, handle):
            raise UntrustedPayload(
                f"{handle.uri!r:.200} is not where the payloads of {self.path}/{name} live "
                f"({self.storage.url(self.payload_prefix(name))}/)"
            )
        return handle.ref

    def _owns(self, name: str, handle: Handle) -> bool:
        return self.storage.is_under(handle.uri, self.payload_prefix(name))

    def _points_at(self, node: str, uri: str) -> bool:
        try:
            data, stat = self.zk.get(node)
        except HandleNotFound:
            return False
        try:
            return Handle.from_znode(data, stat, node).uri == uri
        except CorruptRecord:  # garbage, or a newer protocol's handle: not ours either way
            return False

    def _is_marked(self, node: str) -> bool:
        stat = self.zk.exists(node)
        return stat is not None and is_marked(stat)

    def _discard_quietly(self, uri: str) -> None:
        try:
            self.storage.discard(uri)
        except StoreUnavailable as exc:
            logger.warning(
                "could not discard replaced payload %s (left as an orphan): %s", uri, exc
            )

    # -- reads -----------------------------------------------------------------------------------

    def get(self, name: str, *, lock: bool = True) -> Entry[T]:
        """Lock (by default) and return the entry with its verified, deserialized state.

        Raises :class:`HandleNotFound` (absent or marked), :class:`CorruptHandle`, a
        :class:`PayloadError` subclass, or :class:`StoreUnavailable`. If the read fails, a lock
        taken by this call is released again.
        """
        node = self.node(name)
        newly_locked = lock and self._take_lock(name)
        try:
            return self._read_entry(name, node)
        except ZkStoreError:
            if newly_locked:
                self.release(name)
            raise

    def lock_op(self, name: str) -> Op:
        """The op that takes this instance's lock on ``name`` in the caller's own transaction
        (one write, not two); call :meth:`taken` once it is committed. It fails with
        :class:`HandleNotFound` on the ``locks`` node if the entry is gone or being removed."""
        return Create(self._lock(name), ephemeral=True)

    def taken(self, name: str) -> None:
        """The transaction with :meth:`lock_op` was committed: this instance holds the lock."""
        self._locked.add(name)

    def _take_lock(self, name: str) -> bool:
        try:
            self.zk.create(self._lock(name), ephemeral=True)
        except HandleExists:
            return False
        except HandleNotFound:
            raise HandleNotFound(
                f"{self.node(name)} does not exist or is marked for deletion"
            ) from None
        self._locked.add(name)
        return True

    def _read_entry(self, name: str, node: str) -> Entry[T]:
        def read_once() -> Entry[T]:
            data, stat = self.zk.get(node)
            if is_marked(stat):
                raise HandleNotFound(f"{node} is marked for deletion", path=node)
            handle = Handle.from_znode(data, stat, node)
            try:
                return Entry(name, self.load(name, handle), handle)
            except PayloadMissing as exc:
                # A concurrent replace may have discarded the payload we were about to read.
                if self.exists(name) not in (None, handle.version):
                    raise TryAgain(f"replaced while being read: {exc}") from exc
                raise

        return RACES.call(read_once, what=f"reading {node}", path=node)

    def load(self, name: str, handle: Handle) -> T:
        """The state ``handle`` points at, as the entry ``name`` would hold it: only from under
        the entry's own payload prefix, verified (size, sha256, signature) before it is
        deserialized. Works for a handle kept anywhere (a quarantine entry's copy, say).

        Raises :class:`UntrustedPayload`, another :class:`PayloadError` or
        :class:`StoreUnavailable`.
        """
        return self.serializer.loads(self.storage.read(self.payload_ref(name, handle)))

    def verify(self, name: str) -> Handle:
        """Check that the entry's payload exists, verifies and could be loaded; never loads it.

        Returns the handle; raises like :meth:`get` (without locking).
        """
        handle = self.get_handle(name)
        self.serializer.check(self.storage.read(self.payload_ref(name, handle)))
        return handle

    def get_handle(self, name: str) -> Handle:
        """The entry's handle, without reading its payload or locking."""
        node = self.node(name)
        data, stat = self.zk.get(node)
        if is_marked(stat):
            raise HandleNotFound(f"{node} is marked for deletion", path=node)
        return Handle.from_znode(data, stat, node)

    def exists(self, name: str) -> int | None:
        """The entry's znode version, or None if it is absent or marked for deletion."""
        stat = self.zk.exists(self.node(name))
        if stat is None or is_marked(stat):
            return None
        version: int = stat.version
        return version

    def names(self) -> list[str]:
        """Names of the live entries (not marked for deletion), sorted."""
        children = sorted(self._children())
        stats = self.zk.exists_many([f"{self.path}/{c}" for c in children])
        return [
            c for c, s in zip(children, stats, strict=True) if s is not None and not is_marked(s)
        ]

    def _children(self) -> list[str]:
        try:
            return self.zk.children(self.path)
        except HandleNotFound:
            return []

    def handles(self) -> tuple[list[tuple[str, Handle]], list[Broken]]:
        """Every live entry's handle (pipelined reads, no payloads), and the unparseable ones."""
        children = sorted(self._children())
        found = self.zk.get_many([f"{self.path}/{c}" for c in children])
        good: list[tuple[str, Handle]] = []
        broken: list[Broken] = []
        for name, item in zip(children, found, strict=True):
            if item is None or is_marked(item[1]):
                continue
            path = f"{self.path}/{name}"
            try:
                good.append((name, Handle.from_znode(item[0], item[1], path)))
            except CorruptRecord as exc:  # CorruptHandle, or NewerRecord (a newer protocol's)
                broken.append(Broken(name, path, exc))
        return good, broken

    def get_all(self, *, lock: bool = False) -> GetAllResult[T]:
        """Every live entry with its verified state; broken entries are reported, not raised.

        Handles are read with pipelined requests and payloads fetched in parallel. An entry whose
        handle or payload is corrupt, missing, untrusted or incompatible lands in ``broken``; an
        outage (:class:`StoreUnavailable`) raises, because it says nothing about the entry.
        """
        handles, broken = self.handles()
        if lock:
            self._lock_many([name for name, _ in handles])

        def load(item: tuple[str, Handle]) -> Entry[T] | Broken:
            name, handle = item
            try:
                payload = self.storage.read(self.payload_ref(name, handle))
                return Entry(name, self.serializer.loads(payload), handle)
            except PayloadError as exc:
                return Broken(name, f"{self.path}/{name}", exc, handle)

        if len(handles) > 1 and self.workers > 1 and not self.storage.is_local:
            with ThreadPoolExecutor(max_workers=self.workers) as pool:
                loaded = list(pool.map(load, handles, chunksize=32))
        else:
            loaded = [load(item) for item in handles]
        entries = [e for e in loaded if isinstance(e, Entry)]
        broken += [e for e in loaded if isinstance(e, Broken)]
        return GetAllResult(entries, broken)

    def _lock_many(self, names: list[str]) -> None:
        results = self.zk.create_many([self._lock(name) for name in names], ephemeral=True)
        for name, error in zip(names, results, strict=True):
            if error is None or isinstance(error, HandleExists):
                self._locked.add(name)


def _settled(future: Future[tuple[Handle, float]]) -> tuple[Handle, float] | Exception:
    """A payload write's result, or the error it raised (every write is waited for, so that
    none is left running when the others' payloads are discarded)."""
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - re-raised by the caller once all have settled
        return exc
