"""The cluster's settings: the bounds and policies its leader enforces, published where clients
read them (invariant 17).

``R/settings`` (:class:`ClusterSettings`) holds what the leader refuses or drops: the shortest
interval between two windows of a schedule it fires, the windows one pass fires, the most late
windows a catch-up may fire, where notifications may go and how many of a job's wait at most,
the least ``--progress-timeout``. The leader writes it from its own configuration when it takes
leadership (fenced, at the version it read, only once the fleet speaks
:data:`~zkstore.protocol.CLUSTER_SETTINGS`), with a digest of the values and, when the cluster
has a signing key, an HMAC of the whole record made with a key derived from it
(:func:`settings_key`): a client that holds the key refuses a record the cluster did not write.

Every command that makes or changes a job or a schedule checks against it
(:class:`zkstore.policy.ClusterPolicy`), so that what the leader would not do is refused at
once, in the leader's words, naming the record's value and the daemons' flag that sets it. A
cluster without the record (a fleet below the protocol) is checked as clients always did:
against their own environment (:meth:`zkstore.policy.ClusterPolicy.from_env`).

Each daemon's member record carries the digest of its own settings (:func:`settings_digest`), so
that ``zkstore fleet status`` names the daemons whose settings differ from the leader's (the
leader's are the ones in force).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from zkstore.config import StoreConfig
from zkstore.errors import (
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    NotLeader,
    UntrustedPayload,
    VersionConflict,
)
from zkstore.layout import Layout
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.record import Record
from zkstore.records.strict import utc_now
from zkstore.zookeeper.ops import Create, Fence, SetData
from zkstore.zookeeper.retry import RACES, TryAgain

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "POLICY_FIELDS",
    "SHOWN_BY",
    "ClusterSettings",
    "differing",
    "key_for",
    "publish",
    "read_settings",
    "settings_digest",
    "settings_key",
    "view",
]

logger = logging.getLogger(__name__)

#: The label of the key that signs the settings record (derived from the cluster's key).
SETTINGS_KEY_LABEL = b"zkstore-cluster-settings\0"
#: Each policy field with the daemon flag that sets it (what a refusal tells to change).
POLICY_FIELDS: Mapping[str, str] = {
    "schedule_min_interval": "--schedule-min-interval",
    "schedule_fire_budget": "--schedule-fire-budget",
    "schedule_catchup_max": "(the product's bound on --catchup-max)",
    "notify_allowed_hosts": "--notify-allowed-hosts",
    "notify_max_per_job": "--notify-max-per-job",
    "notify_per_host": "--notify-per-host",
    "progress_timeout_min_ms": "(the product's least --progress-timeout)",
}
#: A name, an address or a CIDR block of ``--notify-allowed-hosts`` (checked again by
#: :meth:`zkstore.lifecycle.destinations.Destinations.parse` where it is used).
_HOST = re.compile(r"[A-Za-z0-9_.:\[\]/%-]{1,255}")
#: Where a refusal sends whoever wants another value.
SHOWN_BY = "zkstore cluster settings"


def settings_key(cluster_key: bytes, cluster_id: str) -> bytes:
    """The key that signs a cluster's settings record: one-way from the cluster's key, so it
    is never the key of a job or a schedule."""
    return hmac.new(cluster_key, SETTINGS_KEY_LABEL + cluster_id.encode(), hashlib.sha256).digest()


def key_for(config: StoreConfig) -> bytes | None:
    """The key of ``config``'s cluster's settings record, None without a signing key."""
    if config.signing_key is None:
        return None
    return settings_key(config.signing_key, config.cluster_id)


def settings_digest(values: Mapping[str, Any]) -> str:
    """The sha256 of the policy values (:data:`POLICY_FIELDS`), in a canonical form: equal iff
    the values are (what a member record publishes of its daemon)."""
    canonical = {name: _json_value(values[name]) for name in sorted(POLICY_FIELDS)}
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple | list) else value


@dataclass(frozen=True)
class ClusterSettings(Record):
    """``R/settings``: the leader's bounds and policies (see the module), who wrote them and
    when, their digest and, with a signing key, the record's signature."""

    # (the defaults are the product's; a leader always writes every value)
    schedule_min_interval: int = 10
    schedule_fire_budget: int = 20
    schedule_catchup_max: int = 10_000
    notify_allowed_hosts: tuple[str, ...] = ()
    notify_max_per_job: int = 100
    notify_per_host: int = 2
    progress_timeout_min_ms: int = 30_000
    leader_id: str = ""
    written: str = ""
    digest: str = ""
    signature: str | None = None

    #: (``notify_allowed_hosts`` is a list, parsed by :meth:`_values` itself)
    optional = frozenset({"signature", "notify_allowed_hosts"})
    times = frozenset({"written"})

    def policy(self) -> dict[str, Any]:
        """The policy values alone (:data:`POLICY_FIELDS`)."""
        return {name: getattr(self, name) for name in POLICY_FIELDS}

    def sealed(self, leader_id: str, key: bytes | None) -> ClusterSettings:
        """This record as ``leader_id`` writes it now: its digest, and its signature with
        ``key`` (:func:`settings_key`) if there is one."""
        record = replace(
            self,
            leader_id=leader_id,
            written=utc_now(),
            digest=settings_digest(self.policy()),
            signature=None,
        )
        if key is None:
            return record
        return replace(record, signature=record._mac(key))

    def _mac(self, key: bytes) -> str:
        unsigned = replace(self, signature=None).to_bytes()
        return hmac.new(key, b"zkstore-settings-v1\n" + unsigned, hashlib.sha256).hexdigest()

    def same_as(self, other: ClusterSettings) -> bool:
        """True if ``other`` says the same, from the same leader (no write needed)."""
        return (
            self.digest == other.digest
            and self.leader_id == other.leader_id
            and (self.signature is None) == (other.signature is None)
        )

    def verify(self, key: bytes | None, path: str) -> None:
        """Raise :class:`UntrustedPayload` if a client holding the cluster's key (``key``
        derived from it) finds the record unsigned or signed otherwise."""
        if key is None:
            return
        if self.signature is None or not hmac.compare_digest(self._mac(key), self.signature):
            raise UntrustedPayload(
                f"{path}: the cluster's settings are not signed with the cluster's key (written "
                "by something else than a leader of this cluster); a leader rewrites them when "
                "it takes leadership"
            )

    def problem(self) -> str | None:
        if settings_digest(self.policy()) != self.digest:
            return "its digest does not match its values"
        if any(not _HOST.fullmatch(host) for host in self.notify_allowed_hosts):
            return "a notify_allowed_hosts entry is not a name, an address or a CIDR block"
        if min(self.schedule_min_interval, self.schedule_fire_budget, self.notify_per_host) < 1:
            return "a bound is not positive"
        return None

    def to_bytes(self) -> bytes:
        data = {k: _json_value(v) for k, v in asdict(self).items() if k != "version"}
        return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def _values(cls, raw: dict[str, Any]) -> dict[str, Any]:
        hosts = raw.pop("notify_allowed_hosts", [])
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise ValueError("'notify_allowed_hosts' is not a list of names")
        if len(hosts) > 256:
            raise ValueError("'notify_allowed_hosts' has too many entries")
        values = super()._values(raw)
        values["notify_allowed_hosts"] = tuple(hosts)
        return values


