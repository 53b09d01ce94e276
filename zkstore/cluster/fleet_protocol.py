"""The fleet's protocol: what the cluster may write, and the finalization that raises it.

``R/fleet`` holds the protocol the cluster is *finalized* at (:class:`FleetRecord`); a cluster
without it is at protocol 1 (every release before the fleet protocol wrote protocol-1 records).
A feature of protocol N (:data:`zkstore.protocol.FEATURES`) is used only once the fleet is at N
(:func:`require`): until then the newer code runs the old protocol, so that a fleet of mixed
releases never meets a record one of its daemons would misread, and a downgrade stays possible.

Raising it is CockroachDB's cluster-version upgrade: once every live daemon speaks N
(``zkstore fleet status`` says so), an operator runs ``zkstore fleet finalize``
(:func:`finalize`). From then on a daemon that speaks less refuses to start, and the newer
records may be written. A brand-new cluster (its ``currentJobs`` made now) starts at the
protocol of the code that makes it (:func:`new_cluster_ops`).

Finalization is two writes, so that a daemon joining meanwhile cannot slip past it::

    1. R/fleet: {current: c, target: t}   at the version read     (a daemon speaking < t that
                                                                    joins now sees it and leaves)
    2. the members listed again (after a sync): every one speaks >= t, else the target is
       withdrawn and the finalization refused, naming them
    3. R/fleet: {current: t}              at the version of step 1

and a daemon checks ``R/fleet`` after it created its member record (:func:`admit`, after a
sync), so either the finalizer's second listing sees it or the daemon sees the target. A crash
between the writes leaves the target: old daemons keep out, ``fleet finalize`` again finishes it
(or withdraws it if an old daemon is back).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from zkstore import __version__, protocol
from zkstore.errors import (
    CorruptRecord,
    FleetVersionError,
    HandleExists,
    HandleNotFound,
    NewerRecord,
    VersionConflict,
)
from zkstore.layout import Layout
from zkstore.protocol import Feature
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.record import Record
from zkstore.records.strict import utc_now
from zkstore.zookeeper.ops import Create, Op

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "LEGACY",
    "Finalized",
    "FleetReading",
    "FleetRecord",
    "FleetStatus",
    "admit",
    "allows",
    "check_spoken",
    "current",
    "describe_members",
    "finalize",
    "live_members",
    "new_cluster_ops",
    "read",
    "require",
    "status",
]

logger = logging.getLogger(__name__)

#: The protocol of a cluster without ``R/fleet``: one whose records all releases read.
LEGACY = 1


@dataclass(frozen=True)
class FleetRecord(Record):
    """``R/fleet``: the protocol the cluster is finalized at (``current``), and while a
    finalization is under way the one it raises it to (``target``); who did it and when.
    (The protocol is not stored as ``protocol``: that field marks a newer writer's record.)"""

    current: int = LEGACY
    since: str = ""
    by: str | None = None
    target: int | None = None

    optional = frozenset({"by", "target"})
    times = frozenset({"since"})

    def problem(self) -> str | None:
        if self.current < 1 or (self.target is not None and self.target <= self.current):
            return "its protocols are not increasing positive numbers"
        return None

    @property
    def bound(self) -> int:
        """The highest protocol a daemon must speak to join: the target while one is set."""
        return self.target if self.target is not None else self.current


@dataclass(frozen=True)
class FleetStatus:
    """The fleet as ``zkstore fleet status`` shows it."""

    current: int
    target: int | None
    members: tuple[MemberInfo, ...]
    #: member records that could not be read (counted as protocol 1: they block finalizing)
    unreadable: tuple[str, ...] = ()
    record: FleetRecord | None = field(default=None, compare=False)
    #: the digest of the leader's published settings (``R/settings``), None without them
    settings: str | None = None

    @property
    def differing(self) -> list[MemberInfo]:
        """The live daemons whose own settings differ from the leader's published ones (the
        leader's are in force; a daemon older than the digests is not judged)."""
        if self.settings is None:
            return []
        return [m for m in self.members if m.settings is not None and m.settings != self.settings]

    @property
    def common(self) -> int:
        """The newest protocol every live daemon (and this code) speaks."""
        spoken = [m.protocol for m in self.members] + [protocol.PROTOCOL]
        if self.unreadable:
            spoken.append(LEGACY)
        return min(spoken)

    @property
    def behind(self) -> list[MemberInfo]:
        """The live daemons that speak less than this code."""
        return [m for m in self.members if m.protocol < protocol.PROTOCOL]

    def as_dict(self) -> dict[str, Any]:
        return {
            "protocol": self.current,
            "target": self.target,
            "finalizable_to": self.common if self.common > self.current else None,
            "this_release": __version__,
            "this_speaks": protocol.PROTOCOL,
            "daemons": [
                {
                    "daemon_id": m.daemon_id,
                    "host": m.host,
                    "release": m.release,
                    "protocol": m.protocol,
                    "min_protocol": m.min_protocol,
                }
                for m in self.members
            ],
            "unreadable": list(self.unreadable),
            "settings_differ": [m.daemon_id for m in self.differing],
        }


def read(zk: ZooKeeper, layout: Layout) -> FleetRecord | None:
    """``R/fleet``, or None for a cluster that has none (protocol 1). Garbage there is taken
    for protocol 1, the most conservative (said at ERROR; ``fleet finalize`` writes it anew,
    at its version); a record of a newer protocol raises
    :class:`~zkstore.errors.NewerRecord`."""
    found = zk.get_if_exists(layout.fleet)
    if found is None:
        return None
    try:
        return FleetRecord.from_znode(found[0], found[1], layout.fleet)
    except NewerRecord:
        raise
    except CorruptRecord as exc:
        logger.error("%s; taking the fleet for protocol %d", exc, LEGACY)
        return FleetRecord(version=found[1].version, current=LEGACY, since=utc_now())


def current(zk: ZooKeeper, layout: Layout) -> int:
    """The protocol the fleet is finalized at (1 without ``R/fleet``)."""
    record = read(zk, layout)
    return LEGACY if record is None else record.current


def live_members(zk: ZooKeeper, layout: Layout) -> tuple[list[MemberInfo], list[str]]:
    """Every live daemon's member record (two pipelined rounds), and the names of those that
    cannot be read."""
    names = zk.children_many([layout.members])[0] or []
    found = zk.get_many([f"{layout.members}/{name}" for name in names])
    members, unreadable = [], []
    for name, item in zip(names, found, strict=True):
        if item is None:
            continue  # gone meanwhile
        try:
            members.append(MemberInfo.from_znode(item[0], item[1], f"{layout.members}/{name}"))
        except CorruptRecord:
            unreadable.append(name)
    return members, unreadable


def status(zk: ZooKeeper, layout: Layout) -> FleetStatus:
    record = read(zk, layout)
    members, unreadable = live_members(zk, layout)
    return FleetStatus(
        current=LEGACY if record is None else record.current,
        target=None if record is None else record.target,
        members=tuple(sorted(members, key=lambda m: m.daemon_id)),
        unreadable=tuple(sorted(unreadable)),
        record=record,
        settings=_settings_digest(zk, layout),
    )


def _settings_digest(zk: ZooKeeper, layout: Layout) -> str | None:
    """The digest of the leader's published settings, None without them (or unreadable: said
    at WARNING; ``cluster settings`` says why)."""
    from zkstore.cluster.cluster_settings import read_settings

    try:
        found = read_settings(zk, layout)
    except CorruptRecord as exc:
        logger.warning("%s", exc)
        return None
    return None if found is None else found.digest


def new_cluster_ops(layout: Layout) -> list[Op]:
    """The ops that make a brand-new cluster's ``R/fleet`` at this code's protocol, to be
    committed with the creation of its ``currentJobs`` (which an existing cluster has)."""
    record = FleetRecord(version=None, current=protocol.PROTOCOL, since=utc_now(), by=_who())
    return [Create(layout.fleet, record.to_bytes())]


class FleetReading:
    """The fleet's protocol as last read, read again at most every ``every`` seconds: a
    fleet's protocol only grows, so a stale reading only makes its reader use an older
    protocol's way (what a client submits, what identity a member gives a driver)."""

    def __init__(self, zk: ZooKeeper, layout: Layout, *, every: float = 30.0) -> None:
        self.zk = zk
        self.layout = layout
        self.every = every
        self._read: tuple[float, int] | None = None

    def allows(self, feature: str) -> bool:
        """True if the fleet is finalized at the protocol of ``feature`` (a name of
        :data:`zkstore.protocol.FEATURES`)."""
        now = time.monotonic()
        if self._read is None or now - self._read[0] > self.every:
            self._read = (now, current(self.zk, self.layout))
        return allows(self._read[1], protocol.FEATURES[feature])


def allows(protocol_now: int, feature: Feature) -> bool:
    """True if a fleet at ``protocol_now`` may use ``feature`` (and this code knows it)."""
    return feature.protocol <= min(protocol_now, protocol.PROTOCOL)


def require(zk: ZooKeeper, layout: Layout, feature: Feature) -> None:
    """Return if the fleet is finalized at ``feature``'s protocol or above; else raise
    :class:`FleetVersionError` saying what to do (which daemons to upgrade, or to finalize)."""
    if feature.protocol > protocol.PROTOCOL:
        raise FleetVersionError(f"{feature.what} is not known to this release ({__version__})")
    fleet = status(zk, layout)
    if fleet.current >= feature.protocol:
        return
    raise FleetVersionError(_refusal(feature, fleet))


def _refusal(feature: Feature, fleet: FleetStatus) -> str:
    needs = (
        f"{feature.what} needs the fleet at protocol {feature.protocol}; it is at {fleet.current}"
    )
    old = [m for m in fleet.members if m.protocol < feature.protocol]
    if old or fleet.unreadable:
        named = ", ".join(
            [f"{m.daemon_id} on {m.host} runs protocol {m.protocol}" for m in old[:5]]
            + [f"{name}'s member record is unreadable" for name in fleet.unreadable[:2]]
        )
        return f"{needs} ({named}): upgrade every daemon, then run zkstore fleet finalize"
    return f"{needs}: every live daemon speaks it; run zkstore fleet finalize"


def admit(zk: ZooKeeper, layout: Layout, daemon_id: str) -> int:
    """Check that this code may serve the fleet (called by a daemon right after it created its
    member record, and again before it leads): returns the fleet's protocol, or raises
    :class:`FleetVersionError` naming the release to run. Reads after a sync, so that a
    finalization that listed the members before this daemon joined is seen (see the module)."""
    zk.sync(layout.fleet)
    record = read(zk, layout)
    fleet, bound = (LEGACY, LEGACY) if record is None else (record.current, record.bound)
    if bound > protocol.PROTOCOL:
        being = "is being finalized" if record is not None and record.target else "is finalized"
        raise FleetVersionError(
            f"daemon {daemon_id} (zkstore {__version__}) speaks fleet protocol "
            f"{protocol.PROTOCOL}; the fleet {being} at protocol {bound}: run a release that "
            "speaks it"
        )
    if fleet < protocol.MIN_PROTOCOL:
        raise FleetVersionError(
            f"daemon {daemon_id} (zkstore {__version__}) serves fleet protocols "
            f"{protocol.MIN_PROTOCOL}-{protocol.PROTOCOL}; the fleet is at {fleet}: upgrade "
            "the fleet through an earlier release first (its release notes say which)"
        )
    return fleet


@dataclass(frozen=True)
class Finalized:
    """What :func:`finalize` did: the protocol before and after (equal: nothing to do)."""

    before: int
    after: int


def finalize(zk: ZooKeeper, layout: Layout, *, to: int | None = None) -> Finalized:
    """Raise the fleet's protocol to ``to`` (default: the one this code speaks). Raises
    :class:`FleetVersionError` if a live daemon does not speak it (naming it),
    :class:`VersionConflict` if another finalization raced this one. A crash between the two
    writes leaves a target that the next call finishes or withdraws."""
    fleet = status(zk, layout)
    target = protocol.PROTOCOL if to is None else to
    if to is not None and to > protocol.PROTOCOL:
        raise FleetVersionError(
            f"this release ({__version__}) speaks protocol {protocol.PROTOCOL}, not {to}"
        )
    if target <= fleet.current:
        if fleet.target is not None:  # a finalization cut short, to a protocol not spoken now
            _withdraw(zk, layout, fleet)
        return Finalized(fleet.current, fleet.current)
    try:
        check_spoken(fleet, target)
    except FleetVersionError:
        if fleet.target is not None:  # cut short earlier: an old daemon may join again
            _withdraw(zk, layout, fleet)
        raise
    marked = _write(zk, layout, fleet.record, fleet.current, target)
    zk.sync(layout.members)
    again = status(zk, layout)
    try:
        check_spoken(again, target)
    except FleetVersionError:
        _withdraw(zk, layout, replace(again, record=marked))
        raise
    _write(zk, layout, marked, target, None)
    logger.info("fleet finalized at protocol %d (was %d)", target, fleet.current)
    return Finalized(fleet.current, target)


def check_spoken(fleet: FleetStatus, target: int) -> None:
    old = [m for m in fleet.members if m.protocol < target]
    if old or fleet.unreadable:
        named = ", ".join(
            [
                f"{m.daemon_id} on {m.host} ({m.release or 'before 0.2.0'}) speaks {m.protocol}"
                for m in old[:5]
            ]
            + [f"{name}'s member record is unreadable" for name in fleet.unreadable[:2]]
        )
        raise FleetVersionError(
            f"cannot finalize the fleet at protocol {target}: {named}; upgrade it first"
        )


def _withdraw(zk: ZooKeeper, layout: Layout, fleet: FleetStatus) -> None:
    _write(zk, layout, fleet.record, fleet.current, None)


def _write(
    zk: ZooKeeper,
    layout: Layout,
    known: FleetRecord | None,
    current_: int,
    target: int | None,
) -> FleetRecord:
    """Write ``R/fleet`` over ``known`` (at its version; created if there was none); returns
    what was written, with its new version."""
    record = FleetRecord(version=None, current=current_, since=utc_now(), by=_who(), target=target)
    if known is None:
        try:
            zk.create(layout.fleet, record.to_bytes())
        except HandleExists as exc:
            raise VersionConflict(
                "another finalization made the fleet record meanwhile: run it again",
                path=layout.fleet,
            ) from exc
        return record.with_version(0)
    assert known.version is not None
    try:
        stat = zk.set(layout.fleet, record.to_bytes(), version=known.version)
    except HandleNotFound as exc:
        raise VersionConflict("the fleet record was deleted meanwhile", path=layout.fleet) from exc
    return record.with_version(stat.version)


def _who() -> str:
    return f"zkstore {__version__} on {socket.gethostname()}"


def describe_members(members: Sequence[MemberInfo]) -> str:
    """``d1 (0.2.0, protocol 1), d2 (0.3.0, protocol 2)`` for a log line."""
    return ", ".join(
        f"{m.daemon_id} ({m.release or 'before 0.2.0'}, protocol {m.protocol})" for m in members
    )
