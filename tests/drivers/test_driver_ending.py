"""The member's two-step ending of a driver (recovery.member.ending): SIGTERM, the grace,
SIGKILL of the process group, "known dead" only once nothing of it lives."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recovery.member.ending import (
    KILL_REPEAT,
    MIN_GRACE,
    UNKILLABLE_AFTER,
    Ending,
    KillGroup,
    KnownDead,
    SendTerm,
    Unkillable,
    WaitUntil,
    kill_due,
    start,
    step,
)

pytestmark = pytest.mark.unit


def test_term_first_then_kill_the_group_after_the_grace() -> None:
    ending = start(attempt=2, requested=100.0, grace=30.0, now=100.0)
    ending, actions = step(ending, 100.0, driver_alive=True, group_alive=True)
    assert actions == [SendTerm(), WaitUntil(130.0)]
    ending, actions = step(ending, 110.0, driver_alive=True, group_alive=True)
    assert actions == [WaitUntil(130.0)]  # no second SIGTERM
    ending, actions = step(ending, 130.0, driver_alive=True, group_alive=True)
    assert actions == [KillGroup(), WaitUntil(130.0 + KILL_REPEAT)]
    ending, actions = step(ending, 130.2, driver_alive=False, group_alive=False)
    assert actions == [KnownDead()]


def test_a_driver_that_obeys_sigterm_is_known_dead_without_sigkill() -> None:
    ending = start(1, 0.0, 30.0, 0.0)
    ending, _ = step(ending, 0.0, driver_alive=True, group_alive=True)
    _, actions = step(ending, 2.0, driver_alive=False, group_alive=False)
    assert actions == [KnownDead()]


def test_an_orphaned_group_is_killed_at_once_when_the_driver_is_gone() -> None:
    ending = start(1, 0.0, 30.0, 0.0)
    ending, _ = step(ending, 0.0, driver_alive=True, group_alive=True)
    ending, actions = step(ending, 2.0, driver_alive=False, group_alive=True)  # the JVM lingers
    assert KillGroup() in actions and KnownDead() not in actions
    _, actions = step(ending, 2.5, driver_alive=False, group_alive=False)
    assert actions == [KnownDead()]


def test_sigkill_is_repeated_while_anything_lives_and_never_reported_dead() -> None:
    ending = start(1, 0.0, 5.0, 0.0)
    ending, _ = step(ending, 0.0, driver_alive=True, group_alive=True)
    kills, reported = 0, 0
    now = 5.0
    while now < 5.0 + UNKILLABLE_AFTER + 10:
        ending, actions = step(ending, now, driver_alive=True, group_alive=True)
        assert KnownDead() not in actions
        kills += actions.count(KillGroup())
        reported += sum(isinstance(a, Unkillable) for a in actions)
        now += 0.25
    assert kills >= (UNKILLABLE_AFTER + 10) / KILL_REPEAT - 1
    assert reported == 1  # said once, at ERROR; the job still does not move on


def test_a_member_restarted_after_the_grace_kills_soon_after_its_own_sigterm() -> None:
    # The leader asked at 0 with 30 s of grace; a restarted member first looks at 100.
    ending = start(1, 0.0, 30.0, now=100.0)
    ending, actions = step(ending, 100.0, driver_alive=True, group_alive=True)
    assert actions == [SendTerm(), WaitUntil(100.0 + MIN_GRACE)]
    _, actions = step(ending, 100.0 + MIN_GRACE, driver_alive=True, group_alive=True)
    assert actions[0] == KillGroup()


def test_a_request_from_a_clock_ahead_counts_as_now() -> None:
    ending = start(1, requested=500.0, grace=10.0, now=100.0)
    assert ending.requested == 100.0
    _, actions = step(ending, 100.0, driver_alive=True, group_alive=True)
    assert actions == [SendTerm(), WaitUntil(110.0)]


@given(
    grace=st.floats(0, 120),
    looks=st.lists(
        st.tuples(st.floats(0, 5), st.booleans(), st.booleans()), min_size=1, max_size=60
    ),
)
def test_known_dead_only_when_nothing_lives_and_kill_never_before_the_grace(
    grace: float, looks: list[tuple[float, bool, bool]]
) -> None:
    ending: Ending = start(1, 0.0, grace, 0.0)
    now = 0.0
    for pause, driver, others in looks:
        now += pause
        group = others or driver  # the driver is in its own group
        ending, actions = step(ending, now, driver_alive=driver, group_alive=group)
        if KnownDead() in actions:
            assert not driver and not group
        if KillGroup() in actions and driver:
            due = kill_due(ending)
            assert due is not None and now >= due >= grace
        assert actions, "every look says something to do or to wait for"
