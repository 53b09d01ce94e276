"""Where job artifacts may live, and the only way their data is ever deleted.

An artifact is data a job writes and zkstore tracks (a staging directory, intermediate Parquet,
Spark's checkpoint directory): any fsspec URL under an *artifact root*. The roots are the
storage root and every ``--artifact-root`` of the configuration. Under the storage root a job's
artifacts must stay under its own prefix ``S/<cluster>/artifacts/<job>/``, apart from the
payloads of every job, so that no artifact can ever cover zkstore's own objects or another job's.

Every URI is checked here twice: when a job registers it (a refused URI is a
:class:`~zkstore.errors.ConfigError` that names the roots), and again before its data is
deleted (a record planted in ZooKeeper that points elsewhere is
:class:`~zkstore.errors.UntrustedPayload`, and nothing is deleted).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from zkstore.errors import ConfigError, UntrustedPayload
from zkstore.layout import StorageLayout
from zkstore.storage import StateStorage

#: Records carry their URI; the bound keeps a record, and a result listing kept outputs, small.
MAX_URI_BYTES = 512

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class ArtifactUriRefused(ConfigError):
    """A job asked to register an artifact at a URI outside the artifact roots."""


def overlap(a: str, b: str) -> bool:
    """True if one URI is the other or lies under it: releasing one would delete the other."""
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def normalize(uri: str) -> str:
    """``uri`` as it is recorded: a local path becomes ``file://``, a trailing ``/`` goes.

    Raises :class:`ArtifactUriRefused` for what could escape a root once normalized by a
    backend (``.`` and ``..`` segments, empty segments), control characters, or an overlong URI.
    """
    if not isinstance(uri, str) or not uri:
        raise ArtifactUriRefused("an artifact URI must be a non-empty string")
    if _CONTROL.search(uri) or len(uri.encode()) > MAX_URI_BYTES:
        raise ArtifactUriRefused(
            f"artifact URI {uri[:80]!r}: control characters, or over {MAX_URI_BYTES} bytes"
        )
    if "://" not in uri:
        if not uri.startswith("/"):
            raise ArtifactUriRefused(f"artifact URI {uri!r}: give a URL or an absolute path")
        uri = "file://" + uri
    protocol, rest = uri.split("://", 1)
    rest = rest.rstrip("/")
    segments = rest.split("/")[1:] if protocol == "file" else rest.split("/")
    if not rest or any(part in {"", ".", ".."} for part in segments):
        raise ArtifactUriRefused(f"artifact URI {uri!r}: empty, '.' or '..' path segments")
    return f"{protocol}://{rest}"


class ArtifactSpace:
    """The artifact roots of one configuration, with the filesystems to reach them."""

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
        self._storage_protocol = storage.root_url.split("://", 1)[0]
        self._options = dict(options or {})
        self._timeout = timeout
        self._root_urls = tuple(dict.fromkeys(normalize(r) for r in roots))
        self._roots: dict[str, StateStorage] = {}

    @property
    def roots(self) -> tuple[str, ...]:
        """Every root URL, the storage root first."""
        return (self.storage.root_url, *self._root_urls)

    def job_prefix(self, job_id: str) -> str:
        """The URL of the job's own artifact prefix under the storage root."""
        return self.storage.url(self.storage_layout.artifacts(job_id))

    def default_uri(self, job_id: str, name: str, attempt: int | None) -> str:
        """Where ``register(name)`` without a URI puts an artifact: under the job's prefix, in a
        directory of its attempt when it is attempt-scoped (``attempt`` given)."""
        prefix = self.job_prefix(job_id)
        return f"{prefix}/{name}" if attempt is None else f"{prefix}/attempt-{attempt}/{name}"

    def resolve(self, job_id: str, uri: str) -> str:
        """The normalized ``uri`` if job ``job_id`` may register it; else
        :class:`ArtifactUriRefused` naming the roots."""
        normalized = normalize(uri)
        if self._store_of(job_id, normalized) is None:
            raise ArtifactUriRefused(
                f"artifact URI {uri!r} is outside the artifact roots of this cluster: "
                f"{self.job_prefix(job_id)}/ (the job's own prefix in the storage root)"
                + "".join(f", {root}/" for root in self._root_urls)
                + "; add a root with `zkstore daemon --artifact-root URL`"
            )
        return normalized

    def _store_of(self, job_id: str, uri: str) -> StateStorage | None:
        """The storage of the root ``uri`` is under, if job ``job_id`` may have it there."""
        if _under(uri, self.storage.root_url):
            return self.storage if _under(uri, self.job_prefix(job_id)) else None
        for root in self._root_urls:
            if _under(uri, root):
                return self._root(root)
        return None

    def _root(self, url: str) -> StateStorage:
        if url not in self._roots:
            options = self._options if url.split("://", 1)[0] == self._storage_protocol else {}
            self._roots[url] = StateStorage(url, options, timeout=self._timeout)
        return self._roots[url]

    def check(self, job_id: str, uri: str) -> None:
        """Raise :class:`UntrustedPayload` unless job ``job_id`` could have registered ``uri``
        with this configuration (a record planted in ZooKeeper points anywhere)."""
        self._trusted(job_id, uri)

    def _trusted(self, job_id: str, uri: str) -> StateStorage:
        try:
            store = self._store_of(job_id, normalize(uri))
        except ConfigError:
            store = None
        if store is None:
            raise UntrustedPayload(
                f"artifact URI {uri[:300]!r} of job {job_id} is outside this configuration's "
                "artifact roots: its data is left alone"
            )
        return store

    def delete(self, job_id: str, uri: str) -> None:
        """Delete the artifact's data (a file or a directory tree); idempotent.

        :class:`UntrustedPayload` if ``uri`` is not one job ``job_id`` could have registered
        with this configuration (then nothing is deleted); :class:`StoreUnavailable` on outages.
        """
        store = self._trusted(job_id, uri)
        store.remove_tree(normalize(uri), keep=self._shared if store is self.storage else None)

    @property
    def _shared(self) -> str:
        """Where empty directories stop being removed in the storage root: the parent of every
        job's prefix, which another job may be making at this very moment."""
        return self.storage.url(self.storage_layout.all_artifacts)

    def size(self, job_id: str, uri: str) -> int | None:
        """Bytes of the artifact's data; None if there is none or it is outside the roots."""
        try:
            store = self._trusted(job_id, uri)
        except UntrustedPayload:
            return None
        return store.tree_size(normalize(uri))

    def sweep(self, job_id: str, keep: Iterable[str]) -> int:
        """Delete every object under the job's own prefix in the storage root that is not under
        one of the ``keep`` URIs (what the job wrote there without registering it); returns how
        many were deleted."""
        kept = tuple(keep)
        stray = [
            item.uri
            for item in self.storage.list(self.storage_layout.artifacts(job_id))
            if not any(overlap(item.uri, uri) for uri in kept)
        ]
        for uri in stray:
            self.storage.remove_tree(uri, keep=self._shared)
        return len(stray)


def _under(uri: str, root: str) -> bool:
    return uri.startswith(root.rstrip("/") + "/")
