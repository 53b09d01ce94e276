"""A long-lived client checks against the leader's published settings as they are now: one made
before the leader published them (as a new cluster's first leader takes office) checked against
its own environment for its whole life, and refused what the leader allowed."""

from __future__ import annotations

import pytest

from recovery.client import api
from recovery.client.api import Client
from tests import jobs
from zkstore.cluster import Cluster
from zkstore.cluster.cluster_settings import ClusterSettings, key_for, publish
from zkstore.errors import RefusedDestination
from zkstore.jobs.definition import JobDefinition
from zkstore.lifecycle.destinations import ALLOWED_ENV
from zkstore.zookeeper.ops import Fence

pytestmark = pytest.mark.integration

HOOK = "http://127.0.0.1:9/hook"


def leader_publishes(cluster: Cluster, *allowed: str) -> None:
    """``R/settings`` as a leader with ``--notify-allowed-hosts`` ``allowed`` writes it."""
    settings = ClusterSettings(version=None, notify_allowed_hosts=allowed)
    key = key_for(cluster.config)
    publish(cluster.zk, cluster.layout, settings, leader_id="d1", fence=Fence(), key=key)


def test_a_client_made_before_the_leader_published_takes_its_settings_once_there(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOWED_ENV)  # this process allows nothing of its own
    definition = JobDefinition.for_function("hooked", jobs.noop, lifecycle={"notify": HOOK})
    with Client(cluster=cluster) as client:
        with pytest.raises(RefusedDestination, match=r"127\.0\.0\.1 is a loopback address"):
            client.check_definition(definition)  # no record yet: this environment's
        leader_publishes(cluster, "127.0.0.1")
        client.check_definition(definition)  # the leader's, which allows it
        # the leader's flags change (a new leader): read again after POLICY_EVERY
        leader_publishes(cluster)
        client.check_definition(definition)  # still the one read
        monkeypatch.setattr(api, "POLICY_EVERY", 0.0)
        with pytest.raises(RefusedDestination, match="--notify-allowed-hosts"):
            client.check_definition(definition)
