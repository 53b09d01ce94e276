"""What a job makes of a desired configuration: the pure rules of
recovery/driver/configchange.py."""

from __future__ import annotations

from typing import Any

import pytest

from recovery.driver.configchange import Applied, ConfigChange, apply_desired, initial, revalidate
from zkstore.jobs.control import (
    APPLIED,
    LOG_LEVEL,
    NEEDS_RESTART,
    PAUSE,
    REJECTED,
    ControlAck,
    DeclaredKey,
    KeyDecision,
)

pytestmark = pytest.mark.unit


def apply(
    current: Applied,
    desired: dict[str, Any],
    *handlers: Any,
    declared: dict[str, DeclaredKey] | None = None,
) -> Applied:
    return apply_desired(current, desired, version=7, declared=declared, handlers=handlers)


def states(applied: Applied) -> dict[str, str]:
    return {key: decision.state for key, decision in applied.reported().items()}


def test_without_a_handler_every_valid_change_is_applied_as_read() -> None:
    start = Applied({"rate": 10, "mode": "slow"})
    after = apply(start, {"rate": 20, "extra": True})
    assert after.values == {"rate": 20, "extra": True}  # mode removed: always applied
    assert states(after) == {"rate": APPLIED, "extra": APPLIED, "mode": APPLIED}
    assert after.outstanding == {}


def test_a_handler_decides_per_key_and_sees_old_and_new() -> None:
    seen: list[ConfigChange] = []

    def handler(change: ConfigChange) -> None:
        seen.append(change)
        if change.new.get("mode") not in ("fast", "slow"):
            change.reject("mode", "unknown mode")
        change.needs_restart("partitions")

    start = Applied({"rate": 10, "mode": "slow", PAUSE: False})
    after = apply(start, {"rate": 20, "mode": "turbo", "partitions": 8, PAUSE: True}, handler)
    (change,) = seen
    assert change.version == 7
    assert dict(change.old) == {"rate": 10, "mode": "slow"}  # no built-ins
    assert dict(change.new) == {"rate": 20, "mode": "turbo", "partitions": 8}
    assert change.keys == ("mode", "partitions", "rate")
    assert after.values == {"rate": 20, "mode": "slow", PAUSE: True}
    assert after.outstanding["mode"] == KeyDecision(REJECTED, "turbo", "unknown mode")
    assert after.outstanding["partitions"].state == NEEDS_RESTART
    # Asked again with the same desired values, nothing is decided again.
    again = apply(after, {"rate": 20, "mode": "turbo", "partitions": 8, PAUSE: True}, handler)
    assert len(seen) == 1 and again.outstanding == after.outstanding
    # A new desired value is decided afresh; going back to the value in effect clears it.
    fixed = apply(again, {"rate": 20, "mode": "fast", "partitions": 4, PAUSE: True}, handler)
    assert fixed.values["mode"] == "fast"
    assert "mode" not in fixed.outstanding
    back = apply(fixed, {"rate": 20, "mode": "fast", PAUSE: True}, handler)
    assert back.outstanding == {}


def test_a_handler_that_raises_rejects_what_it_was_asked() -> None:
    def broken(change: ConfigChange) -> None:
        raise RuntimeError("no idea")

    after = apply(Applied({"rate": 10}), {"rate": 20, LOG_LEVEL: "DEBUG"}, broken)
    assert after.values == {"rate": 10, LOG_LEVEL: "DEBUG"}  # built-ins are not the handler's
    assert after.outstanding["rate"].reason == "the job's handler raised RuntimeError: no idea"


def test_a_handler_cannot_refuse_a_removal_or_decide_another_key() -> None:
    def handler(change: ConfigChange) -> None:
        with pytest.raises(ValueError, match="a removal is always applied"):
            change.reject("rate", "no")
        with pytest.raises(KeyError):
            change.reject("other", "no")

    assert apply(Applied({"rate": 10}), {}, handler).values == {}


def test_invalid_values_are_rejected_before_any_handler() -> None:
    asked: list[tuple[str, ...]] = []
    declared = {"rate": DeclaredKey("float"), "partitions": DeclaredKey("int", restart=True)}
    after = apply(
        Applied({"rate": 1.5}),
        {
            "rate": "fast",
            "colour": "red",
            "partitions": 8,
            LOG_LEVEL: "LOUD",
            "zkstore.nope": 1,
            "deep": {"a": 1},
        },
        lambda change: asked.append(change.keys),
        declared=declared,
    )
    assert asked == []
    assert after.values == {"rate": 1.5}
    reasons = {k: d.reason for k, d in after.outstanding.items()}
    assert reasons["rate"] == "expected float, got a string"
    assert reasons["colour"] is not None and "not a key the job declared" in reasons["colour"]
    assert reasons["partitions"] == "declared as needing a restart"
    assert reasons[LOG_LEVEL] is not None and "not a log level" in reasons[LOG_LEVEL]
    assert reasons["zkstore.nope"] is not None and "reserved" in reasons["zkstore.nope"]
    assert reasons["deep"] == "a JSON object is not a scalar"
    assert str(after.outstanding["deep"].value).startswith("<invalid value ")  # a scalar


def test_a_new_attempt_starts_from_desired_less_standing_rejections() -> None:
    previous = ControlAck.build(
        attempt=1,
        applied_version=5,
        updated="2026-01-01T00:00:00Z",
        values={"rate": 10, "mode": "slow"},
        decisions={
            "mode": KeyDecision(REJECTED, "turbo", "unknown mode"),
            "rate": KeyDecision(REJECTED, 99, "too fast"),  # desired changed since: decided anew
            "partitions": KeyDecision(NEEDS_RESTART, 8, "next attempt"),
        },
        paused_since=None,
    )
    start = initial({"rate": 20, "mode": "turbo", "partitions": 8, PAUSE: "yes"}, previous)
    assert start.values == {"rate": 20, "mode": "slow", "partitions": 8}  # the restart applies
    assert set(start.outstanding) == {"mode", PAUSE}
    assert start.outstanding[PAUSE].reason == "expected bool, got a string"


def test_declaring_keys_rejects_what_does_not_fit() -> None:
    current = Applied({"rate": "fast", "mode": "slow", PAUSE: True})
    after = revalidate(current, {"rate": DeclaredKey("float"), "mode": DeclaredKey("str")})
    assert after.values == {"mode": "slow", PAUSE: True}
    assert after.outstanding["rate"] == KeyDecision(
        REJECTED, "fast", "expected float, got a string"
    )
