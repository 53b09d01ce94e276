"""The fleet as anyone reads it: the daemons (members), their labels and their assignments.

Each daemon holds an EPHEMERAL member record ``R/members/<id>`` in its own session (so it is gone
when the daemon is); a drained one is marked ``R/drained/<id>``; the leader's placements are the
assignments ``R/assignments/<member>/<job>``. The leader places attempts on this view
(``recovery.leader.placement``); the daemons command and the page show it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zkstore.errors import ConfigError, CorruptRecord
from zkstore.layout import Layout
from zkstore.records.fleet_records import LABEL, MemberInfo
from zkstore.zookeeper.throttle import Throttle

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["FleetView", "Member", "format_labels", "parse_labels", "read_fleet", "read_members"]

logger = logging.getLogger(__name__)
#: The fleet is read many times a second: a garbled member record is said once a minute.
_unreadable = Throttle(logger)


def parse_labels(pairs: Iterable[str], what: str = "label") -> dict[str, str]:
    """``key=value`` pairs into a label map (keys and values from ``[A-Za-z0-9._/-]``)."""
    labels: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not LABEL.fullmatch(key) or not LABEL.fullmatch(value):
            raise ConfigError(
                f"{what} {pair!r} is not key=value (1-63 characters of [A-Za-z0-9._/-] each)"
            )
        labels[key] = value
    return labels


def format_labels(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


@dataclass(frozen=True)
class Member:
    """One daemon as the leader sees it: its record, whether it is drained, what it runs."""

    info: MemberInfo
    drained: bool = False
    assigned: frozenset[str] = frozenset()

    @property
    def daemon_id(self) -> str:
        return self.info.daemon_id

    @property
    def labels(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.info.labels or {}).items()}

    @property
    def free(self) -> int:
        return self.info.slots - len(self.assigned)

    @property
    def warm_ready(self) -> int:
        """The warm JVMs its record says are ready (0 without warm drivers)."""
        return max(0, self.info.warm_ready or 0)

    def matches(self, required: Mapping[str, str]) -> bool:
        labels = self.labels
        return all(labels.get(key) == value for key, value in required.items())


@dataclass
class FleetView:
    """The members, and the assignments of every member directory (live or gone)."""

    members: dict[str, Member] = field(default_factory=dict)
    assignments: dict[str, set[str]] = field(default_factory=dict)
    #: every drain mark's daemon (up or not)
    drained: set[str] = field(default_factory=set)

    @property
    def free_slots(self) -> int:
        return sum(max(0, m.free) for m in self.members.values() if not m.drained)


def read_fleet(zk: ZooKeeper, layout: Layout) -> FleetView:
    """Members, drain marks and assignments, in three pipelined rounds."""
    names, drained, assigned_to = (
        list(found or ())
        for found in zk.children_many([layout.members, layout.drained, layout.assignments])
    )
    infos = read_members(zk, layout, names)
    dirs = zk.children_many([f"{layout.assignments}/{name}" for name in assigned_to])
    fleet = FleetView(
        assignments={name: set(jobs or ()) for name, jobs in zip(assigned_to, dirs, strict=True)},
        drained=set(drained),
    )
    for name, info in infos.items():
        fleet.members[name] = Member(
            info, name in drained, frozenset(fleet.assignments.get(name, ()))
        )
    return fleet


def read_members(
    zk: ZooKeeper,
    layout: Layout,
    names: Iterable[str],
    *,
    watch: Callable[..., Any] | None = None,
) -> dict[str, MemberInfo]:
    """The member records of ``names`` (one pipelined round): those gone, garbled or not
    matching their name are left out (a garbled one said once a minute). ``watch``: a one-shot
    data watch set on each record read."""
    names = list(names)
    paths = [f"{layout.members}/{name}" for name in names]
    records = zk.get_many(paths, watches=dict.fromkeys(paths, watch) if watch else None)
    infos: dict[str, MemberInfo] = {}
    for name, item in zip(names, records, strict=True):
        if item is None:
            continue
        try:
            info = MemberInfo.from_znode(item[0], item[1], f"{layout.members}/{name}")
        except CorruptRecord as exc:
            _unreadable.warning(name, "ignoring member %s: %s", name, exc)
            continue
        if info.daemon_id != name or info.slots < 1:
            _unreadable.warning(
                name, "ignoring member %s: its record does not match its name", name
            )
            continue
        infos[name] = info
    return infos
