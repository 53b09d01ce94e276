"""The exceptions of zkstore: one root, conflicts kept apart from outages.

::

    ZkStoreError                         exit HTTP
    ├── ConfigError                       2   400  bad configuration or bad input (a usage error)
    │   ├── InvalidJobId                           a job id that could become a path (``../x``)
    │   ├── InvalidName                            an entry name that is not one safe segment
    │   ├── OutOfBounds                            past a bound the cluster sets: a schedule's
    │   │                                          interval under the minimum, a catch-up
    │   │                                          further back than --catchup-max
    │   └── RefusedDestination                     a notification URL whose address is not
    │                                              allowed (loopback, private, link-local...)
    ├── StoreUnavailable                  6   503  ZooKeeper or storage not reached in time
    │   └── OutcomeUnknown                         a write was sent; whether it applied is unknown
    ├── ConflictError                     5   409  the store is reachable but says no
    │   ├── VersionConflict                        the znode changed since it was read
    │   ├── HandleExists                           the node (or job) already exists
    │   │   └── ArtifactExists                     the artifact's name is taken (or overlaps)
    │   ├── NotEmpty                               the node still has children (locks held)
    │   ├── FenceLost                              a fence check of the same transaction failed
    │   │   └── NotLeader                          ... because the writer is no longer the leader
    │   └── WrongState                             the job's state does not allow the operation
    │       ├── JobFinished                        it has a result (a finished id never runs again)
    │       └── JobQuarantined                     it is in quarantine (it cannot run as it is)
    ├── HandleNotFound                    4   404  no such node, or it is marked for deletion
    │   ├── JobNotFound                            no job with that id has any trace in the store
    │   ├── DaemonNotFound                         no daemon with that id is up or known
    │   └── ArtifactNotFound                       the job registered no artifact of that name
    ├── CorruptRecord                     1   502  a znode holds something that is not a record
    │   ├── CorruptHandle                          ... a handle, in particular
    │   └── NewerRecord                   9        ... one written at a newer fleet protocol
    ├── PayloadError                      1   502  a payload cannot be trusted or read
    │   ├── PayloadMissing                         the object the handle points at is gone
    │   ├── CorruptPayload                         size or sha256 do not match the handle
    │   ├── UntrustedPayload                       HMAC missing or wrong, URI outside the root
    │   └── IncompatiblePayload                    another Python minor version, wrong content
    │       └── ForeignPython                      ... written by another Python minor version
    ├── SerializationError                1   400  a value cannot be serialized
    │   └── TooLarge                          1   413  over a size or count limit (a handle, a
    │       │                                          znode, a transaction, a payload, a history
    │       │                                          entry, a job's artifacts)
    │       └── QuotaExceeded                          ... the quota ZooKeeper enforces on a job's
    │                                                  nodes (count or bytes) refused the write
    ├── ControlRejected                   1   422  the job acknowledged a change, refusing keys
    ├── JobDidNotSucceed                  1   500  a job followed to its end FAILED
    │   └── JobEndedCancelled             3        ... it was CANCELLED
    ├── WaitTimeout                       7   504  a job did not end (or acknowledge) in time
    ├── AccessDenied                      8   502  ZooKeeper refused our credentials or rights
    └── FleetVersionError                 9   409  the fleet's protocol does not allow it (a
                                                   feature the fleet is not finalized for, a
                                                   daemon too old or too new for the fleet)

Each class carries its exit code (``exit_code``) and its HTTP status (``http_status``): the
command line and the HTTP API decide them here and nowhere else. The statuses of the 5xx family
say whose fault it is: 502 for what ZooKeeper or the storage handed back (garbage, untrusted
bytes, our credentials refused), 503 for an outage, 504 for a wait that ran out.

Library errors (kazoo, botocore, OS) are translated at the boundary with ``raise ... from exc``;
none of them escapes the public API.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

__all__ = [
    "EXIT_ACCESS_DENIED",
    "EXIT_CANCELLED",
    "EXIT_CONFLICT",
    "EXIT_FAILED",
    "EXIT_FLEET",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_TIMEOUT",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "AccessDenied",
    "ArtifactExists",
    "ArtifactNotFound",
    "ConfigError",
    "ConflictError",
    "ControlRejected",
    "CorruptHandle",
    "CorruptPayload",
    "CorruptRecord",
    "DaemonNotFound",
    "ExitCode",
    "FenceLost",
    "FleetVersionError",
    "ForeignPython",
    "HandleExists",
    "HandleNotFound",
    "IncompatiblePayload",
    "InvalidJobId",
    "InvalidName",
    "JobDidNotSucceed",
    "JobEndedCancelled",
    "JobFinished",
    "JobNotFound",
    "JobQuarantined",
    "NewerRecord",
    "NotEmpty",
    "NotLeader",
    "OutOfBounds",
    "OutcomeUnknown",
    "PayloadError",
    "PayloadMissing",
    "QuotaExceeded",
    "RefusedDestination",
    "SerializationError",
    "StoreUnavailable",
    "TooLarge",
    "UntrustedPayload",
    "VersionConflict",
    "WaitTimeout",
    "WrongState",
    "ZkStoreError",
]


class ExitCode(IntEnum):
    """The exit codes of the ``zkstore`` command line (a driver process has its own,
    :class:`zkstore.records.job_states.DriverExit`)."""

    OK = 0
    FAILED = 1
    USAGE = 2
    CANCELLED = 3
    NOT_FOUND = 4
    CONFLICT = 5
    UNAVAILABLE = 6
    TIMEOUT = 7
    ACCESS_DENIED = 8
    FLEET = 9


EXIT_OK = ExitCode.OK
EXIT_FAILED = ExitCode.FAILED
EXIT_USAGE = ExitCode.USAGE
EXIT_CANCELLED = ExitCode.CANCELLED
EXIT_NOT_FOUND = ExitCode.NOT_FOUND
EXIT_CONFLICT = ExitCode.CONFLICT
EXIT_UNAVAILABLE = ExitCode.UNAVAILABLE
EXIT_TIMEOUT = ExitCode.TIMEOUT
EXIT_ACCESS_DENIED = ExitCode.ACCESS_DENIED
EXIT_FLEET = ExitCode.FLEET


class ZkStoreError(Exception):
    """Root of every error zkstore raises."""

    exit_code: ClassVar[int] = EXIT_FAILED
    #: the status the HTTP API answers with (a bug of ours is a 500 too, without the message)
    http_status: ClassVar[int] = 500


class ConfigError(ZkStoreError):
    """The configuration or an argument is invalid; nothing was changed."""

    exit_code = EXIT_USAGE
    http_status = 400


class InvalidJobId(ConfigError):
    """A job id that is not ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``."""


class InvalidName(ConfigError):
    """An entry or record name that is not a single safe path segment."""


class OutOfBounds(ConfigError):
    """Past a bound the cluster sets on what a submitter may ask for (invariant 15)."""


class RefusedDestination(ConfigError):
    """A notification URL names (or resolves to) an address notifications may not go to."""


class StoreUnavailable(ZkStoreError):
    """ZooKeeper or the object storage could not be reached within the deadline."""

    exit_code = EXIT_UNAVAILABLE
    http_status = 503


class OutcomeUnknown(StoreUnavailable):
    """A write was sent, but the connection failed before its result arrived.

    The write may or may not have been applied. Payloads it referenced are kept, so that
    invariant 1 holds either way; the caller may read back or retry.
    """


class ConflictError(ZkStoreError):
    """The store answered, and the answer is no. ``path`` names the node it was about."""

    exit_code = EXIT_CONFLICT
    http_status = 409

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class VersionConflict(ConflictError):
    """The node's version is not the expected one: somebody else changed it."""


