"""``without_existing``: a transaction that failed only on a node it creates being there already,
and that can do without creating it, is committed again without that op (the leader's placements
and new jobs' statuses: a job's node made meanwhile by a control change, a planted history)."""

from __future__ import annotations

import pytest

from zkstore.errors import HandleExists, HandleNotFound
from zkstore.zookeeper.ops import Create, Delete, Op, SetData, without_existing

pytestmark = pytest.mark.unit

OPS: list[Op] = [Create("/j"), Create("/j/status", b"s"), SetData("/a", b"x", 3), Delete("/b")]


def test_only_the_create_of_an_optional_node_found_there_is_dropped() -> None:
    again = without_existing(OPS, HandleExists("there", path="/j"), {"/j", "/j/history"})
    assert again == ([Create("/j/status", b"s"), SetData("/a", b"x", 3), Delete("/b")], "/j")


def test_anything_else_is_not_committed_again() -> None:
    assert without_existing(OPS, None, {"/j"}) is None
    assert without_existing(OPS, HandleExists("there", path="/j/status"), {"/j"}) is None
    assert without_existing(OPS, HandleNotFound("gone", path="/j"), {"/j"}) is None
