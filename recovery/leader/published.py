"""The leader's settings, published in ``R/settings`` for every client to check against
(invariant 17; :mod:`zkstore.cluster.cluster_settings`).

Written when a leadership is granted and looked at again at each periodic pass (a fleet
finalized at protocol 4 meanwhile, a record changed by hand), fenced like every leader write; a
leader whose record is there already (the same values, its own) writes nothing.
"""

from __future__ import annotations

import logging

from recovery.leader.role import LeaderRole
from zkstore.cluster.cluster_settings import ClusterSettings, publish, settings_key
from zkstore.errors import ConflictError, CorruptRecord, NotLeader
from zkstore.protocol import CLUSTER_SETTINGS

__all__ = ["SettingsPublisher"]

logger = logging.getLogger(__name__)


class SettingsPublisher:
    """Publishes one leadership's settings (loop thread)."""

    def __init__(self, leader: LeaderRole, daemon_id: str) -> None:
        self.leader = leader
        self.daemon_id = daemon_id
        #: what this leadership wrote (or found), None until then
        self.published: ClusterSettings | None = None

    def ensure(self) -> None:
        """Publish the settings if the fleet allows it and the record does not say them (one
        read when it does: a record planted or changed meanwhile is written over); raises
        :class:`~zkstore.errors.NotLeader` and outages, logs a conflict (tried again at the
        next pass)."""
        if not self.leader.protocol.allows(CLUSTER_SETTINGS):
            return
        cluster = self.leader.cluster
        config = cluster.config
        key = (
            settings_key(config.signing_key, config.cluster_id)
            if config.signing_key is not None
            else None
        )
        try:
            self.published = publish(
                cluster.zk,
                cluster.layout,
                self.leader.settings.published(),
                leader_id=self.daemon_id,
                fence=self.leader.fence,
                key=key,
            )
        except NotLeader:
            raise
        except (ConflictError, CorruptRecord) as exc:
            logger.warning("the cluster's settings are not published yet: %s", exc)