class HandleExists(ConflictError):
    """The node to create exists already."""


class ArtifactExists(HandleExists):
    """The artifact's name is registered already with another URI, scope or keep, or its place
    overlaps another artifact's."""


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
    http_status = 404

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class JobNotFound(HandleNotFound):
    """No job with that id is known to the store."""


class DaemonNotFound(HandleNotFound):
    """No daemon with that id is up, has attempts placed on it, or is drained."""


class ArtifactNotFound(HandleNotFound):
    """The job has no artifact of that name (never registered, or released)."""


class CorruptRecord(ZkStoreError):
    """A znode's data is not a valid record of its kind; the message names the path."""

    http_status = 502


class CorruptHandle(CorruptRecord):
    """A znode's data is not a valid handle; the message names the path."""


class NewerRecord(CorruptRecord):
    """A record (or handle) written at a fleet protocol newer than this code speaks: not
    garbage, and never quarantined or deleted for it; the job needs a newer daemon
    (:mod:`zkstore.protocol`). ``protocol`` is the one it was written at."""

    exit_code = EXIT_FLEET
    http_status = 409

    def __init__(self, message: str, *, protocol: int) -> None:
        super().__init__(message)
        self.protocol = protocol


class PayloadError(ZkStoreError):
    """A payload cannot be returned: it is missing, corrupt, untrusted or incompatible."""

    http_status = 502


