"""Payloads in object storage, behind fsspec: create-only writes, verified reads.

Every payload is written once, at a fresh key that names its owner, and never overwritten:

- local disk: a temporary file in the same directory, then ``os.link`` to the final name (fails
  instead of overwriting) and one fsync after the link, which commits data, inode and the new
  name together on journaling filesystems (ext4, xfs, btrfs);
- S3 and S3-compatible stores: one PUT with ``If-None-Match: *`` (s3fs ``mode="create"``);
- any other fsspec backend: ``pipe_file(mode="create")``.

Every read checks size and sha256 (and the HMAC when a signing key is configured) before it
returns a single byte, only reads URIs under the configured root, and only regular files: a
directory, a FIFO or a device at a payload's URI is refused at once, never waited on.

The HMAC signs the payload's key (relative to the root: ``<cluster>/jobs/<job>/<kind>/...``) with
its sha256 and size, so a signed payload cannot be replayed as another job's, another kind's or
another cluster's: a handle copied elsewhere points at a key that does not belong there, and a
payload copied to another key no longer verifies. The key that signs a job's payloads is that
job's own, derived from the cluster's (:mod:`zkstore.signing`).

Why one module: the rules of a payload (only under the root, only regular files, create-only,
size and sha256 and HMAC before a byte is returned) must hold the same for every backend, and
they are read best beside each backend's way of keeping them.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import re
import shutil
import stat
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from zkstore.errors import (
    ConfigError,
    CorruptPayload,
    HandleExists,
    PayloadMissing,
    StoreUnavailable,
    TooLarge,
    UntrustedPayload,
    ZkStoreError,
)
from zkstore.records.handle import PayloadRef
from zkstore.signing import Signer
from zkstore.zookeeper.retry import RACES, TryAgain

if TYPE_CHECKING:  # fsspec is imported when a storage is built: readers of ZooKeeper only
    # (``zkstore jobs list``, the snapshot reader) never pay for it
    from fsspec import AbstractFileSystem

__all__ = ["TEMP_MARKER", "StateStorage", "StoredObject", "is_temporary", "storage_errors"]

logger = logging.getLogger(__name__)

TEMP_MARKER = ".tmp-"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def is_temporary(uri: str) -> bool:
    """Whether ``uri`` is a local write's temporary file (``.<name>.tmp-<random>``, published
    by a link to ``<name>`` once complete, then removed by its writer): a write in flight, or
    one whose writer died."""
    return TEMP_MARKER in uri.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class StoredObject:
    """One object found by :meth:`StateStorage.list`."""

    uri: str
    size: int
    modified: datetime

    def age_seconds(self, now: datetime | None = None) -> float:
        return ((now or datetime.now(UTC)) - self.modified).total_seconds()


def _remote_error_types() -> tuple[type[BaseException], ...]:
    """Exception types of remote backends that mean "storage unreachable or refusing"."""
    types: list[type[BaseException]] = []
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        pass
    else:
        types += [BotoCoreError, ClientError]
    return tuple(types)


@contextlib.contextmanager
def storage_errors(what: str) -> Iterator[None]:
    """Translate OS and backend errors of one storage operation into zkstore errors."""
    try:
        yield
    except FileNotFoundError as exc:
        raise PayloadMissing(f"{what}: not found") from exc
    except (IsADirectoryError, NotADirectoryError) as exc:
        raise UntrustedPayload(f"{what}: not a regular file") from exc
    except OSError as exc:
        raise StoreUnavailable(f"storage failed ({what}): {exc}") from exc
    except _remote_error_types() as exc:
        raise StoreUnavailable(f"storage failed ({what}): {exc}") from exc


def _local_root(url: str) -> str | None:
    """The root path fsspec's local filesystem makes of ``url`` (``file:///dir``, ``~/dir``,
    ``dir``: absolute, user expanded, as ``LocalFileSystem._strip_protocol`` does on POSIX),
    worked out without importing fsspec; None for any other URL (another protocol, a chain)."""
    if "::" in url or os.sep != "/":
        return None
    path = url
    for prefix in ("file://", "local://", "file:", "local:"):
        if url.startswith(prefix):
            path = url.removeprefix(prefix)
            break
    else:
        if ":" in url:  # another protocol, or what fsspec might take for one
            return None
    if path.startswith("/"):
        pass
    elif path.startswith("~"):
        path = os.path.expanduser(path)
    else:
        path = path.removeprefix("./") if path != "." else ""
        path = f"{os.getcwd()}/{path}"
    return path.rstrip("/") or "/"


def _protocols(fs: AbstractFileSystem) -> tuple[str, ...]:
    return fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)


def _merge(defaults: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(defaults)
    for key, value in given.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class StateStorage:
    """Payloads under one root URL: create-only writes, verified reads, idempotent discards.

    Keys passed in are relative to the root (``<cluster>/jobs/<job>/definition``); URIs handed out
    and accepted are absolute (``s3://bucket/root/<cluster>/...``). ``signer`` signs and checks
    payloads (:class:`~zkstore.signing.Signer`); ``signing_key`` is short for a signer with that
    cluster key.
    """

    def __init__(
        self,
        url: str,
        options: Mapping[str, Any] | None = None,
        *,
        signing_key: bytes | None = None,
        signer: Signer | None = None,
        max_payload_bytes: int = 256 * 1024 * 1024,
        timeout: float = 5.0,
    ) -> None:
        given = dict(options or {})
        protocol = url.split("://", 1)[0] if "://" in url else "file"
        if protocol in {"s3", "s3a"}:
            try:
                from zkstore.payloads import s3
            except ImportError as exc:
                raise ConfigError(
                    f"storage {url!r}: S3 needs s3fs (pip install 'zkstore[s3]'): {exc}"
                ) from exc
            given = _merge(s3.client_options(timeout), given)
        given.setdefault("skip_instance_cache", True)
        given.setdefault("use_listings_cache", False)
        self._url, self._given = url, given
        self._fs: AbstractFileSystem | None = None
        root = _local_root(url) if not options else None
        if root is None:
            self._fs, root = self._connect()
            if protocol in {"s3", "s3a"}:
                s3.share_session(self._fs)
            self._local = "file" in _protocols(self._fs)
        else:  # local disk without options: fsspec is imported when a payload is first touched
            self._local = True
        self._root = root.rstrip("/")
        if not self._root:
            raise ConfigError(f"storage {url!r}: name a directory or bucket, not the root")
        self.root_url = (
            f"file://{self._root}"
            if self._fs is None
            else self._fs.unstrip_protocol(self._root).rstrip("/")
        )
        self.signer = signer if signer is not None else Signer(signing_key)
        self.max_payload_bytes = max_payload_bytes

    def __repr__(self) -> str:
        return f"StateStorage({self.root_url!r})"

    def _connect(self) -> tuple[AbstractFileSystem, str]:
        """The filesystem and root path of this storage's URL (fsspec's ``url_to_fs``)."""
        from fsspec.core import url_to_fs

        try:
            fs, root = url_to_fs(self._url, **self._given)
        except (ValueError, ImportError) as exc:
            raise ConfigError(f"storage {self._url!r}: {exc}") from exc
        except TypeError as exc:
            raise ConfigError(f"storage {self._url!r}: bad storage option: {exc}") from exc
        return fs, root

    @property
    def fs(self) -> AbstractFileSystem:
        """The fsspec filesystem, made at the first use for local disk: a process that reads
        records only (``zkstore jobs show``, ``control get``) never imports fsspec."""
        if self._fs is None:
            self._fs = self._connect()[0]
        return self._fs

    @property
    def is_local(self) -> bool:
        """True for local disk, where reads are fast and parallel fetches only add contention."""
        return self._local

    # -- addressing ----------------------------------------------------------------------------

    def url(self, key: str) -> str:
        """The absolute URI of a key relative to the root."""
        return f"{self.root_url}/{key.strip('/')}"

    def path_of(self, uri: str) -> str:
        """The backend path of ``uri``; :class:`UntrustedPayload` if it is outside the root."""
        prefix = self.root_url + "/"
        rest = uri[len(prefix) :] if uri.startswith(prefix) else None
        if (
            not rest
            or _CONTROL.search(uri)
            or any(part in {"", ".", ".."} for part in rest.split("/"))
        ):
            raise UntrustedPayload(f"URI {uri!r:.300} is outside the storage root {self.root_url}")
        return f"{self._root}/{rest}"

    def is_under(self, uri: str, prefix: str) -> bool:
        """True if ``uri`` names an object under the key ``prefix`` (relative to the root)."""
        return uri.startswith(self.url(prefix) + "/") and not _CONTROL.search(uri)

    def key_of(self, uri: str) -> str:
        """The key (relative to the root) of a URI under the root."""
        return self.path_of(uri)[len(self._root) + 1 :]

    # -- writes --------------------------------------------------------------------------------

    def write(self, prefix: str, data: bytes, *, suffix: str = "", stem: str = "") -> PayloadRef:
        """Write ``data`` at a fresh key ``<prefix>/<stem><uuid><suffix>`` and return its reference.

        Never overwrites anything. A crash at any point leaves either nothing, an invisible
        temporary file, or a complete object that no handle references yet (an orphan).
        """
        if len(data) > self.max_payload_bytes:
            raise TooLarge(
                f"payload of {len(data)} bytes is over the configured limit of "
                f"{self.max_payload_bytes} bytes"
            )
        digest = hashlib.sha256(data).hexdigest()
        self._check_scope(f"{prefix.strip('/')}/{stem}{suffix}")

        def write_once() -> PayloadRef:
            uri = self.url(f"{prefix.strip('/')}/{stem}{uuid.uuid4().hex}{suffix}")
            if not self._create(uri, data, digest):
                raise TryAgain(f"{uri} is taken")  # a uuid4 collision: never seen, still handled
            return PayloadRef(uri, len(data), digest, self._sign(uri, digest, len(data)))

        return RACES.call(write_once, what=f"a free key under {prefix!r}", error=StoreUnavailable)

    def create(self, key: str, data: bytes) -> PayloadRef:
        """Write ``data`` at exactly ``key`` (relative to the root), never overwriting.

        For objects whose name carries their identity (a log chunk's sequence number): writing
        the same bytes again is a success (a retry whose first answer was lost), other bytes
        raise :class:`HandleExists`. A crash leaves nothing, an invisible temporary file, or the
        complete object.
        """
        digest = hashlib.sha256(data).hexdigest()
        uri = self.url(key)
        self._check_scope(self.key_of(uri))
        if not self._create(uri, data, digest):
            raise HandleExists(f"{uri} exists already, with other content")
        return PayloadRef(uri, len(data), digest, self._sign(uri, digest, len(data)))

    def put_new(self, uri: str, data: bytes) -> bool:
        """Write ``data`` at exactly ``uri`` unless something is there; never overwrites. For a
        file that is not a payload (no handle, no signature: an output's manifest file, whose
        name says which commit it describes). True if written now or holding exactly these
        bytes already (a retry), False if other bytes are there."""
        return self._create(uri, data, hashlib.sha256(data).hexdigest())

    def _check_scope(self, key: str) -> None:
        """Refuse, before writing, a payload this process could not sign."""
        try:
            self.signer.check_scope(key)
        except UntrustedPayload as exc:
            raise UntrustedPayload(f"cannot sign {key}: {exc}") from None

    def _create(self, uri: str, data: bytes, digest: str) -> bool:
        """Create the object at ``uri``; False if one with other content is there already."""
        path = self.path_of(uri)
        with storage_errors(f"write {uri}"):
            try:
                if self._local:
                    _write_local_exclusive(path, data)
                else:
                    self.fs.pipe_file(path, data, mode="create")
            except FileExistsError:
                return self._has_content(path, digest)
        return True

    def _has_content(self, path: str, digest: str) -> bool:
        """True if ``path`` holds exactly our bytes (a retried PUT whose first answer was lost)."""
        with storage_errors(f"read {path}"):
            return hashlib.sha256(self.fs.cat_file(path)).hexdigest() == digest

    def discard(self, uri: str) -> None:
        """Delete the payload at ``uri``; deleting one that is already gone is not an error.

        On local disk nothing below the root is followed through a symbolic link: a link on
        the way refuses the delete (:class:`UntrustedPayload`), a link at ``uri`` is removed.
        """
        path = self.path_of(uri)
        with storage_errors(f"discard {uri}"):
            if self._local:
                _delete_local(self._root, path[len(self._root) + 1 :], tree=False, keep_depth=0)
                return
            try:
                self.fs.rm_file(path)
            except FileNotFoundError:
                logger.debug("discard %s: already gone", uri)

    def remove_tree(self, uri: str, *, keep: str | None = None) -> None:
        """Delete the object or the whole directory (prefix) at ``uri``; idempotent.

        Used for artifacts, which are data a job wrote, not payloads: a file or a directory of
        any depth. On local disk nothing below the root is followed through a symbolic link:
        a link at ``uri`` or inside the tree is removed (never what it points at), a link on the
        way from the root to ``uri`` refuses the delete; the directories left empty are removed
        up to ``keep`` (a URI above ``uri``; default: the root), never ``keep`` itself. Raises
        :class:`UntrustedPayload` for a URI outside the root or a link on the way,
        :class:`StoreUnavailable` when the storage fails.
        """
        path = self.path_of(uri)
        with storage_errors(f"delete {uri}"):
            if self._local:
                keep_depth = len(self.key_of(keep).split("/")) if keep is not None else 0
                _delete_local(self._root, self.key_of(uri), tree=True, keep_depth=keep_depth)
                return
            try:
                self.fs.rm(path, recursive=True)
            except FileNotFoundError:
                logger.debug("delete %s: already gone", uri)

    def occupied(self, uri: str) -> bool:
        """True if anything is at ``uri``: an object, a directory or a prefix with objects, or
        (on local disk) a symbolic link, even a dangling one. An outage raises."""
        path = self.path_of(uri)
        with storage_errors(f"stat {uri}"):
            if self._local:
                return os.path.lexists(path)
            return bool(self.fs.exists(path))

    def tree_size(self, uri: str) -> int | None:
        """Bytes at ``uri`` (a file, or every file under a directory); None if nothing is there."""
        info = self._info(uri)
        if info is None:
            return None
        if info.get("type") != "directory":
            return int(info.get("size") or 0)
        with storage_errors(f"stat {uri}"):
            return int(self.fs.du(self.path_of(uri), total=True))

    # -- reads ---------------------------------------------------------------------------------

    def read(self, ref: PayloadRef) -> bytes:
        """Return the payload's bytes after checking size, sha256 and (if configured) the HMAC.

        Raises :class:`PayloadMissing`, :class:`CorruptPayload` (truncated, extended or changed),
        :class:`UntrustedPayload` (outside the root, signature missing or wrong) or
        :class:`StoreUnavailable`; never returns unverified bytes.
        """
        path = self.path_of(ref.uri)
        if ref.size > self.max_payload_bytes:
            raise UntrustedPayload(
                f"{ref.uri}: handle claims {ref.size} bytes, over the limit of "
                f"{self.max_payload_bytes}"
            )
        with storage_errors(f"read {ref.uri}"):
            data = _read_local_regular(path, ref.size + 1) if self._local else self._read(path)
        self.verify_bytes(ref, data)
        return data

    def _read(self, path: str) -> bytes:
        data: bytes = self.fs.cat_file(path)
        return data

    def verify_bytes(self, ref: PayloadRef, data: bytes) -> None:
        """Raise unless ``data`` matches ``ref``'s size, sha256 and (when a key is set) HMAC."""
        if len(data) != ref.size:
            kind = "truncated" if len(data) < ref.size else "longer than its handle"
            raise CorruptPayload(f"{ref.uri}: {kind} ({len(data)} bytes, handle says {ref.size})")
        if hashlib.sha256(data).hexdigest() != ref.sha256:
            raise CorruptPayload(f"{ref.uri}: sha256 does not match its handle")
        try:
            self.signer.check(self.key_of(ref.uri), ref.sha256, ref.size, ref.hmac)
        except UntrustedPayload as exc:
            raise UntrustedPayload(f"{ref.uri}: {exc}") from None

    def fetch(self, uri: str, *, max_bytes: int) -> bytes:
        """The bytes of an object that has no handle (a driver's log chunk, a control history
        entry), unverified: there is no digest to check, so the caller parses it strictly.

        Never unpickled or executed. Same guards as :meth:`read` otherwise: under the root, a
        regular file, at most ``max_bytes`` read (more raises :class:`UntrustedPayload`), so that
        garbage at the key can neither stall nor flood the reader; :class:`PayloadMissing` if
        absent.
        """
        path = self.path_of(uri)
        with storage_errors(f"read {uri}"):
            if self._local:
                data = _read_local_regular(path, max_bytes + 1)
            else:
                data = bytes(self.fs.cat_file(path, start=0, end=max_bytes + 1))
        if len(data) > max_bytes:
            raise UntrustedPayload(f"{uri}: over {max_bytes} bytes")
        return data

    def fetch_range(self, uri: str, start: int, length: int) -> bytes:
        """At most ``length`` bytes of an object without a handle, from byte ``start`` (a
        block of a log chunk, read from its end); unverified, as :meth:`fetch`.
        :class:`PayloadMissing` if absent."""
        path = self.path_of(uri)
        with storage_errors(f"read {uri}"):
            if self._local:
                return _read_local_regular(path, length, offset=start)
            return bytes(self.fs.cat_file(path, start=start, end=start + length))

    def probe(self) -> bool:
        """True if the storage answers (one metadata request on the root); never raises."""
        try:
            # Not found is an answer too: reachable, nothing written yet.
            with storage_errors(f"probe {self.root_url}"), contextlib.suppress(FileNotFoundError):
                self.fs.info(self._root)
        except ZkStoreError as exc:
            logger.debug("storage probe failed: %s", exc)
            return False
        return True

    def size(self, uri: str) -> int | None:
        """The size of the object at ``uri``, or None if there is none; an outage raises."""
        info = self._info(uri)
        if info is None or info.get("type") == "directory":
            return None
        return int(info.get("size") or 0)

    def _info(self, uri: str) -> dict[str, Any] | None:
        """fsspec's description of what is at ``uri``, None if nothing; an outage raises."""
        path = self.path_of(uri)
        with storage_errors(f"stat {uri}"):
            try:
                return dict(self.fs.info(path))
            except FileNotFoundError:
                return None

    def exists(self, uri: str) -> bool:
        """True if an object is at ``uri``; an outage raises instead of answering False."""
        return self.size(uri) is not None

    def list(self, prefix: str) -> list[StoredObject]:
        """Every object under ``prefix`` (relative to the root), with sizes and ages, uncached."""
        base = f"{self._root}/{prefix.strip('/')}" if prefix.strip("/") else self._root
        with storage_errors(f"list {prefix or '/'}"):
            try:
                found = self.fs.find(base, detail=True)
            except FileNotFoundError:
                return []
        objects = []
        for path, info in sorted(found.items()):
            if info.get("type") == "directory":
                continue
            objects.append(
                StoredObject(
                    uri=self.fs.unstrip_protocol(path),
                    size=int(info.get("size") or 0),
                    modified=_modified(info),
                )
            )
        return objects

    def _sign(self, uri: str, sha256: str, size: int) -> str | None:
        """HMAC-SHA256 of the payload's key (relative to the root), sha256 and size, with the
        key of the job it belongs to (see :mod:`zkstore.signing`); None without a key."""
        return self.signer.sign(self.key_of(uri), sha256, size)


def _modified(info: Mapping[str, Any]) -> datetime:
    for key in ("mtime", "LastModified", "last_modified", "created", "updated"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
                return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    # An object whose age cannot be told is treated as brand new, so it is never reaped.
    return datetime.now(UTC)


def _read_local_regular(path: str, limit: int, offset: int = 0) -> bytes:
    """Read at most ``limit`` bytes of the regular file at ``path`` from ``offset``; never
    block on a FIFO or a device, never read a directory (:class:`IsADirectoryError`)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        if offset:
            os.lseek(fd, offset, os.SEEK_SET)
        chunks = []
        while limit > 0 and (chunk := os.read(fd, min(limit, 1 << 20))):
            chunks.append(chunk)
            limit -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _write_local_exclusive(path: str, data: bytes) -> None:
    """Atomically publish ``data`` at ``path``; raise FileExistsError rather than overwrite."""
    directory, name = os.path.split(path)

    def open_temp() -> tuple[str, int]:
        temp = os.path.join(directory, f".{name}{TEMP_MARKER}{uuid.uuid4().hex[:8]}")
        try:
            os.makedirs(directory, exist_ok=True)
            return temp, os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileNotFoundError as exc:
            # A concurrent discard removed a (then empty) directory of the path, even while
            # makedirs was making the next one: make them again.
            raise TryAgain(str(exc)) from exc
        except FileExistsError as exc:
            # makedirs found the directory there and then not there (a concurrent discard
            # removed it, empty, between its two looks), or a temporary name was taken: again.
            # Never "the object exists": that is os.link's answer, below. A file where the
            # directory goes is no race.
            if os.path.lexists(directory) and not os.path.isdir(directory):
                raise NotADirectoryError(f"{directory} is not a directory") from exc
            raise TryAgain(str(exc)) from exc

    temp, fd = RACES.call(open_temp, what=f"creating {path}", error=StoreUnavailable)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            # The final name appears only once the data is complete, and never replaces an
            # existing file. link() changes the inode (its link count), so the fsync after it
            # commits data, inode and the new name in one journal commit (ext4, xfs, btrfs):
            # one fsync where temp-fsync-rename-dirfsync needs two.
            os.link(temp, path)
            os.fsync(f.fileno())
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _delete_local(root: str, key: str, *, tree: bool, keep_depth: int) -> None:
    """Delete ``root/key`` without following a symbolic link anywhere below ``root``.

    Every directory on the way is opened relative to its parent with ``O_NOFOLLOW``, so a link
    put on the way (even meanwhile) cannot lead the delete elsewhere: it raises
    :class:`UntrustedPayload`. The target itself is unlinked if it is a file or a link; a
    directory is removed with ``tree`` only (``shutil.rmtree`` relative to its parent's
    descriptor, which removes links inside the tree and never follows them), else
    :class:`IsADirectoryError`. Then the directories left empty are removed, deepest first, down
    to ``keep_depth`` segments below the root (never the root itself). Nothing there: no error.
    """
    parts = key.split("/")
    try:
        fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))]
    except FileNotFoundError:
        return  # no root: nothing under it
    try:
        for part in parts[:-1]:
            try:
                fds.append(os.open(part, _DIRECTORY_FLAGS, dir_fd=fds[-1]))
            except FileNotFoundError:
                break  # nothing there
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                if not _is_link(part, fds[-1]):
                    break  # a file where a directory would be: nothing below it
                raise UntrustedPayload(
                    f"{root}/{key}: {part!r} on the way is a symbolic link; nothing is "
                    "deleted through one"
                ) from None
        else:
            _unlink_or_rmtree(parts[-1], fds[-1], tree=tree)
        for depth in range(len(fds) - 1, max(keep_depth, 0), -1):
            try:
                os.rmdir(parts[depth - 1], dir_fd=fds[depth - 1])
            except OSError:
                break  # not empty (or gone): the directories above are not empty either
    finally:
        for fd in fds:
            os.close(fd)


def _is_link(name: str, parent: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def _unlink_or_rmtree(name: str, parent: int, *, tree: bool) -> None:
    try:
        found = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(found.st_mode):
        os.unlink(name, dir_fd=parent)  # a file, or a link itself (never what it points at)
    elif tree:
        shutil.rmtree(name, dir_fd=parent)
    else:
        raise IsADirectoryError(f"{name} is a directory")
