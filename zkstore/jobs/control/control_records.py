"""The records a job's driver writes beside its control object, fenced on its attempt.

``R/jobs/<job>/control-ack`` (:class:`ControlAck`): the desired version the live attempt has
applied, the values in effect, and the state of each key it did not simply apply (rejected with a
reason, or needing a new attempt), and whether the job is blocked at a pause point.

``R/jobs/<job>/control-keys`` (:class:`ControlKeys`): the keys the job declared, with their
types; once it exists, a change of an unknown key or of a wrong type is refused before it is
stored.

Both are parsed strictly, beyond the generic record checks: every key, value and state is what
the driver would have written, else :class:`~zkstore.errors.CorruptRecord` naming the path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zkstore.jobs.control.values import TYPES, DeclaredKey, is_builtin, key_error, scalar_error
from zkstore.records.job_states import KeyState
from zkstore.records.record import Record
from zkstore.records.strict import escape_control

__all__ = [
    "APPLIED",
    "KEY_STATES",
    "MAX_KEYS",
    "MAX_REASON_CHARS",
    "NEEDS_RESTART",
    "REJECTED",
    "ControlAck",
    "ControlKeys",
    "KeyDecision",
]

APPLIED = KeyState.APPLIED
REJECTED = KeyState.REJECTED
NEEDS_RESTART = KeyState.NEEDS_RESTART
KEY_STATES = (APPLIED, REJECTED, NEEDS_RESTART)

MAX_REASON_CHARS = 500
#: a control object is at most 16 KB, so it never holds more keys than this
MAX_KEYS = 2000


@dataclass(frozen=True)
class KeyDecision:
    """What the job decided about one key's desired ``value``."""

    state: str
    value: Any = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.reason is not None:
            reason = escape_control(self.reason)
            if len(reason) > MAX_REASON_CHARS:
                reason = reason[: MAX_REASON_CHARS - 3] + "..."
            object.__setattr__(self, "reason", reason)

    def as_dict(self) -> dict[str, Any]:
        found = {"state": self.state, "value": self.value}
        return found if self.reason is None else {**found, "reason": self.reason}


@dataclass(frozen=True)
class ControlAck(Record):
    """``R/jobs/<job>/control-ack``: what ``attempt`` has made of the control object.

    ``applied_version`` is the desired version it acknowledged (it only grows within an
    attempt); ``values`` the values in effect (built-ins included); ``keys`` the decisions of the
    keys changed by that version, and of every key still rejected or waiting for a restart;
    ``paused`` is set while the job is blocked at a pause point.
    """

    attempt: int = 0
    applied_version: int = 0
    updated: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    keys: dict[str, Any] = field(default_factory=dict)
    paused: bool = False
    paused_since: str | None = None

    optional = frozenset({"paused_since"})
    times = frozenset({"updated", "paused_since"})

    @classmethod
    def build(
        cls,
        *,
        attempt: int,
        applied_version: int,
        updated: str,
        values: dict[str, Any],
        decisions: dict[str, KeyDecision],
        paused_since: str | None,
    ) -> ControlAck:
        return cls(
            version=None,
            attempt=attempt,
            applied_version=applied_version,
            updated=updated,
            values=dict(values),
            keys={key: decision.as_dict() for key, decision in decisions.items()},
            paused=paused_since is not None,
            paused_since=paused_since,
        )

    def problem(self) -> str | None:
        problem = _values_problem(self.values) or _decisions_problem(self.keys)
        if problem is None and self.paused != (self.paused_since is not None):
            problem = "paused and paused_since disagree"
        return problem

    def decisions(self) -> dict[str, KeyDecision]:
        return {
            key: KeyDecision(entry["state"], entry.get("value"), entry.get("reason"))
            for key, entry in self.keys.items()
        }


def _values_problem(values: dict[str, Any]) -> str | None:
    if len(values) > MAX_KEYS:
        return f"{len(values)} values, over {MAX_KEYS}"
    for key, value in values.items():
        problem = key_error(key) or scalar_error(value)
        if problem is not None:
            return f"value of {key!r:.60}: {problem}"
    return None


def _decisions_problem(keys: dict[str, Any]) -> str | None:
    if len(keys) > MAX_KEYS:
        return f"{len(keys)} key states, over {MAX_KEYS}"
    for key, entry in keys.items():
        problem = key_error(key)
        if problem is None and not isinstance(entry, dict):
            problem = "not an object"
        elif problem is None and entry.get("state") not in KEY_STATES:
            problem = f"state {entry.get('state')!r:.40}"
        elif problem is None:
            reason = entry.get("reason")
            problem = scalar_error(entry.get("value"))
            if reason is not None and (not isinstance(reason, str) or scalar_error(reason)):
                problem = "reason is not a one-line text"
        if problem is not None:
            return f"state of key {key!r:.60}: {problem}"
    return None


@dataclass(frozen=True)
class ControlKeys(Record):
    """``R/jobs/<job>/control-keys``: the keys the job declared (``ctx.declare_config``),
    ``{key: {"type": "int|float|str|bool", "restart": bool}}``, written by ``attempt``."""

    attempt: int = 0
    declared: str = ""
    keys: dict[str, Any] = field(default_factory=dict)

    times = frozenset({"declared"})

    @classmethod
    def build(cls, *, attempt: int, declared: str, keys: dict[str, DeclaredKey]) -> ControlKeys:
        return cls(
            version=None,
            attempt=attempt,
            declared=declared,
            keys={key: spec.as_dict() for key, spec in keys.items()},
        )

    def problem(self) -> str | None:
        return _declared_problem(self.keys)

    def declared_keys(self) -> dict[str, DeclaredKey]:
        return {
            key: DeclaredKey(spec["type"], bool(spec.get("restart")))
            for key, spec in self.keys.items()
        }


def _declared_problem(keys: dict[str, Any]) -> str | None:
    if len(keys) > MAX_KEYS:
        return f"{len(keys)} keys, over {MAX_KEYS}"
    for key, spec in keys.items():
        problem = key_error(key)
        if problem is None and is_builtin(key):
            problem = "a built-in key cannot be declared"
        elif problem is None and (not isinstance(spec, dict) or set(spec) != {"type", "restart"}):
            problem = "not {type, restart}"
        elif problem is None and (spec["type"] not in TYPES or type(spec["restart"]) is not bool):
            problem = f"type {spec['type']!r:.40} or restart {spec['restart']!r:.10}"
        if problem is not None:
            return f"key {key!r:.60}: {problem}"
    return None
