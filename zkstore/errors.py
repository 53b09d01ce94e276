"""The exceptions of zkstore: one root, conflicts kept apart from outages.

::

    ZkStoreError
    ├── ConfigError                  bad configuration or bad input (a usage error)
    │   └── InvalidJobId             a job id that could become a path (``../x``, ``a/b``, ...)
    ├── StoreUnavailable             ZooKeeper or storage could not be reached in time
    │   └── OutcomeUnknown           a write was sent but whether it was applied is unknown
    ├── ConflictError                the store is reachable but says no
    │   ├── VersionConflict          the znode changed since it was read
    │   ├── HandleExists             the node (or job, or result) already exists
    │   ├── NotEmpty                 the node still has children (locks held by someone)
    │   └── FenceLost                a fence check of the same transaction failed
    │       └── NotLeader            ... because the writer is no longer the leader
    ├── HandleNotFound               no such node, or it is marked for deletion
    ├── CorruptHandle                a znode holds something that is not a valid handle
    ├── PayloadError                 a payload cannot be trusted or read
    │   ├── PayloadMissing           the object the handle points at does not exist
    │   ├── CorruptPayload           size or sha256 do not match the handle
    │   ├── UntrustedPayload         HMAC missing or wrong, or URI outside the storage root
    │   └── IncompatiblePayload      written by another Python minor version or format
    └── SerializationError           a value cannot be serialized, or is over the size limit

Library errors (kazoo, botocore, OS) are translated at the boundary with ``raise ... from exc``;
none of them escapes the public API.
"""

from __future__ import annotations


class ZkStoreError(Exception):
    """Root of every error zkstore raises."""


class ConfigError(ZkStoreError):
    """The configuration or an argument is invalid; nothing was changed."""


class InvalidJobId(ConfigError):
    """A job id that is not ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``."""


class StoreUnavailable(ZkStoreError):
    """ZooKeeper or the object storage could not be reached within the deadline."""


class OutcomeUnknown(StoreUnavailable):
    """A write was sent, but the connection failed before its result arrived.

    The write may or may not have been applied. Payloads it referenced are kept, so that
    invariant 1 holds either way; the caller may read back or retry.
    """


class ConflictError(ZkStoreError):
    """The store answered, and the answer is no. ``path`` names the node it was about."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class VersionConflict(ConflictError):
    """The node's version is not the expected one: somebody else changed it."""


class HandleExists(ConflictError):
    """The node to create exists already."""


class NotEmpty(ConflictError):
    """The node to delete still has children."""


class FenceLost(ConflictError):
    """A fence check in the same transaction failed, so nothing was written."""


class NotLeader(FenceLost):
    """The writer's leadership (its election node) is gone: it must stop acting."""


class HandleNotFound(ZkStoreError):
    """The node does not exist, or it is marked for deletion. ``path`` names it."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class CorruptHandle(ZkStoreError):
    """A znode's data is not a valid handle; the message names the path."""


class PayloadError(ZkStoreError):
    """A payload cannot be returned: it is missing, corrupt, untrusted or incompatible."""


class PayloadMissing(PayloadError):
    """The object a handle points at does not exist."""


class CorruptPayload(PayloadError):
    """The object's size or sha256 does not match its handle."""


class UntrustedPayload(PayloadError):
    """The payload's signature is missing or wrong, or its URI is outside the storage root."""


class IncompatiblePayload(PayloadError):
    """The payload was written by another Python minor version or in an unknown format."""


class SerializationError(ZkStoreError):
    """A value cannot be serialized, or its serialized form is over the size limit."""
