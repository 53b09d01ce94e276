"""Where job artifacts may live, which place is whose, and the only way their data is deleted.

An artifact is data a job writes and zkstore tracks (a staging directory, intermediate Parquet,
Spark's checkpoint directory): any fsspec URL under an *artifact root*. The roots are the
storage root and every ``--artifact-root`` of the configuration. zkstore deletes only what it
created (invariant 10), and this module is where that rule lives:

- **Roots never overlap.** An artifact root that contains the storage root, lies inside it or
  is it, or that overlaps another artifact root, is refused when the configuration is loaded
  (:class:`ArtifactRootRefused`, a ConfigError: the daemon and every command refuse to start).
- **Under the storage root**, a job's artifacts stay under its own prefix
  ``S/<cluster>/artifacts/<job>/``, apart from every job's payloads and from other jobs.
- **Under an extra root**, a place is one job's while its artifact record lives (and while its
  result lists it as a kept output): a *claim* in ZooKeeper, written in the same transaction as
  the record, makes every overlapping registration fail (:mod:`zkstore.jobs.claims`). A job
  may only register a place there that holds no data yet: what it releases is what it wrote.
- **Paths are resolved before any check.** A URI is parsed into a :class:`Place` (the
  protocol's family, so ``s3a://`` is ``s3://`` and ``file:``, ``local://`` and a bare path are
  one; no ``.``, ``..`` or empty segments; no percent-encoding, which one layer may decode and
  another not; at most :data:`MAX_SEGMENTS` segments), and a local path to its real path
  (every symlink on the way followed): a URI whose real place is outside the roots is refused.
  What is recorded is the root's own URL and the real path below it.
- **Comparisons that protect are conservative**: two places overlap if their segments agree
  ignoring case (S3 keys are case-sensitive, some local filesystems are not); a place is under
  a root only if it is exactly there.
- **Nothing is deleted through a symlink.** A release re-checks the recorded URI (a record
  planted in ZooKeeper that points anywhere else is :class:`~zkstore.errors.UntrustedPayload`,
  nothing deleted), then deletes below the root without following any link (see
  :meth:`zkstore.payloads.storage.StateStorage.remove_tree`).

A registration that is refused raises :class:`ArtifactUriRefused` (a ConfigError) naming the
roots, or (an overlap) :class:`~zkstore.errors.HandleExists` naming the other artifact.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zkstore.config import StoreConfig
from zkstore.errors import ConfigError, UntrustedPayload
from zkstore.layout import StorageLayout
from zkstore.payloads.storage import StateStorage, StoredObject

__all__ = [
    "MAX_SEGMENTS",
    "MAX_URI_BYTES",
    "ArtifactRootRefused",
    "ArtifactSpace",
    "ArtifactUriRefused",
    "Place",
    "Root",
    "check_roots",
    "family_of",
    "overlap",
    "parse",
    "real",
]

#: Records carry their URI; the bound keeps a record, and a result listing kept outputs, small.
MAX_URI_BYTES = 512
#: Segments of a place at most (a claim is a znode per segment, all in one transaction).
MAX_SEGMENTS = 64

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")


class ArtifactUriRefused(ConfigError):
    """A job asked to register an artifact at a URI it may not have."""


class ArtifactRootRefused(ConfigError):
    """An artifact root overlaps the storage root or another artifact root."""


def overlap(a: str, b: str) -> bool:
    """True if one URI is the other or lies under it: releasing one would delete the other."""
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


@dataclass(frozen=True)
class Place:
    """A location: the protocol family (``file``, ``s3``, ...) and the path's segments (for
    ``s3``, the bucket first)."""

    family: str
    segments: tuple[str, ...]

    @property
    def url(self) -> str:
        path = "/".join(self.segments)
        return f"file:///{path}" if self.family == "file" else f"{self.family}://{path}"

    @property
    def folded(self) -> tuple[str, ...]:
        return tuple(segment.casefold() for segment in self.segments)

    def overlaps(self, other: Place) -> bool:
        """One is the other or lies under it, ignoring case (the safe side for a delete)."""
        shorter = min(len(self.segments), len(other.segments))
        return self.family == other.family and self.folded[:shorter] == other.folded[:shorter]

    def relative_to(self, root: Place) -> tuple[str, ...] | None:
        """The segments below ``root`` if this place is strictly under it (exactly), else None."""
        depth = len(root.segments)
        if (
            self.family != root.family
            or len(self.segments) <= depth
            or self.segments[:depth] != root.segments
        ):
            return None
        return self.segments[depth:]

    def below(self, *segments: str) -> Place:
        return Place(self.family, self.segments + segments)


#: The protocols of fsspec's local filesystem (``LocalFileSystem.protocol``), ``file`` first.
_LOCAL = ("file", "local")


def family_of(protocol: str, what: str = "artifact URI") -> str:
    """The canonical name of an fsspec protocol (``s3a`` is ``s3``, ``local`` is ``file``)."""
    if not _SCHEME.fullmatch(protocol):
        raise ArtifactUriRefused(f"{what}: {protocol[:40]!r} is not a protocol")
    if protocol.lower() in _LOCAL:  # fsspec's LocalFileSystem, named without importing fsspec
        return "file"
    import fsspec  # here: a command that touches no storage never pays for its import

    try:
        names = fsspec.get_filesystem_class(protocol.lower()).protocol
    except (ValueError, ImportError) as exc:
        raise ArtifactUriRefused(f"{what}: unknown protocol {protocol[:40]!r} ({exc})") from None
    return str(names if isinstance(names, str) else names[0])


def parse(uri: str, *, what: str = "artifact URI", strict: bool = True) -> Place:
    """The place ``uri`` names, as written (symlinks not resolved).

    Strict (what a job gives, an artifact root): refuses control characters, an overlong URI,
    percent-encoding, ``.``, ``..`` and empty segments, a relative local path. Lenient (the
    storage root, as fsspec spells it): empty segments are dropped.
    """
    if not isinstance(uri, str) or not uri:
        raise ArtifactUriRefused(f"an {what} must be a non-empty string")
    shown = f"{what} {uri[:80]!r}"
    if _CONTROL.search(uri) or len(uri.encode()) > MAX_URI_BYTES:
        raise ArtifactUriRefused(f"{shown}: control characters, or over {MAX_URI_BYTES} bytes")
    if strict and _PERCENT.search(uri):
        raise ArtifactUriRefused(
            f"{shown}: percent-encoding is refused (one layer may decode it, another not): "
            "spell the path out"
        )
    if "://" in uri:
        protocol, rest = uri.split("://", 1)
    elif uri.startswith("file:"):
        protocol, rest = "file", uri[len("file:") :]
    elif uri.startswith("/"):
        protocol, rest = "file", uri
    else:
        raise ArtifactUriRefused(f"{shown}: give a URL or an absolute path")
    family = family_of(protocol, shown)
    if family == "file" and not rest.startswith("/"):
        raise ArtifactUriRefused(f"{shown}: a local path is file:///absolute/path")
    segments = rest.strip("/").split("/") if rest.strip("/") else []
    if not strict:
        segments = [segment for segment in segments if segment]
    if not segments or any(segment in {"", ".", ".."} for segment in segments):
        raise ArtifactUriRefused(f"{shown}: empty, '.' or '..' path segments")
    if len(segments) > MAX_SEGMENTS:
        raise ArtifactUriRefused(f"{shown}: over {MAX_SEGMENTS} path segments")
    return Place(family, tuple(segments))


def real(place: Place) -> Place:
    """The place with every symlink on a local path resolved (other families have none)."""
    if place.family != "file":
        return place
    resolved = os.path.realpath("/" + "/".join(place.segments))
    return Place("file", tuple(segment for segment in resolved.split("/") if segment))


@dataclass(frozen=True)
class Root:
    """An artifact root: the URL recorded URIs start with, and the real place it is."""

    url: str
    place: Place

    def describe(self) -> str:
        shown = self.url if self.place.url == self.url else f"{self.url} (at {self.place.url})"
        return shown


class ArtifactSpace:
    """The artifact roots of one configuration, with the filesystems to reach them.

    Raises :class:`ArtifactRootRefused` if the roots overlap one another or the storage root.
    """

    def __init__(
        self,
        storage: StateStorage,
        storage_layout: StorageLayout,
        roots: Iterable[str] = (),
        *,
        options: Mapping[str, Any] | None = None,
        timeout: float = 5.0,
    ) -> None:
        self.storage = storage
        self.storage_layout = storage_layout
        self._storage_protocol = family_of(storage.root_url.split("://", 1)[0], "storage")
        self._options = dict(options or {})
        self._timeout = timeout
        self.storage_root = Root(
            storage.root_url, real(parse(storage.root_url, what="storage root", strict=False))
        )
        self._extra: list[Root] = []
        for url in roots:
            place = parse(url, what="artifact root")
            root = Root(place.url, real(place))
            if root.url in (r.url for r in self._extra):
                continue
            for other in (self.storage_root, *self._extra):
                if root.place.overlaps(other.place):
                    raise ArtifactRootRefused(
                        _root_overlap(root, other, other is self.storage_root)
                    )
            self._extra.append(root)
        self._stores: dict[str, StateStorage] = {storage.root_url: storage}

    @property
    def roots(self) -> tuple[str, ...]:
        """Every root URL, the storage root first."""
        return (self.storage.root_url, *(root.url for root in self._extra))

    def job_prefix(self, job_id: str) -> str:
        """The URL of the job's own artifact prefix under the storage root."""
        return self.storage.url(self.storage_layout.artifacts(job_id))

    def default_uri(self, job_id: str, name: str, attempt: int | None) -> str:
        """Where ``register(name)`` without a URI puts an artifact: under the job's prefix, in a
        directory of its attempt when it is attempt-scoped (``attempt`` given)."""
        prefix = self.job_prefix(job_id)
        return f"{prefix}/{name}" if attempt is None else f"{prefix}/attempt-{attempt}/{name}"

    def claimed(self, uri: str) -> bool:
        """True if the artifact at this recorded URI is owned through a claim in ZooKeeper (it
        is under an extra root); under the storage root, the job's prefix is its own."""
        return not uri.startswith(self.storage.root_url + "/")

    # -- registering ---------------------------------------------------------------------------

    def resolve(self, job_id: str, uri: str) -> str:
        """The URI to record if job ``job_id`` may register ``uri``: the root's URL and the real
        path below it. Raises :class:`ArtifactUriRefused` naming the roots."""
        place = real(parse(uri))
        for root in (self.storage_root, *self._extra):
            below = place.relative_to(root.place)
            if below is not None:
                self._allowed(job_id, root, below, uri)
                return "/".join((root.url, *below))
        raise ArtifactUriRefused(
            f"artifact URI {uri!r} is outside the artifact roots of this cluster: "
            f"{self.job_prefix(job_id)}/ (the job's own prefix in the storage root)"
            + "".join(f", {root.url}/" for root in self._extra)
            + "; add a root with `zkstore daemon --artifact-root URL`"
            + _resolved_note(uri, place)
        )

    def check_fresh(self, job_id: str, uri: str) -> None:
        """Raise :class:`ArtifactUriRefused` if data is at ``uri`` (a recorded URI under an
        extra root) already: a job releases only what it wrote after registering. The job's
        own prefix in the storage root is zkstore's, and needs no such check."""
        store, _ = self._trusted(job_id, uri)
        if store is not self.storage and store.occupied(uri):
            raise ArtifactUriRefused(
                f"artifact URI {uri!r} holds data already: register a place before writing it "
                "(zkstore deletes only what a job wrote after registering it); choose a new "
                "URI, or move the data away first"
            )

    def _allowed(self, job_id: str, root: Root, below: tuple[str, ...], uri: str) -> None:
        """Raise unless ``below`` the root is a place job ``job_id`` may have."""
        place = root.place.below(*below)
        if root is self.storage_root:
            prefix = tuple(self.storage_layout.artifacts(job_id).split("/"))
            if below[: len(prefix)] != prefix or len(below) <= len(prefix):
                raise ArtifactUriRefused(
                    f"artifact URI {uri[:300]!r} is in the storage root {root.describe()} but not "
                    f"under the job's own prefix {self.job_prefix(job_id)}/: zkstore's payloads "
                    "and other jobs' artifacts live there"
                )
        elif place.overlaps(self.storage_root.place):
            raise ArtifactUriRefused(
                f"artifact URI {uri[:300]!r} overlaps the storage root "
                f"{self.storage_root.describe()}"
            )

    # -- releasing -----------------------------------------------------------------------------

    def check(self, job_id: str, uri: str) -> None:
        """Raise :class:`UntrustedPayload` unless job ``job_id`` could have recorded ``uri``
        with this configuration (a record planted in ZooKeeper points anywhere)."""
        self._trusted(job_id, uri)

    def _trusted(self, job_id: str, uri: str) -> tuple[StateStorage, Root]:
        """The storage of the root a recorded URI is under, if job ``job_id`` may have it."""
        for root in (self.storage_root, *self._extra):
            if isinstance(uri, str) and uri.startswith(root.url + "/"):
                below = uri[len(root.url) + 1 :]
                try:
                    if _PERCENT.search(below) or _CONTROL.search(below):
                        raise ArtifactUriRefused("percent-encoding or control characters")
                    segments = tuple(below.split("/"))
                    if any(s in {"", ".", ".."} for s in segments) or len(segments) > MAX_SEGMENTS:
                        raise ArtifactUriRefused("empty, '.' or '..' path segments")
                    self._allowed(job_id, root, segments, uri)
                except ConfigError as exc:
                    raise UntrustedPayload(
                        f"artifact URI {uri[:300]!r} of job {job_id} is not one it may have "
                        f"({exc}): its data is left alone"
                    ) from None
                return self._store(root), root
        raise UntrustedPayload(
            f"artifact URI {str(uri)[:300]!r} of job {job_id} is outside this configuration's "
            "artifact roots: its data is left alone"
        )

    def _store(self, root: Root) -> StateStorage:
        if root.url not in self._stores:
            family = root.place.family
            options = self._options if family == self._storage_protocol else {}
            self._stores[root.url] = StateStorage(root.url, options, timeout=self._timeout)
        return self._stores[root.url]

    def delete(self, job_id: str, uri: str) -> None:
        """Delete the artifact's data (a file or a directory tree); idempotent. Nothing is
        followed through a symbolic link: a link in the tree is removed, a link on the way to
        it refuses the delete.

        :class:`UntrustedPayload` if ``uri`` is not one job ``job_id`` could have recorded
        with this configuration, or a link is on the way (then nothing is deleted);
        :class:`StoreUnavailable` on outages.
        """
        store, _ = self._trusted(job_id, uri)
        store.remove_tree(uri, keep=self._shared if store is self.storage else None)

    def objects(self, job_id: str, uri: str) -> list[StoredObject]:
        """Every object under the artifact place ``uri`` (uncached); :class:`UntrustedPayload`
        if it is not one job ``job_id`` could have recorded."""
        store, _ = self._trusted(job_id, uri)
        return store.list(store.key_of(uri))

    def occupied(self, job_id: str, uri: str) -> bool:
        """True if anything is at ``uri``, a place of job ``job_id`` (an outage raises)."""
        store, _ = self._trusted(job_id, uri)
        return store.occupied(uri)

    def occupied_many(self, job_id: str, uris: Sequence[str]) -> list[bool]:
        """:meth:`occupied` of each of ``uris`` (places of job ``job_id``): on object storage,
        one listing per parent directory holding two or more of them instead of a request
        each (a commit of 100 parts in one directory: 1 LIST, not 100 HEADs)."""
        parents: dict[str, list[str]] = {}
        for uri in uris:
            parents.setdefault(uri.rsplit("/", 1)[0], []).append(uri)
        found: dict[str, bool] = {}
        for parent, under in parents.items():
            store, _ = self._trusted(job_id, parent)
            if store.is_local or len(under) < 2:
                found.update((uri, self.occupied(job_id, uri)) for uri in under)
                continue
            for uri in under:
                self._trusted(job_id, uri)
            listed: set[str] = set()
            for item in store.list(store.key_of(parent)):
                at = item.uri
                while len(at) > len(parent) and at not in listed:  # it and its directories
                    listed.add(at)
                    at = at.rsplit("/", 1)[0]
            found.update((uri, uri in listed) for uri in under)
        return [found[uri] for uri in uris]

    def open_for_writing(self, job_id: str, uri: str) -> Any:
        """A binary file object writing at ``uri``, a place of job ``job_id`` (its directories
        made on local disk); the storage's own filesystem and options (S3's credentials)."""
        store, _ = self._trusted(job_id, uri)
        path = store.path_of(uri)
        if store.is_local:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        return store.fs.open(path, "wb")

    def put_new(self, job_id: str, uri: str, data: bytes) -> bool:
        """Write a file at ``uri`` in the job's place, never overwriting (see
        :meth:`StateStorage.put_new`)."""
        store, _ = self._trusted(job_id, uri)
        return store.put_new(uri, data)

    def fetch(self, job_id: str, uri: str, *, max_bytes: int) -> bytes:
        """The bytes of a file in the job's place, at most ``max_bytes`` (unverified: the
        caller parses them strictly)."""
        store, _ = self._trusted(job_id, uri)
        return store.fetch(uri, max_bytes=max_bytes)

    @property
    def _shared(self) -> str:
        """Where empty directories stop being removed in the storage root: the parent of every
        job's prefix, which another job may be making at this very moment."""
        return self.storage.url(self.storage_layout.all_artifacts)

    def size(self, job_id: str, uri: str) -> int | None:
        """Bytes of the artifact's data; None if there is none or it is outside the roots."""
        try:
            store, _ = self._trusted(job_id, uri)
        except UntrustedPayload:
            return None
        return store.tree_size(uri)

    def sweep(
        self, job_id: str, keep: Iterable[str], *, before_delete: Callable[[], None] | None = None
    ) -> int:
        """Delete every object under the job's own prefix in the storage root that is not under
        one of the ``keep`` URIs (what the job wrote there without registering it); returns how
        many were deleted. A symbolic link there is removed, never followed. ``before_delete``
        is called once before the first delete, if there is one (the leader's fence check)."""
        kept = tuple(keep)
        stray = [
            item.uri
            for item in self.storage.list(self.storage_layout.artifacts(job_id))
            if not any(overlap(item.uri, uri) for uri in kept)
        ]
        if stray and before_delete is not None:
            before_delete()
        for uri in stray:
            self.storage.remove_tree(uri, keep=self._shared)
        return len(stray)


def check_roots(config: StoreConfig) -> None:
    """Raise :class:`ArtifactRootRefused` if ``config``'s artifact roots overlap its storage
    root or one another (what :class:`ArtifactSpace` refuses, checked at a command's edge)."""
    storage = StateStorage(config.storage_url, config.storage_options, timeout=config.timeout)
    ArtifactSpace(storage, StorageLayout(config.cluster_id), config.artifact_roots)


def _root_overlap(root: Root, other: Root, storage: bool) -> str:
    what = "the storage root" if storage else "the artifact root"
    if root.place.folded == other.place.folded:
        relation = "is"
    elif len(root.place.segments) < len(other.place.segments):
        relation = "contains"
    else:
        relation = "lies inside"
    why = (
        "releasing an artifact there could delete zkstore's own payloads"
        if storage
        else "two roots must not share a place"
    )
    return (
        f"artifact root {root.describe()} {relation} {what} {other.describe()} (compared "
        f"ignoring case, symlinks resolved): {why}; give a directory beside it"
    )


def _resolved_note(uri: str, place: Place) -> str:
    try:
        written = parse(uri)
    except ConfigError:
        return ""
    return "" if written == place else f" (it resolves to {place.url})"
