"""The vocabulary of ZooKeeper transactions: ops, the guards that fence them, and deadlines.

A transaction is a list of :class:`Check`, :class:`Create`, :class:`SetData` and :class:`Delete`;
a :class:`Fence` prepends :class:`Guard` ops that make the whole write conditional on the
writer's own standing (its election node, its attempt's records), each guard with its own error.
:meth:`zkstore.zookeeper.zk.ZooKeeper.commit` applies them atomically and inspects every result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from zkstore.errors import ConflictError, FenceLost, HandleExists, HandleNotFound, ZkStoreError

__all__ = [
    "Check",
    "Create",
    "Deadline",
    "Delete",
    "Fence",
    "Guard",
    "Op",
    "SetData",
    "absent",
    "without_existing",
]


class Deadline:
    """A point in time by which an operation must be over."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self._end - time.monotonic())

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0


@dataclass(frozen=True)
class Check:
    """Transaction op: the node exists (``version=-1``) or has exactly ``version``."""

    path: str
    version: int = -1


@dataclass(frozen=True)
class Create:
    """Transaction op: create ``path``; ``owner``, the job whose node it is where the ACL policy
    cannot tell from the path (a claim: :meth:`zkstore.zookeeper.identity.AclPolicy.acl_for`)."""

    path: str
    data: bytes = b""
    ephemeral: bool = False
    owner: str | None = None


@dataclass(frozen=True)
class SetData:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class Delete:
    path: str
    version: int = -1


Op = Check | Create | SetData | Delete


def absent(path: str) -> tuple[Create, Delete]:
    """Ops asserting that ``path`` does not exist: create and delete it in the same transaction.

    ZooKeeper has no "check absent" op; this pair fails with :class:`HandleExists` if the node
    exists and leaves nothing behind if it does not. The parent must exist.
    """
    return (Create(path), Delete(path))


def without_existing(
    ops: list[Op], error: ZkStoreError | None, optional: set[str]
) -> tuple[list[Op], str] | None:
    """For a transaction that failed only because a node it creates is there already
    (``error``), and that can do without creating it (its path in ``optional``): the ops to
    commit again, and that path. None for any other outcome."""
    if not isinstance(error, HandleExists) or error.path not in optional:
        return None
    there = error.path
    return [op for op in ops if not (isinstance(op, Create) and op.path == there)], there


@dataclass(frozen=True)
class Guard:
    """Ops that must hold for a transaction to apply, and the error to raise when they do not."""

    ops: tuple[Op, ...]
    error: type[ZkStoreError]
    description: str


@dataclass(frozen=True)
class Fence:
    """Guards that make a transaction conditional on the writer's standing.

    If an op of a guard fails, the transaction applies nothing and :meth:`ZooKeeper.commit`
    raises that guard's ``error`` (e.g. :class:`~zkstore.errors.NotLeader`). Fence on nodes that
    can never come back once gone (a sequential election node) or on versions that only grow.
    A fixed-name ephemeral at version 0 is no fence by itself, since a successor re-creates it at
    version 0 too; a driver's fence pairs its ``running`` node (version 0) with the version of
    its attempt's ``status``, which the leader bumps for every new attempt: together they hold
    only while this attempt's node lives.
    """

    guards: tuple[Guard, ...] = ()

    @classmethod
    def check(
        cls,
        path: str,
        version: int = -1,
        *,
        error: type[ZkStoreError] = FenceLost,
        description: str = "fence",
    ) -> Fence:
        """A fence on ``path`` existing (``version=-1``) or being at exactly ``version``."""
        return cls((Guard((Check(path, version),), error, description),))

    @classmethod
    def absent(
        cls, path: str, *, error: type[ZkStoreError] = HandleExists, description: str = ""
    ) -> Fence:
        """A fence on ``path`` not existing (see :func:`absent`)."""
        return cls((Guard(absent(path), error, description or f"{path} exists"),))

    @property
    def ops(self) -> tuple[Op, ...]:
        return tuple(op for guard in self.guards for op in guard.ops)

    def failure(self, index: int) -> ZkStoreError | None:
        """The error for a failure of op ``index`` of :attr:`ops`, None if it is not a fence op."""
        for guard in self.guards:
            if index < len(guard.ops):
                path = guard.ops[index].path
                message = f"{guard.description}: {path}"
                if issubclass(guard.error, ConflictError | HandleNotFound):
                    return guard.error(message, path=path)
                return guard.error(message)
            index -= len(guard.ops)
        return None

    def __add__(self, other: Fence | None) -> Fence:
        if other is None:
            return self
        return Fence(self.guards + other.guards)
