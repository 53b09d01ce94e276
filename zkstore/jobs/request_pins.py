"""A job's ``cancel``, ``stop`` and ``end`` requests, pinned where they land so that the job
cannot delete them.

A job's identity has CREATE and DELETE on its job's node (``R/jobs/<job>``: its driver makes and
removes ``running``, ``spark``, ``outcome``), and ZooKeeper's DELETE is a right on the parent: so
job code holding its driver's credentials could delete an operator's ``cancel`` or ``stop``, or
the leader's ``end``, before the leader or its member read it, and run on as if nobody had asked.
ZooKeeper deletes no node that has a child, though, and deleting the child takes DELETE on the
request's own node, whose ACL gives the job none (:class:`~zkstore.zookeeper.identity.AclPolicy`:
every node but the driver's own records). So each request is created with a child, its pin
(``<request>/=``), in the same transaction, and deleted with it, pin first; the job can read both
and remove neither.

A request a job made itself (it may create any name under its node) is not pinned by us: the
snapshot treats one it cannot read as asked for (the job cancelled or stopped itself), and the
cluster's request replaces one it can read. A pin is written once the fleet is finalized at
protocol 5 (:data:`~zkstore.protocol.PINNED_REQUESTS`): a daemon or command line of protocol 4
deletes a request with one ``Delete``, which a pin makes fail. What is pinned is told by the
node's stat (its children), never assumed: requests written before the fleet was finalized have
no pin.
"""

from __future__ import annotations

from typing import Protocol

from zkstore.zookeeper.ops import Create, Delete, Op

__all__ = ["PIN", "ChildCount", "gone_ops", "is_pinned", "made_ops", "pin_of"]

#: The pin's name under its request (a claim's mark is named so too).
PIN = "="


class ChildCount(Protocol):
    """What :func:`is_pinned` needs of a kazoo ``ZnodeStat``."""

    @property
    def numChildren(self) -> int: ...


def pin_of(path: str) -> str:
    """The pin of the request at ``path``."""
    return f"{path}/{PIN}"


def is_pinned(stat: ChildCount | None) -> bool:
    """The request whose stat this is has its pin (a child; the request's ACL lets nobody but
    the cluster make one)."""
    return stat is not None and stat.numChildren > 0


def made_ops(path: str, data: bytes, *, pinned: bool) -> list[Op]:
    """Create the request at ``path`` (with its pin if ``pinned``)."""
    return [Create(path, data), *([Create(pin_of(path))] if pinned else [])]


def gone_ops(path: str, version: int = -1, *, pinned: bool) -> list[Op]:
    """Delete the request at ``version`` (-1: any), its pin first if it has one."""
    return [*([Delete(pin_of(path))] if pinned else []), Delete(path, version)]
