"""The one retry policy (:mod:`zkstore.zookeeper.retry`): tries, backoff, deadline; never silent.

The pure policy in milliseconds; then the loops that use it, where their giving up matters:
the leader's record (it used to give up without a word) and a compare-and-set that keeps losing.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.helpers import REPO
from zkstore.errors import HandleExists, OutcomeUnknown, StoreUnavailable, VersionConflict
from zkstore.zookeeper.retry import RACE_TRIES, RACES, WHILE_STANDING, Retry, TryAgain

pytestmark = pytest.mark.unit


def test_the_value_of_the_first_try_that_returns() -> None:
    tries: list[int] = []

    def attempt() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise TryAgain("lost a race")
        return "done"

    assert RACES.call(attempt, what="x") == "done"
    assert len(tries) == 3


def test_a_spent_policy_raises_saying_what_how_often_and_why() -> None:
    tries: list[int] = []

    def attempt() -> None:
        tries.append(1)
        raise TryAgain(f"lost race {len(tries)}")

    with pytest.raises(VersionConflict) as raised:
        RACES.call(attempt, what="the result of job j", path="/r/j")
    assert len(tries) == RACE_TRIES
    message = str(raised.value)
    assert message.startswith(f"the result of job j: gave up after {RACE_TRIES} tries in ")
    assert f"(last: lost race {RACE_TRIES})" in message
    assert raised.value.path == "/r/j"
    assert isinstance(raised.value.__cause__, TryAgain)


def test_retry_on_errors_are_retried_others_raised_at_once() -> None:
    tries: list[int] = []

    def conflicting() -> None:
        tries.append(1)
        raise VersionConflict("changed")

    with pytest.raises(HandleExists, match="gave up after 2 tries"):
        Retry(tries=2).call(conflicting, what="w", retry_on=(VersionConflict,), error=HandleExists)
    assert len(tries) == 2

    def failing() -> None:
        tries.append(1)
        raise StoreUnavailable("down")

    with pytest.raises(StoreUnavailable, match="down"):
        RACES.call(failing, what="w", retry_on=(VersionConflict,))
    assert len(tries) == 3, "an error not asked for is raised at its first occurrence"


def test_the_backoff_doubles_up_to_its_bound_jittered_down_to_half() -> None:
    policy = Retry(tries=None, backoff=0.1, max_backoff=1.0, deadline=10)
    for tries, full in ((1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (40, 1.0)):
        pauses = [policy.pause(tries) for _ in range(50)]
        assert all(full / 2 <= p <= full for p in pauses), (tries, pauses)


def test_a_deadline_ends_a_policy_without_a_limit_of_tries() -> None:
    started = time.monotonic()
    with pytest.raises(OutcomeUnknown, match="gave up after"):
        Retry(tries=None, backoff=0.01, max_backoff=0.02, deadline=0.3).call(
            lambda: (_ for _ in ()).throw(TryAgain("no")), what="w", error=OutcomeUnknown
        )
    assert 0.2 <= time.monotonic() - started < 2


def test_give_up_ends_the_policy_of_outcomes_and_nothing_else_does() -> None:
    tries: list[int] = []

    def attempt() -> None:
        tries.append(1)
        raise TryAgain("not recorded")

    with pytest.raises(OutcomeUnknown, match="gave up after 4 tries"):
        WHILE_STANDING.call(
            attempt, what="outcome", give_up=lambda: len(tries) >= 4, error=OutcomeUnknown
        )
    assert len(tries) == 4


def test_a_policy_that_could_retry_forever_is_refused() -> None:
    with pytest.raises(ValueError, match="without a limit"):
        WHILE_STANDING.call(lambda: None, what="w")
    with pytest.raises(ValueError, match="at least one try"):
        Retry(tries=0)


def test_no_hand_rolled_retry_loop_is_left_and_the_limit_is_named_once() -> None:
    """Every compare-and-set and outcome-unknown loop of the store and the runtime goes through
    :mod:`zkstore.zookeeper.retry`: no ``for _ in range(N)`` retries, no second spelling of the
    limit."""
    loops, limits = [], []
    for path in sorted([*REPO.glob("zkstore/**/*.py"), *REPO.glob("recovery/**/*.py")]):
        if "chaos" in path.parts:  # the chaos run draws its faults with loops of its own
            continue
        text = path.read_text()
        name = path.relative_to(REPO)
        retry_loop = r"for \w+ in range\((\d+|[A-Z_]+)\)"
        loops += [f"{name}: {m.group()}" for m in re.finditer(retry_loop, text)]
        limits += [
            f"{name}: {m.group()}"
            for m in re.finditer(r"^_?[A-Z_]*(TRIES|RETRIES)\s*=", text, re.MULTILINE)
        ]
    assert loops == []
    assert limits == ["zkstore/zookeeper/retry.py: RACE_TRIES ="]
