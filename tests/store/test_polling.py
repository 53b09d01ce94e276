"""The handler's one-call ``select`` (:mod:`zkstore.zookeeper.polling`) answers as kazoo's own
does."""

from __future__ import annotations

import os
import select
import socket
import time

import pytest
from kazoo.handlers.utils import selector_select

from zkstore.zookeeper.polling import poll_select

pytestmark = pytest.mark.unit


def both(*args: object) -> tuple[object, object]:
    return poll_select(*args), selector_select(*args)  # type: ignore[arg-type]


def test_ready_sockets_are_listed_as_kazoos_select_lists_them() -> None:
    a, b = socket.socketpair()
    r, w = os.pipe()
    try:
        ours, theirs = both([a, r], [], [], 0)
        assert ours == theirs == ([], [], [])
        b.send(b"x")
        os.write(w, b"x")
        ours, theirs = both([a, r], [], [], 0)
        assert sorted(map(id, ours[0])) == sorted(map(id, theirs[0])) == sorted(map(id, [a, r]))
        ours, theirs = both([], [b], [], 0)
        assert ours == theirs == ([], [b], [])
        ours, theirs = both([b], [b], [], 0)  # writable only: in the writable list
        assert ours == theirs and ours[0] == [] and set(map(id, ours[1])) == {id(b)}
        b.close()
        ours, theirs = both([a], [], [], 0)  # the peer hung up: readable (a read says so)
        assert ours == theirs == ([a], [], [])
    finally:
        a.close()
        os.close(r)
        os.close(w)


def test_a_timeout_waits_and_bad_input_raises_as_kazoo_does() -> None:
    a, b = socket.socketpair()
    try:
        started = time.monotonic()
        assert poll_select([a], [], [], 0.05) == ([], [], [])
        assert time.monotonic() - started >= 0.04
        with pytest.raises(ValueError):
            poll_select([a], [], [], -1)
        with pytest.raises(TypeError):
            poll_select([a], [], [], "1")  # type: ignore[arg-type]
        r, w = os.pipe()
        os.close(r)
        os.close(w)
        with pytest.raises(ValueError):
            poll_select([r], [], [], 0)
    finally:
        a.close()
        b.close()


def test_descriptors_past_select_limit_are_fine() -> None:
    a, b = socket.socketpair()
    high = os.dup2(a.fileno(), 1500) if os.sysconf("SC_OPEN_MAX") > 1500 else None
    if high is None:
        pytest.skip("this process may not open descriptor 1500")
    try:
        b.send(b"x")
        assert poll_select([high], [], [], 0)[0] == [high]
        with pytest.raises(ValueError):
            select.select([high], [], [], 0)  # what kazoo stopped using, for this reason
    finally:
        os.close(high)
        a.close()
        b.close()
