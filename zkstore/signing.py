"""Payload signatures, with a key per job derived from the cluster's.

The cluster's signing key (``ZKSTORE_SIGNING_KEY``) is held by the daemons, the command line and
the clients that submit jobs. Nobody signs a job's payloads with it directly: every payload under
a job's storage prefix (``<cluster>/jobs/<job>/...``: its definition, with the files shipped in
it, and its checkpoints, whose handles carry the signature) is signed with the key derived for
that job and cluster::

    job key = HMAC-SHA256(cluster key, "zkstore-job-key" 0x00 cluster id 0x00 job id)

and a signature is HMAC-SHA256(key, ``"zkstore-payload-v1\\n" key-in-storage "\\n" sha256 "\\n"
size``), where the storage key names cluster, job and kind, so a signed payload cannot be
replayed as another job's. A job's driver is given its own job's key and never the cluster's
(:meth:`zkstore.config.StoreConfig.for_job`): code running in it, whatever it reads of its own
memory, can sign and verify its own job's payloads only. The derivation is one-way, so a job
key reveals neither the cluster key nor any other job's key.

Payloads signed before job keys existed carry a signature made with the cluster key itself.
Whoever holds the cluster key accepts those too (a *legacy* signature); a driver cannot, so the
daemon that launches an attempt re-signs its job's legacy handles first
(:func:`zkstore.jobs.resign.resign_job`): the signature lives in the handle in ZooKeeper, not in
the payload, so re-signing rewrites one small handle and never a payload.

Keys outside any job's prefix (nothing zkstore writes today; tests) are signed with the cluster
key; a driver can neither sign nor verify them.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, field

from zkstore.errors import ConfigError, UntrustedPayload

__all__ = ["JOB_KEY_LABEL", "JobKey", "Signer", "derive_job_key", "job_of"]

JOB_KEY_LABEL = b"zkstore-job-key\0"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def derive_job_key(cluster_key: bytes, cluster_id: str, job_id: str) -> bytes:
    """The signing key of one job of one cluster (32 bytes). Ids are zkstore ids (letters,
    digits, ``._-``): the separator can never be part of one, so no two pairs share a key."""
    for value in (cluster_id, job_id):
        if not _ID.fullmatch(value):
            raise ConfigError(f"cannot derive a job key for the id {value[:60]!r}")
    message = JOB_KEY_LABEL + cluster_id.encode() + b"\0" + job_id.encode()
    return hmac.new(cluster_key, message, hashlib.sha256).digest()


def job_of(key: str) -> tuple[str, str] | None:
    """``(cluster id, job id)`` of a storage key ``<cluster>/jobs/<job>/...``, else None."""
    parts = key.split("/")
    if len(parts) >= 4 and parts[1] == "jobs" and parts[0] and parts[2]:
        return parts[0], parts[2]
    return None


def _mac(key: bytes, storage_key: str, sha256: str, size: int) -> str:
    message = f"zkstore-payload-v1\n{storage_key}\n{sha256}\n{size}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class JobKey:
    """One job's signing key: what a driver holds instead of the cluster's."""

    cluster_id: str
    job_id: str
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.key) != 32:
            raise ConfigError("a job's signing key is 32 bytes")

    def __repr__(self) -> str:
        return f"JobKey({self.cluster_id!r}, {self.job_id!r})"


class Signer:
    """Signs payloads and checks their signatures, with the cluster key (deriving each job's
    key from it) or with one job's key only; or with no key (nothing signed or checked)."""

    def __init__(self, cluster_key: bytes | None = None, job_key: JobKey | None = None) -> None:
        if cluster_key is not None and job_key is not None:
            raise ConfigError("a signer holds the cluster key or one job's key, not both")
        self._cluster_key = cluster_key
        self._job_key = job_key

    def __repr__(self) -> str:
        scope = "none" if not self.enabled else "cluster" if self._cluster_key else "job"
        return f"Signer({scope})"

    @property
    def holds_cluster_key(self) -> bool:
        """True if this signer holds the cluster key (it can tell and re-sign legacy ones)."""
        return self._cluster_key is not None

    @property
    def enabled(self) -> bool:
        """True if payloads are signed and signatures required."""
        return self._cluster_key is not None or self._job_key is not None

    def _key_for(self, storage_key: str) -> bytes:
        """The key that signs ``storage_key`` now; :class:`UntrustedPayload` if this signer
        holds none for it (a job's key and another job's payload)."""
        owner = job_of(storage_key)
        if self._cluster_key is not None:
            if owner is None:
                return self._cluster_key
            try:
                return derive_job_key(self._cluster_key, *owner)
            except ConfigError:
                raise UntrustedPayload("not under a valid cluster and job id") from None
        assert self._job_key is not None
        if owner != (self._job_key.cluster_id, self._job_key.job_id):
            raise UntrustedPayload(
                f"not a payload of job {self._job_key.job_id}, the only job this process holds "
                "a signing key for"
            )
        return self._job_key.key

    def check_scope(self, storage_key: str) -> None:
        """Raise :class:`UntrustedPayload` unless this signer can sign ``storage_key`` (before
        writing anything there)."""
        if self.enabled:
            self._key_for(storage_key)

    def sign(self, storage_key: str, sha256: str, size: int) -> str | None:
        """The signature of a payload at ``storage_key``, or None without a key."""
        if not self.enabled:
            return None
        return _mac(self._key_for(storage_key), storage_key, sha256, size)

    def check(self, storage_key: str, sha256: str, size: int, signature: str | None) -> None:
        """Raise :class:`UntrustedPayload` (saying why, the caller says which payload) unless
        ``signature`` is the payload's, made with its
        job's key (or, by a holder of the cluster key, with the cluster key itself: a payload
        signed before job keys existed). Without a key, nothing is checked."""
        if not self.enabled:
            return
        if signature is None:
            raise UntrustedPayload("not signed, and a signing key is configured")
        if hmac.compare_digest(self.sign(storage_key, sha256, size) or "", signature):
            return
        if self.is_legacy(storage_key, sha256, size, signature):
            return
        raise UntrustedPayload(
            "signature does not match (wrong key, tampered, or moved from another job, kind or "
            "cluster)"
        )

    def is_legacy(self, storage_key: str, sha256: str, size: int, signature: str | None) -> bool:
        """True if ``signature`` was made with the cluster key itself (before job keys), which
        only a holder of the cluster key can tell, for a payload of a job."""
        if self._cluster_key is None or signature is None or job_of(storage_key) is None:
            return False
        legacy = _mac(self._cluster_key, storage_key, sha256, size)
        return hmac.compare_digest(legacy, signature)