class PayloadMissing(PayloadError):
    """The object a handle points at does not exist."""


class CorruptPayload(PayloadError):
    """The object's size or sha256 does not match its handle."""


class UntrustedPayload(PayloadError):
    """The payload's signature is missing or wrong, or its URI is outside the storage root."""


class IncompatiblePayload(PayloadError):
    """The payload was written by another Python minor version, in an unknown format, or holds
    something other than what its kind promises."""


class ForeignPython(IncompatiblePayload):
    """The payload was written by another Python minor version: a process of that version can
    read it (a job's code unpickles only where it was pickled), this one cannot."""


class SerializationError(ZkStoreError):
    """A value cannot be serialized."""

    http_status = 400


class TooLarge(SerializationError):
    """Over a size or count limit, refused before anything is written: a handle
    (:data:`~zkstore.records.handle.MAX_HANDLE_BYTES`), a znode or a transaction (64 KB), a payload
    (the configured maximum), a control history entry, a job's artifacts."""

    http_status = 413


class QuotaExceeded(TooLarge):
    """ZooKeeper refused a write under a job's node: the job's quota of nodes or bytes
    (``R/jobs/<job>``, set by the leader, enforced by the server) is used up."""


class ControlRejected(ZkStoreError):
    """The job acknowledged a control change and rejected some of its keys (the reasons are in
    the message): the change is stored, the job runs on without those values."""

    http_status = 422


class JobDidNotSucceed(ZkStoreError):
    """A job followed to its end (``submit --wait``, ``jobs wait``) ended FAILED; the message is
    the line that says so (the command line prints it as it is)."""


class JobEndedCancelled(JobDidNotSucceed):
    """A job followed to its end ended CANCELLED."""

    exit_code = EXIT_CANCELLED


class WaitTimeout(ZkStoreError):
    """A job did not end within the time given to wait for it (a client's deadline, not an
    outage: the job goes on)."""

    exit_code = EXIT_TIMEOUT
    http_status = 504


class AccessDenied(ZkStoreError):
    """ZooKeeper refused the operation: no credentials, a wrong password (a digest identity
    with a wrong password is simply an identity without rights), SASL authentication failed, or
    the node's ACL does not grant this identity the right. The message names the identity,
    never its secret."""

    exit_code = EXIT_ACCESS_DENIED
    http_status = 502

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        #: the node it was about, where one op of a transaction was refused
        self.path = path


class FleetVersionError(ZkStoreError):
    """The fleet's protocol does not allow the operation: a feature the fleet has not been
    finalized for (some daemon is older), or a daemon that cannot serve the fleet's protocol
    (too old for it, or too new). The message says what to upgrade or run."""

    exit_code = EXIT_FLEET
    http_status = 409
