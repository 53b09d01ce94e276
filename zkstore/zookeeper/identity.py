"""Who a process is in ZooKeeper, and the ACL each node gets: a job reaches only its own job.

With digest credentials (``ZKSTORE_ZK_AUTH=user:password``) there are three kinds of
identity, all derived from the cluster's password, so nothing new is configured:

- the **cluster** (daemons, command line, clients): all rights on every node;
- the **drivers** (every driver also authenticates as ``zkstore-drivers``, with a password
  derived for the cluster): read on every node, and adding to the artifact claims' index;
- **each job** (``zkstore-job.<job>``, a password derived for the cluster and the job): the
  rights its driver needs on its own job's nodes and nowhere else.

A driver is given the drivers' and its job's credentials, never the cluster's
(:func:`driver_identity`); derivation is one-way, so one job's credentials reveal neither the
cluster's nor another job's. Every node is created with :meth:`AclPolicy.acl_for` its path:

    every node                          cluster ALL, the read ids READ, drivers READ
    R/jobs/<job>                        + the job: READ CREATE DELETE (its records appear and go)
    R/jobs/<job>/{cancel, stop, end}[/=] nothing more: a request and its pin, created together
                                        (zkstore.jobs.request_pins), so that the job, which may
                                        delete any leaf under its node, cannot delete them
    R/jobs/<job>/{running, spark, outcome, heartbeat, control-ack, control-keys, resources}
                                        + the job: ALL (the driver writes them)
    R/jobs/<job>/{checkpoints, artifacts, outputs}      + the job: READ CREATE DELETE
    R/jobs/<job>/{checkpoints, artifacts, outputs}/...  + the job: ALL (a checkpoint's handle
                                        and its locks; an output's commits)
    R/currentJobs/<job>/locks[/<owner>] + the job: ALL (its driver's lock on the definition)
    R/artifact-claims/...               drivers: READ CREATE DELETE (a shared index every
                                        driver's registration adds to: see docs/operating.md)
    R/artifact-claims/.../<place>       a claimed place (created with its claim, ``owner``):
                                        drivers READ; its job: READ CREATE DELETE
    R/artifact-claims/.../<place>/=     the claim: drivers READ; its job: READ

So a claim is its job's alone: no other job's identity, nor the drivers' shared one, can delete,
change or re-ACL it (deleting the claim takes DELETE on its place's node), and whoever releases
a place checks that its claim carries exactly that (:meth:`AclPolicy.claim_unheld`).

So job code that opens its own session with its driver's credentials can change its own job's
records (its status, say, by deleting it: it is its own job) and nothing of another job's, of
the leader's (results, the cleanup index, quarantine, notifications, assignments, members,
schedules, the fleet) or of any handle. SASL identities are the operator's: they cannot be
derived, and a driver then keeps the cluster's (docs/operating.md says so).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.security import ACL, Id, Permissions, make_digest_acl_credential

from zkstore.config import DIGEST, ZkAuth, validate_id
from zkstore.errors import ConfigError

__all__ = [
    "CLAIMS",
    "CLAIM_MARK",
    "DRIVERS_USER",
    "DRIVER_DIRS",
    "DRIVER_RECORDS",
    "JOB_IDS_KEPT",
    "JOB_USER_PREFIX",
    "AclPolicy",
    "DriverIdentity",
    "digest_id",
    "driver_identity",
    "drivers_auth",
    "job_auth",
]

DRIVERS_USER = "zkstore-drivers"
JOB_USER_PREFIX = "zkstore-job."

#: The records a driver writes under its job's directory, as its own.
DRIVER_RECORDS = frozenset(
    {"running", "spark", "outcome", "heartbeat", "control-ack", "control-keys", "resources"}
)
#: The directories under a job's where its driver adds and removes children.
DRIVER_DIRS = frozenset({"checkpoints", "artifacts", "outputs"})
CLAIMS = "artifact-claims"

#: The jobs' ACL ids a policy keeps derived (a daemon's policy meets every job it ever runs).
JOB_IDS_KEPT = 1024
_GROW = Permissions.READ | Permissions.CREATE | Permissions.DELETE
#: The rights that change a node or what is below it.
_CHANGE = Permissions.WRITE | Permissions.CREATE | Permissions.DELETE | Permissions.ADMIN
#: What ZooKeeper shows of a digest's hash to a reader without ADMIN on the node.
_REDACTED = "x"
#: ZooKeeper's id of everybody.
ANYONE = ("world", "anyone")
#: The last name of a claim's node (:data:`zkstore.jobs.claims.MARK`).
CLAIM_MARK = "="


def _derive(cluster: ZkAuth, label: str, *parts: str) -> str:
    message = ("\0".join((label, *parts))).encode()
    return hmac.new(cluster.secret.encode(), message, hashlib.sha256).hexdigest()


def drivers_auth(cluster: ZkAuth, cluster_id: str) -> ZkAuth:
    """The credentials every driver of the cluster holds besides its job's."""
    return ZkAuth(DIGEST, DRIVERS_USER, _derive(cluster, "zkstore-zk-drivers", cluster_id))


