"""The exceptions of zkstore: one root, conflicts kept apart from outages.

::

    ZkStoreError                         exit
    ├── ConfigError                       2   bad configuration or bad input (a usage error)
    │   ├── InvalidJobId                      a job id that could become a path (``../x``, ``a/b``)
    │   └── InvalidName                       an entry name that is not one safe path segment
    ├── StoreUnavailable                  6   ZooKeeper or storage could not be reached in time
    │   └── OutcomeUnknown                    a write was sent; whether it was applied is unknown
    ├── ConflictError                     5   the store is reachable but says no
    │   ├── VersionConflict                   the znode changed since it was read
    │   ├── HandleExists                      the node (or job) already exists
    │   ├── NotEmpty                          the node still has children (locks held)
    │   ├── FenceLost                         a fence check of the same transaction failed
    │   │   └── NotLeader                     ... because the writer is no longer the leader
    │   └── WrongState                        the job's state does not allow the operation
    │       ├── JobFinished                   it has a result (a finished id never runs again)
    │       └── JobQuarantined                it is in quarantine (it cannot run as it is)
    ├── HandleNotFound                    4   no such node, or it is marked for deletion
    │   ├── JobNotFound                       no job with that id has any trace in the store
    │   └── DaemonNotFound                    no daemon with that id is up or known to the fleet
    ├── CorruptRecord                     1   a znode holds something that is not a valid record
    │   └── CorruptHandle                     ... a handle, in particular
    ├── PayloadError                      1   a payload cannot be trusted or read
    │   ├── PayloadMissing                    the object the handle points at does not exist
    │   ├── CorruptPayload                    size or sha256 do not match the handle
    │   ├── UntrustedPayload                  HMAC missing or wrong, URI outside the root
    │   └── IncompatiblePayload               another Python minor version, or wrong content
    ├── SerializationError                1   a value cannot be serialized, or is over a limit
    ├── ControlRejected                   1   the job acknowledged a control change, refusing keys
    ├── WaitTimeout                       7   a job did not end (or acknowledge) in the time given
    └── AccessDenied                      8   ZooKeeper refused our credentials or their rights

The exit code of each class is its ``exit_code``: the command line decides it in one place, from
the class of the error. A job followed to its end exits with its outcome instead (0 SUCCEEDED,
1 FAILED, 3 CANCELLED; a quarantined job is :class:`JobQuarantined`, 5).

Library errors (kazoo, botocore, OS) are translated at the boundary with ``raise ... from exc``;
none of them escapes the public API.
"""

from __future__ import annotations

from typing import ClassVar

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 3
EXIT_NOT_FOUND = 4
EXIT_CONFLICT = 5
EXIT_UNAVAILABLE = 6
EXIT_TIMEOUT = 7
EXIT_ACCESS_DENIED = 8


class ZkStoreError(Exception):
    """Root of every error zkstore raises."""

    exit_code: ClassVar[int] = EXIT_FAILED


class ConfigError(ZkStoreError):
    """The configuration or an argument is invalid; nothing was changed."""

    exit_code = EXIT_USAGE


class InvalidJobId(ConfigError):
    """A job id that is not ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``."""


class InvalidName(ConfigError):
    """An entry or record name that is not a single safe path segment."""


class StoreUnavailable(ZkStoreError):
    """ZooKeeper or the object storage could not be reached within the deadline."""

    exit_code = EXIT_UNAVAILABLE


class OutcomeUnknown(StoreUnavailable):
    """A write was sent, but the connection failed before its result arrived.

    The write may or may not have been applied. Payloads it referenced are kept, so that
    invariant 1 holds either way; the caller may read back or retry.
    """


class ConflictError(ZkStoreError):
    """The store answered, and the answer is no. ``path`` names the node it was about."""

    exit_code = EXIT_CONFLICT

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


class WrongState(ConflictError):
    """The job exists, but its state does not allow the operation (e.g. cancel a finished job)."""


class JobFinished(WrongState):
    """The job id has a result: a finished job is never run again."""


class JobQuarantined(WrongState):
    """The job is in quarantine: it cannot run until an operator releases or purges it."""


class HandleNotFound(ZkStoreError):
    """The node does not exist, or it is marked for deletion. ``path`` names it."""

    exit_code = EXIT_NOT_FOUND

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class JobNotFound(HandleNotFound):
    """No job with that id is known to the store."""


class DaemonNotFound(HandleNotFound):
    """No daemon with that id is up, has attempts placed on it, or is drained."""


class CorruptRecord(ZkStoreError):
    """A znode's data is not a valid record of its kind; the message names the path."""


class CorruptHandle(CorruptRecord):
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
    """The payload was written by another Python minor version, in an unknown format, or holds
    something other than what its kind promises."""


class SerializationError(ZkStoreError):
    """A value cannot be serialized, or its serialized form is over the size limit."""


class ControlRejected(ZkStoreError):
    """The job acknowledged a control change and rejected some of its keys (the reasons are in
    the message): the change is stored, the job runs on without those values."""


class WaitTimeout(ZkStoreError):
    """A job did not end within the time given to wait for it (a client's deadline, not an
    outage: the job goes on)."""

    exit_code = EXIT_TIMEOUT


class AccessDenied(ZkStoreError):
    """ZooKeeper refused the operation: no credentials, a wrong password (a digest identity
    with a wrong password is simply an identity without rights), SASL authentication failed, or
    the node's ACL does not grant this identity the right. The message names the identity,
    never its secret."""

    exit_code = EXIT_ACCESS_DENIED
