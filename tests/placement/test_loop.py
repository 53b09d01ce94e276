"""The daemon's loop: timers fire in order and never early."""

from __future__ import annotations

import time

import pytest

from recovery.leader.loop import Event, Loop
from tests.helpers import wait_for

pytestmark = pytest.mark.unit


def test_loop_timers_fire_in_order_and_not_early() -> None:
    loop = Loop()
    start = time.monotonic()
    loop.post_at(start + 0.3, Event("b"))
    loop.post_at(start + 0.1, Event("a"))
    seen: list[str] = []
    wait_for(
        lambda: seen.extend(e.kind for e in loop.next_events(0.05)) or len(seen) == 2, timeout=5
    )
    assert seen == ["a", "b"]
    assert time.monotonic() - start >= 0.3


def test_the_loop_says_whether_an_event_waits_timers_not_counted() -> None:
    """The leader's cleanups give way to a waiting event (the member's launches come from
    one); a timer not yet due is no reason to stop, nor one due but not yet taken."""
    loop = Loop()
    assert not loop.has_events()
    loop.post_at(time.monotonic() - 1.0, Event("due"))
    assert not loop.has_events()
    loop.post(Event("assignments"))
    assert loop.has_events()
    assert [e.kind for e in loop.next_events(0.0)] == ["assignments", "due"]
    assert not loop.has_events()
