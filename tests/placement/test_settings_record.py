"""The cluster's settings record (``R/settings``): what the leader writes parses back, its digest
says its values, its signature says who wrote it (zkstore/cluster/cluster_settings.py); and the
conditions record keeps a condition's ``since`` while it holds for the same reason."""

from __future__ import annotations

import json

import pytest

from zkstore.cluster.cluster_settings import ClusterSettings, settings_digest, settings_key
from zkstore.conditions import Condition, Conditions
from zkstore.errors import CorruptRecord, UntrustedPayload
from zkstore.records.strict import parse_time

pytestmark = pytest.mark.unit

KEY = settings_key(b"k" * 32, "default")


def written() -> ClusterSettings:
    return ClusterSettings(
        version=None, schedule_min_interval=1, notify_allowed_hosts=("127.0.0.1", "10.0.0.0/8")
    ).sealed("d1", KEY)


def test_what_the_leader_writes_parses_back_and_verifies() -> None:
    record = written()
    back = ClusterSettings.from_znode(record.to_bytes(), None, "/r/settings")
    back.verify(KEY, "/r/settings")
    assert back == record
    assert back.digest == settings_digest(back.policy())
    assert json.loads(record.to_bytes())["notify_allowed_hosts"] == ["127.0.0.1", "10.0.0.0/8"]


def test_a_value_changed_by_hand_is_garbage_and_a_record_signed_otherwise_untrusted() -> None:
    raw = json.loads(written().to_bytes())
    raw["schedule_min_interval"] = 10
    with pytest.raises(CorruptRecord, match="digest"):
        ClusterSettings.from_znode(json.dumps(raw).encode(), None, "/r/settings")
    other = written().sealed("d1", settings_key(b"x" * 32, "default"))
    with pytest.raises(UntrustedPayload, match="not signed with the cluster's key"):
        other.verify(KEY, "/r/settings")
    unsigned = written().sealed("d1", None)
    with pytest.raises(UntrustedPayload):
        unsigned.verify(KEY, "/r/settings")
    unsigned.verify(None, "/r/settings")  # a client without the key cannot tell


def test_the_key_of_the_settings_is_the_clusters_own() -> None:
    assert settings_key(b"k" * 32, "a") != settings_key(b"k" * 32, "b")


def test_a_condition_keeps_its_since_while_it_holds_for_the_same_reason() -> None:
    first = Condition(
        "CannotFire", "UnderMinimumInterval", "cannot fire", parse_time("2026-11-28T00:00:00Z")
    )
    again = Condition(
        "CannotFire", "UnderMinimumInterval", "cannot fire", parse_time("2026-11-28T01:00:00Z")
    )
    other = Condition(
        "CannotFire", "UnreadableRecord", "garbage", parse_time("2026-11-28T02:00:00Z")
    )
    held = Conditions(version=None).holding(first).holding(again)
    assert held.conditions() == [first]
    assert held.holding(other).conditions() == [other]
    assert held.without("CannotFire").conditions() == []
    back = Conditions.from_znode(held.to_bytes(), None, "/r/c")
    assert back.conditions() == [first]
