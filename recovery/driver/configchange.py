"""What a job makes of a new desired configuration: per key, applied, rejected or needs-restart.

:func:`apply_desired` is a pure function of the values in effect, the desired values, the keys the
job declared and its handlers (``ctx.on_config_change``); :func:`initial` is where a new attempt
starts from. The rules, which make a failover neither lose a change nor apply one twice:

- a new attempt starts with the desired values, except those an earlier attempt rejected (it
  keeps the value that attempt kept, and the rejection stands); a value that needed a restart is
  applied by the new attempt (that is the restart);
- a changed key is checked (its syntax, a built-in's type, and once the job declared its keys,
  a declared key of the declared type), then a key declared as needing a restart waits for the
  next attempt, then the handlers decide; what nobody refused is applied;
- a value refused (or waiting for a restart) is not decided again until its desired value changes;
- removing a key is always applied: the job falls back to its default.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from zkstore.jobs.control import (
    APPLIED,
    NEEDS_RESTART,
    REJECTED,
    ControlAck,
    DeclaredKey,
    KeyDecision,
    job_values,
    value_error,
)
from zkstore.jobs.control.values import is_builtin, recorded, same_value

__all__ = ["Applied", "ConfigChange", "Handler", "apply_desired", "initial", "revalidate"]

logger = logging.getLogger(__name__)


class ConfigChange:
    """A change of the job's configuration, as ``ctx.on_config_change`` handlers receive it.

    ``old`` is the configuration in effect, ``new`` the desired one (both without built-in
    controls), ``keys`` the keys to decide (changed or added; removed ones are listed too, and
    always applied). A handler decides per key with :meth:`reject` or :meth:`needs_restart`;
    a key it leaves alone is applied. If a handler raises, every key it could decide is
    rejected with the error as the reason.
    """

    def __init__(
        self, version: int, old: Mapping[str, Any], new: Mapping[str, Any], keys: Iterable[str]
    ) -> None:
        self.version = version
        self.old: Mapping[str, Any] = MappingProxyType(dict(old))
        self.new: Mapping[str, Any] = MappingProxyType(dict(new))
        self.keys = tuple(keys)
        self.decisions: dict[str, KeyDecision] = {}

    def __repr__(self) -> str:
        return f"ConfigChange(version={self.version}, keys={self.keys!r})"

    def _decide(self, key: str, state: str, reason: str | None) -> None:
        if key not in self.keys:
            raise KeyError(f"{key!r} is not a key of this change ({', '.join(self.keys)})")
        if key not in self.new:
            raise ValueError(f"{key!r} was removed: a removal is always applied")
        self.decisions[key] = KeyDecision(state, recorded(self.new[key]), reason)

    def reject(self, key: str, reason: str) -> None:
        """Refuse the new value of ``key``: the job goes on with the old one; ``zkstore control
        get`` shows the reason."""
        self._decide(key, REJECTED, reason)

    def needs_restart(self, key: str, reason: str | None = None) -> None:
        """The new value of ``key`` takes effect in the next attempt; this one keeps the old."""
        self._decide(key, NEEDS_RESTART, reason or "takes effect in the next attempt")

    def apply(self, key: str) -> None:
        """Apply the new value of ``key`` (what happens anyway to a key left alone)."""
        if key in self.new:
            self._decide(key, APPLIED, None)


Handler = Callable[[ConfigChange], object]


@dataclass(frozen=True)
class Applied:
    """The configuration an attempt has in effect, and what it reported about each key."""

    values: dict[str, Any] = field(default_factory=dict)
    #: rejected and needs-restart keys, with the desired value they were decided on
    outstanding: dict[str, KeyDecision] = field(default_factory=dict)
    #: the decisions of the last change (what the acknowledgement shows, with ``outstanding``)
    last: dict[str, KeyDecision] = field(default_factory=dict)

    def reported(self) -> dict[str, KeyDecision]:
        return {**self.last, **self.outstanding}


def _same(values: Mapping[str, Any], other: Mapping[str, Any], key: str) -> bool:
    if (key in values) != (key in other):
        return False
    return key not in values or same_value(values[key], other[key])


def _stands(decision: KeyDecision, desired: Mapping[str, Any], key: str) -> bool:
    """A decision still stands while the desired value is the one it was made on."""
    return key in desired and same_value(decision.value, desired[key])


def initial(desired: Mapping[str, Any], previous: ControlAck | None) -> Applied:
    """Where a new attempt starts: the desired values, less the values an earlier attempt
    rejected (which keep the value that attempt had), less values that are not valid at all."""
    values = dict(desired)
    outstanding: dict[str, KeyDecision] = {}
    if previous is not None:
        for key, decision in previous.decisions().items():
            if decision.state == REJECTED and _stands(decision, desired, key):
                outstanding[key] = decision
                if key in previous.values:
                    values[key] = previous.values[key]
                else:
                    values.pop(key)
    for key in sorted(desired):
        problem = value_error(key, desired[key], None)
        if problem is not None and key not in outstanding:
            outstanding[key] = KeyDecision(REJECTED, recorded(desired[key]), problem)
            values.pop(key)
    return Applied(values, outstanding, {})


def apply_desired(
    current: Applied,
    desired: Mapping[str, Any],
    *,
    version: int,
    declared: Mapping[str, DeclaredKey] | None,
    handlers: Iterable[Handler],
) -> Applied:
    """The configuration after the job has decided on ``desired`` (see the module's rules)."""
    changed = [
        key
        for key in sorted(desired.keys() | current.values.keys())
        if not _same(desired, current.values, key)
        and not (key in current.outstanding and _stands(current.outstanding[key], desired, key))
    ]
    decisions = _checked(changed, desired, declared)
    proposed = [k for k in changed if k not in decisions and not is_builtin(k)]
    if proposed:
        decisions.update(_ask(handlers, current.values, desired, version, proposed))
    values = dict(current.values)
    for key in changed:
        decision = decisions.setdefault(key, KeyDecision(APPLIED, recorded(desired.get(key))))
        if decision.state == APPLIED:
            if key in desired:
                values[key] = desired[key]
            else:
                values.pop(key, None)
    outstanding = {
        key: decision
        for key, decision in {**current.outstanding, **decisions}.items()
        if decision.state != APPLIED
        and _stands(decision, desired, key)
        and not _same(desired, values, key)
    }
    return Applied(values, outstanding, decisions)


def _checked(
    changed: list[str], desired: Mapping[str, Any], declared: Mapping[str, DeclaredKey] | None
) -> dict[str, KeyDecision]:
    """Decisions that need no handler: invalid values, and keys declared as needing a restart."""
    decisions = {}
    for key in changed:
        if key not in desired:
            continue
        value = desired[key]
        problem = value_error(key, value, declared)
        if problem is not None:
            decisions[key] = KeyDecision(REJECTED, recorded(value), problem)
        elif declared is not None and key in declared and declared[key].restart:
            decisions[key] = KeyDecision(NEEDS_RESTART, value, "declared as needing a restart")
    return decisions


def _ask(
    handlers: Iterable[Handler],
    values: Mapping[str, Any],
    desired: Mapping[str, Any],
    version: int,
    keys: list[str],
) -> dict[str, KeyDecision]:
    """The handlers' decisions on ``keys``; a handler that raises rejects every key it could
    decide (with the error as the reason)."""
    decisions: dict[str, KeyDecision] = {}
    for handler in handlers:
        undecided = [k for k in keys if decisions.get(k, KeyDecision(APPLIED)).state == APPLIED]
        change = ConfigChange(version, job_values(values), job_values(desired), undecided)
        try:
            handler(change)
        except Exception as exc:  # noqa: BLE001 - the job's handler: its failure is its answer
            logger.error("config handler %r failed on version %d: %r", handler, version, exc)
            reason = f"the job's handler raised {type(exc).__name__}: {exc}"
            change.decisions = {
                k: KeyDecision(REJECTED, recorded(desired[k]), reason)
                for k in undecided
                if k in desired
            }
        decisions.update(change.decisions)
    return decisions


def revalidate(current: Applied, declared: Mapping[str, DeclaredKey]) -> Applied:
    """The configuration once the job declared its keys: a value in effect that is not a
    declared key of the declared type is rejected (the job falls back to its default)."""
    values, outstanding, last = dict(current.values), dict(current.outstanding), {}
    for key, value in current.values.items():
        problem = value_error(key, value, declared)
        if problem is not None:
            values.pop(key)
            outstanding[key] = last[key] = KeyDecision(REJECTED, recorded(value), problem)
    return Applied(values, outstanding, {**current.last, **last})
