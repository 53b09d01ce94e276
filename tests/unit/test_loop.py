"""The daemon's loop: timers fire in order and never early."""

from __future__ import annotations

import time

from recovery.leader.loop import Event, Loop
from tests.helpers import wait_for


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