def job_auth(cluster: ZkAuth, cluster_id: str, job_id: str) -> ZkAuth:
    """The credentials of one job's driver (only a holder of the cluster's can derive them)."""
    validate_id(job_id, "job id")
    user = f"{JOB_USER_PREFIX}{job_id}"
    return ZkAuth(DIGEST, user, _derive(cluster, "zkstore-zk-job", cluster_id, job_id))


def digest_id(auth: ZkAuth) -> Id:
    """The ACL id of a digest identity (its hash, never its password)."""
    return Id(DIGEST, make_digest_acl_credential(auth.user, auth.secret))


@dataclass(frozen=True)
class DriverIdentity:
    """What a driver authenticates as: the drivers' credentials and its job's; and the ACL
    ids of the cluster and the read-only ids, so that the nodes it creates carry them too."""

    job_id: str
    drivers: ZkAuth = field(repr=False)
    job: ZkAuth = field(repr=False)
    cluster_id: Id = field(repr=False)
    read_ids: tuple[str, ...] = ()

    def auth_data(self) -> list[tuple[str, str]]:
        return [(DIGEST, f"{a.user}:{a.secret}") for a in (self.drivers, self.job)]

    def describe(self) -> str:
        return f"digest user {self.job.user!r} (and {DRIVERS_USER!r})"

    def to_json(self) -> dict[str, object]:
        """For the driver's configuration pipe (it holds this job's secrets only)."""
        return {
            "job_id": self.job_id,
            "drivers": self.drivers.to_text(),
            "job": self.job.to_text(),
            "cluster_id": f"{self.cluster_id.scheme}:{self.cluster_id.id}",
            "read_ids": list(self.read_ids),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DriverIdentity:
        try:
            scheme, _, ident = str(data["cluster_id"]).partition(":")
            return cls(
                job_id=str(data["job_id"]),
                drivers=ZkAuth.parse(str(data["drivers"])),
                job=ZkAuth.parse(str(data["job"])),
                cluster_id=Id(scheme, ident),
                read_ids=tuple(str(i) for i in data.get("read_ids") or ()),
            )
        except (KeyError, ConfigError) as exc:
            raise ConfigError(f"a driver identity that does not parse: {exc}") from None


def driver_identity(
    cluster: ZkAuth | None, cluster_id: str, job_id: str, read_ids: Sequence[str] = ()
) -> DriverIdentity | None:
    """The identity a driver of ``job_id`` gets in place of the cluster's; None when the
    cluster's credentials are not a digest (open ACLs, or SASL: nothing to derive from)."""
    if cluster is None or cluster.scheme != DIGEST:
        return None
    return DriverIdentity(
        job_id=job_id,
        drivers=drivers_auth(cluster, cluster_id),
        job=job_auth(cluster, cluster_id, job_id),
        cluster_id=digest_id(cluster),
        read_ids=tuple(read_ids),
    )


class AclPolicy:
    """The ACL of each node under a cluster's root (see the module). Built with the cluster's
    credentials (any job's entries can be made) or a driver's (its own job's only)."""

    def __init__(
        self,
        base: str,
        cluster_id: str,
        *,
        cluster: ZkAuth | None = None,
        driver: DriverIdentity | None = None,
        read_ids: Sequence[str] = (),
    ) -> None:
        if (cluster is None) == (driver is None):
            raise ConfigError("an ACL policy is the cluster's or a driver's")
        self.base = base.rstrip("/")
        self.cluster_id = cluster_id
        self._cluster = cluster
        self._driver = driver
        owner = digest_id(cluster) if cluster is not None else driver.cluster_id  # type: ignore[union-attr]
        drivers = drivers_auth(cluster, cluster_id) if cluster is not None else driver.drivers  # type: ignore[union-attr]
        self._drivers_id = digest_id(drivers)
        self._owner = owner
        self._common = [ACL(Permissions.ALL, owner)] + [
            ACL(Permissions.READ, Id(*i.split(":", 1))) for i in read_ids
        ]
        self._jobs: dict[str, Id] = {}

    def _job_id(self, job_id: str) -> Id | None:
        if job_id not in self._jobs:
            while len(self._jobs) >= JOB_IDS_KEPT:  # a cache: the oldest derived again if need be
                self._jobs.pop(next(iter(self._jobs)))
            if self._cluster is not None:
                self._jobs[job_id] = digest_id(job_auth(self._cluster, self.cluster_id, job_id))
            elif self._driver is not None and self._driver.job_id == job_id:
                self._jobs[job_id] = digest_id(self._driver.job)
            else:
                return None  # a driver cannot name another job's identity: never needed
        return self._jobs[job_id]

    def acl_for(self, path: str, owner: str | None = None) -> list[ACL]:
        """The ACL a node at ``path`` is created with; ``owner``: the job whose claim it is
        (a claimed place's node and its claim, under ``R/artifact-claims``)."""
        if not path.startswith(self.base + "/"):
            return list(self._common)  # the root's parents and the root: a driver needs none
        acl = [*self._common, ACL(Permissions.READ, self._drivers_id)]
        parts = path[len(self.base) + 1 :].split("/")
        if parts[0] == CLAIMS:
            if owner is None:  # the shared index: every driver adds places to it
                return [*self._common, ACL(_GROW, self._drivers_id)]
            ident = self._job_id(owner)
            rights = Permissions.READ if parts[-1] == CLAIM_MARK else _GROW
            return acl if ident is None else [*acl, ACL(rights, ident)]
        granted = _job_rights(parts)
        if granted is None:
            return acl
        job_id, perms = granted
        ident = self._job_id(job_id)
        return acl if ident is None else [*acl, ACL(perms, ident)]

    def changers(self, acls: Sequence[ACL]) -> list[str]:
        """Who but the cluster may change a node with ``acls`` (its data, what is under it, its
        ACL), named for people (never a digest's hash); empty if nobody."""
        return sorted(
            {
                _who(entry.id, self._drivers_id)
                for entry in acls
                if entry.perms & _CHANGE and not _is(entry.id, self._owner)
            }
        )

    def lets_cluster(self, acls: Sequence[ACL], perms: int) -> bool:
        """Whether the cluster's identity has all of ``perms`` on a node with ``acls`` (as itself
        or as anybody): every node zkstore makes gives it ALL."""
        return any(
            entry.perms & perms == perms
            and (_is(entry.id, self._owner) or (entry.id.scheme, entry.id.id) == ANYONE)
            for entry in acls
        )

    def claim_unheld(self, acls: Sequence[ACL], job_id: str, *, mark: bool) -> str | None:
        """Why a claim's node (``mark``) or its place's node with ``acls`` is not ``job_id``'s
        alone, None if it is: nobody but the cluster and the job may change it, and the job's
        identity is named (it was created by the job's driver, or for it by the cluster)."""
        ident = self._job_id(job_id)
        if ident is None:
            return f"the identity of job {job_id} cannot be named here"
        others = sorted(
            {
                _who(entry.id, self._drivers_id)
                for entry in acls
                if entry.perms & _CHANGE
                and not (_is(entry.id, self._owner) or _is(entry.id, ident))
            }
        )
        if others:
            return f"{' and '.join(others)} may change it"
        needed = Permissions.READ if mark else Permissions.DELETE
        if not any(_is(entry.id, ident) and entry.perms & needed for entry in acls):
            return f"it was not made under job {job_id}'s own identity"
        return None

    def job_entry(self, job_id: str) -> Id | None:
        """The ACL id of ``job_id``'s identity (None where this policy cannot name it)."""
        return self._job_id(job_id)


def _is(seen: Id, ident: Id) -> bool:
    """``seen`` (an ACL entry as read) is ``ident``. ZooKeeper shows a digest's hash only to
    a reader with ADMIN on the node (the cluster), as ``user:x`` to others (a driver): then
    the user names are compared."""
    if seen == ident:
        return True
    user, _, hashed = str(seen.id).partition(":")
    return bool(
        seen.scheme == ident.scheme == DIGEST
        and hashed == _REDACTED
        and user == ident.id.partition(":")[0]
    )


def _who(ident: Id, drivers: Id) -> str:
    """An ACL id as a reason names it (never a digest's hash)."""
    if _is(ident, drivers):
        return f"the drivers' shared identity ({DRIVERS_USER})"
    if ident.scheme == DIGEST:
        return f"digest user {ident.id.partition(':')[0]!r}"
    return f"{ident.scheme}:{ident.id}"


def _job_rights(parts: list[str]) -> tuple[str, int] | None:
    """(job, its rights) for a node of a job that its driver writes, else None."""
    if parts[0] == "jobs" and len(parts) >= 2:
        job, rest = parts[1], parts[2:]
        if not rest:
            return job, _GROW
        if len(rest) == 1 and rest[0] in DRIVER_RECORDS:
            return job, Permissions.ALL
        if rest[0] in DRIVER_DIRS:  # a checkpoint's handle has its locks below it
            return job, _GROW if len(rest) == 1 else Permissions.ALL
        return None
    if parts[0] == "currentJobs" and len(parts) in (3, 4) and parts[2] == "locks":
        return parts[1], Permissions.ALL
    return None