def read_settings(
    zk: ZooKeeper, layout: Layout, *, key: bytes | None = None
) -> ClusterSettings | None:
    """``R/settings``, or None for a cluster whose leader has not written it (a fleet below
    protocol 4). Garbage raises :class:`CorruptRecord`; with ``key``, a record not signed by the
    cluster raises :class:`UntrustedPayload`."""
    found = zk.get_if_exists(layout.settings)
    if found is None:
        return None
    record = ClusterSettings.from_znode(found[0], found[1], layout.settings)
    record.verify(key, layout.settings)
    return record


def publish(
    zk: ZooKeeper,
    layout: Layout,
    settings: ClusterSettings,
    *,
    leader_id: str,
    fence: Fence,
    key: bytes | None,
) -> ClusterSettings:
    """Write ``settings`` as ``leader_id``'s (fenced: a deposed leader's write fails with
    :class:`NotLeader`) unless the record says the same already; returns what is there now.
    A record that cannot be read is written over (at its version)."""

    def attempt() -> ClusterSettings:
        found = zk.get_if_exists(layout.settings)
        sealed = settings.sealed(leader_id, key)
        if found is None:
            op: Create | SetData = Create(layout.settings, sealed.to_bytes())
        else:
            try:
                known = ClusterSettings.from_znode(found[0], found[1], layout.settings)
                known.verify(key, layout.settings)
                if known.same_as(sealed):
                    return known
            except (CorruptRecord, UntrustedPayload) as exc:
                logger.warning("%s; writing the leader's settings over it", exc)
            op = SetData(layout.settings, sealed.to_bytes(), version=found[1].version)
        try:
            results = zk.commit([op], fence=fence)
        except NotLeader:
            raise
        except (HandleExists, VersionConflict, HandleNotFound) as exc:
            raise TryAgain(str(exc)) from exc  # written meanwhile: read again
        version = 0 if isinstance(op, Create) else getattr(results[-1], "version", None)
        logger.info(
            "cluster settings published: schedule minimum %d s, notifications allowed to %s",
            sealed.schedule_min_interval,
            ", ".join(sealed.notify_allowed_hosts) or "global addresses only",
        )
        return sealed.with_version(version)

    return RACES.call(attempt, what="publishing the cluster's settings", path=layout.settings)


def differing(record: ClusterSettings, members: Sequence[MemberInfo]) -> list[str]:
    """The daemons whose own settings differ from ``record`` (a daemon older than the digests
    is not judged), sorted."""
    return sorted(
        m.daemon_id for m in members if m.settings is not None and m.settings != record.digest
    )


def view(record: ClusterSettings, differ: Sequence[str]) -> dict[str, Any]:
    """The JSON of ``zkstore cluster settings`` and of ``GET /api/v1/cluster/settings``."""
    return {
        "settings": {k: _json_value(v) for k, v in record.policy().items()},
        "set_by": dict(POLICY_FIELDS),
        "leader_id": record.leader_id,
        "written": record.written,
        "digest": record.digest,
        "signed": record.signature is not None,
        "version": record.version,
        "daemons_differing": list(differ),
    }
