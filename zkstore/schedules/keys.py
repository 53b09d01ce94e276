"""A schedule's signing key, derived from the cluster's as each job's is.

::

    schedule key = HMAC-SHA256(cluster key, "zkstore-schedule-key" 0x00 cluster id 0x00 name)

A schedule's definition payload (``<cluster>/schedules/<name>/definition/...``) is signed with
its schedule's key; nothing else is. Only holders of the cluster key (the daemons, the command
line) read or write a schedule's definition: each fire copies it into the run's own payload,
signed with the *run's* job key (:mod:`zkstore.signing`), so a driver never holds more than its
own run's key, and a run stays readable after its schedule is deleted or changed.

(Phase B may fold :func:`derive_schedule_key` and :func:`schedule_of` into
:mod:`zkstore.signing`; they live here so that phase A changed no existing module.)
"""

from __future__ import annotations

import hashlib
import hmac

from zkstore.config import validate_id
from zkstore.errors import ConfigError, UntrustedPayload
from zkstore.signing import Signer

__all__ = ["SCHEDULE_KEY_LABEL", "ScheduleSigner", "derive_schedule_key", "schedule_of"]

SCHEDULE_KEY_LABEL = b"zkstore-schedule-key\0"


def derive_schedule_key(cluster_key: bytes, cluster_id: str, name: str) -> bytes:
    """The signing key of one schedule of one cluster (32 bytes). The label differs from the
    jobs' one, so a schedule and a job of the same name never share a key."""
    for value in (cluster_id, name):
        validate_id(value, "id")
    message = SCHEDULE_KEY_LABEL + cluster_id.encode() + b"\0" + name.encode()
    return hmac.new(cluster_key, message, hashlib.sha256).digest()


def schedule_of(key: str) -> tuple[str, str] | None:
    """``(cluster id, schedule name)`` of a storage key ``<cluster>/schedules/<name>/...``."""
    parts = key.split("/")
    if len(parts) >= 4 and parts[1] == "schedules" and parts[0] and parts[2]:
        return parts[0], parts[2]
    return None


class ScheduleSigner(Signer):
    """Signs and checks schedules' payloads, each with its schedule's key derived from the
    cluster key (without a key: nothing signed or checked). Refuses every other payload."""

    def __init__(self, cluster_key: bytes | None) -> None:
        super().__init__(cluster_key)
        self._schedule_cluster_key = cluster_key

    def __repr__(self) -> str:
        return f"ScheduleSigner({'cluster' if self.enabled else 'none'})"

    def _key_for(self, storage_key: str) -> bytes:
        owner = schedule_of(storage_key)
        if owner is None:
            raise UntrustedPayload("not a schedule's payload")
        assert self._schedule_cluster_key is not None
        try:
            return derive_schedule_key(self._schedule_cluster_key, *owner)
        except ConfigError:
            raise UntrustedPayload("not under a valid cluster and schedule name") from None
