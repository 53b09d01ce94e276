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

A request a job made itself (it may create any name under its node, before the cluster's lands
there) is never taken for the cluster's: the snapshot treats one it cannot read as asked for
(the job cancelled or stopped itself); a command that finds one replaces it with its own, or
refuses saying why (:func:`found_or_taken`: only a pinned request no identity but the
cluster's may change is the cluster's, :func:`unheld`); a member ends a driver whose ``end``
keeps the cluster out (:func:`shut_out`), and the leader leaves such a node alone; and the
leader dates a request no later than it first saw one for the attempt, so that a job making its
own again and again postpones nothing (:mod:`recovery.leader.requests_seen`). A pin is written
once the fleet is finalized at
protocol 5 (:data:`~zkstore.protocol.PINNED_REQUESTS`): a daemon or command line of protocol 4
deletes a request with one ``Delete``, which a pin makes fail. What is pinned is told by the
node's stat (its children), never assumed: requests written before the fleet was finalized have
no pin.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from kazoo.security import Permissions

from zkstore.errors import AccessDenied, CorruptRecord, HandleNotFound, NotEmpty, WrongState
from zkstore.zookeeper.ops import Create, Delete, Fence, Op
from zkstore.zookeeper.retry import TryAgain

if TYPE_CHECKING:
    from kazoo.protocol.states import ZnodeStat
    from kazoo.security import ACL

    from zkstore.zookeeper.identity import AclPolicy
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "PIN",
    "ChildCount",
    "found_or_taken",
    "gone_ops",
    "is_pinned",
    "made_ops",
    "pin_of",
    "shut_out",
    "take_over",
    "unheld",
]

#: The pin's name under its request (a claim's mark is named so too).
PIN = "="

R = TypeVar("R")


class ChildCount(Protocol):
    """What :func:`is_pinned` needs of a kazoo ``ZnodeStat``."""

    @property
    def numChildren(self) -> int: ...


def pin_of(path: str) -> str:
    """The pin of the request at ``path``."""
    return f"{path}/{PIN}"


def is_pinned(stat: ChildCount | None) -> bool:
    """The request whose stat this is has a child: its pin, if the request is the cluster's
    (whose ACL lets nobody else make one); one a job made may have children of its own
    (:func:`unheld` and :func:`shut_out` tell them apart by the ACL)."""
    return stat is not None and stat.numChildren > 0


def made_ops(path: str, data: bytes, *, pinned: bool) -> list[Op]:
    """Create the request at ``path`` (with its pin if ``pinned``)."""
    return [Create(path, data), *([Create(pin_of(path))] if pinned else [])]


def gone_ops(path: str, version: int = -1, *, pinned: bool) -> list[Op]:
    """Delete the request at ``version`` (-1: any), its pin first if it has one."""
    return [*([Delete(pin_of(path))] if pinned else []), Delete(path, version)]


def unheld(zk: ZooKeeper, path: str) -> str | None:
    """Why the request at ``path`` is not one that only the cluster can remove (None: it is):
    it has no pin, or an identity but the cluster's may change it (a job made it for itself,
    before the cluster's request could land there). With open ACLs (no policy), nobody's
    request is held by anything: None. :class:`~zkstore.errors.HandleNotFound` if it is gone."""
    found = _acl_of(zk, path)
    if found is None or isinstance(found, str):
        return found
    policy, acls, stat = found
    if not is_pinned(stat):
        return "it has no pin: its job may delete it"
    others = policy.changers(acls)
    if others:
        return f"{' and '.join(others)} may change it"
    return None


def _acl_of(zk: ZooKeeper, path: str) -> tuple[AclPolicy, list[ACL], ZnodeStat] | str | None:
    """The cluster's policy and the node's ACL and stat; None with open ACLs (no policy: no
    ACL tells anything), or why it cannot be read."""
    policy = zk.acl_policy
    if policy is None:
        return None
    try:
        acls, stat = zk.get_acls(path)
    except AccessDenied:
        return "the cluster may not read its ACL"
    return policy, acls, stat


def take_over(
    zk: ZooKeeper, path: str, made: Sequence[Op], *, why: str, fence: Fence | None = None
) -> None:
    """Replace the request at ``path`` that the cluster does not hold (``why``, as
    :func:`unheld` says) with ``made`` (:func:`made_ops`), in one transaction: what is under it
    (as far as the cluster may list it), then it, then ours. Deleting it needs only the right
    on the job's node, the cluster's; what is under it needs the right on it, which a job's
    own ACL may keep from the cluster: then ZooKeeper refuses, and so does this, with
    :class:`~zkstore.errors.WrongState` saying why (the request there is the job's, which it
    may delete again). :class:`~zkstore.zookeeper.retry.TryAgain` if it went meanwhile."""
    (under,) = zk.children_many([path], denied=True)
    if under is None:
        raise TryAgain(f"{path} went meanwhile")
    ops = [*(Delete(f"{path}/{child}") for child in under), Delete(path), *made]
    try:
        zk.commit(ops, fence=fence)
    except HandleNotFound as exc:
        if exc.path not in (path, *(f"{path}/{child}" for child in under)):
            raise
        raise TryAgain(f"{path} changed meanwhile") from exc
    except (NotEmpty, AccessDenied) as exc:
        raise WrongState(
            f"{path} was made by its own job ({why}), which keeps the cluster from replacing "
            f"it ({exc}); the leader takes it for a request of the job's own: look at the job "
            "(zkstore jobs show) and ask again once it is gone"
        ) from exc


def found_or_taken(
    zk: ZooKeeper,
    path: str,
    made: Sequence[Op],
    read: Callable[[], R | None],
    *,
    pinned: bool,
    fence: Fence | None = None,
) -> R | None:
    """After a create of ours found a request at ``path``: that request (``read``) if only the
    cluster can remove it (with ``pinned``: :func:`unheld`; without, as protocol 4 took any
    readable one), else None once ``made`` replaced it (:func:`take_over`). A job could
    otherwise make a request that the operator's command takes for its own, and delete it
    after. :class:`~zkstore.zookeeper.retry.TryAgain` if it went meanwhile: never a request
    that was not written."""
    try:
        existing = read()
        why = unheld(zk, path) if pinned else None
    except (AccessDenied, CorruptRecord) as unread:
        existing, why = None, f"the cluster cannot read it: {unread}"
    except HandleNotFound:
        existing, why = None, None
    if why is not None:
        take_over(zk, path, made, why=why, fence=fence)
        return None
    if existing is None:
        raise TryAgain(f"{path} went meanwhile")
    return existing


def shut_out(zk: ZooKeeper, path: str) -> str | None:
    """Why the node at ``path`` cannot be the cluster's (None: it may be): its ACL keeps the
    cluster from changing or deleting what is under it, which no node zkstore makes does (the
    policy gives the cluster ALL on every node), so its job's identity made it. With open
    ACLs (no policy) nothing tells: None. :class:`~zkstore.errors.HandleNotFound` if gone."""
    found = _acl_of(zk, path)
    if found is None or isinstance(found, str):
        return found
    policy, acls, _ = found
    if policy.lets_cluster(acls, Permissions.WRITE | Permissions.DELETE):
        return None
    return "its ACL keeps the cluster from changing it"
