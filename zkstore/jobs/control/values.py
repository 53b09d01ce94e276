"""What a control object may hold: flat keys, JSON scalar values, built-in keys, declared types.

The same checks run where a value is set (the CLI and the Python API refuse it before it is
stored) and where it is applied (the driver rejects, with the same reason, a value somebody
wrote into ZooKeeper by hand). Built-in keys are under ``zkstore.``; they are not the job's own
configuration (``ctx.config`` does not show them) but the controls every job gets::

    zkstore.pause         bool   the job blocks at its next checkpoint or pause point
    zkstore.log-level     str    the driver's Python logging and Spark's log level
    zkstore.checkpoint    str    a request for a checkpoint (a token: each request a new one)
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zkstore.records.strict import check_text

__all__ = [
    "BUILTIN_PREFIX",
    "BUILTIN_TYPES",
    "CHECKPOINT",
    "LOG_LEVEL",
    "LOG_LEVELS",
    "MAX_KEY_CHARS",
    "MAX_TEXT_CHARS",
    "PAUSE",
    "TYPES",
    "DeclaredKey",
    "builtin_error",
    "describe",
    "is_builtin",
    "job_values",
    "key_error",
    "log_level",
    "recorded",
    "same_value",
    "scalar_error",
    "type_error",
    "type_name",
    "value_error",
]

MAX_KEY_CHARS = 200
MAX_TEXT_CHARS = 2000

BUILTIN_PREFIX = "zkstore."
PAUSE = "zkstore.pause"
LOG_LEVEL = "zkstore.log-level"
CHECKPOINT = "zkstore.checkpoint"

#: Spark's log levels (``SparkContext.setLogLevel``); Python's names are accepted and mapped.
LOG_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
_LEVEL_ALIASES = {"WARNING": "WARN", "CRITICAL": "FATAL"}

#: The types a job can declare for its keys.
TYPES = ("bool", "int", "float", "str")
BUILTIN_TYPES = {PAUSE: "bool", LOG_LEVEL: "str", CHECKPOINT: "str"}

_PY_TYPES = {bool: "bool", int: "int", float: "float", str: "str"}


def is_builtin(key: str) -> bool:
    return key.startswith(BUILTIN_PREFIX)


def key_error(key: object) -> str | None:
    """Why ``key`` cannot be a control key (empty, too long, control characters), or None."""
    if not isinstance(key, str) or not key.strip():
        return "a key must be a non-empty string"
    if len(key) > MAX_KEY_CHARS:
        return f"key {key[:40]!r}... is longer than {MAX_KEY_CHARS} characters"
    try:
        check_text(key, "a key")
    except ValueError as exc:
        return f"{key!r:.60}: {exc}"
    return None


def scalar_error(value: object) -> str | None:
    """Why ``value`` cannot be a control value (not a JSON scalar, text too long or with control
    characters, a float that JSON cannot carry), or None."""
    if value is None or isinstance(value, bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else "not a finite number"
    if isinstance(value, str):
        if len(value) > MAX_TEXT_CHARS:
            return f"a text of {len(value)} characters, over {MAX_TEXT_CHARS}"
        try:
            check_text(value, "the value")
        except ValueError as exc:
            return str(exc)
        return None
    return f"a JSON {'object' if isinstance(value, dict) else 'array'} is not a scalar"


def recorded(value: object) -> object:
    """``value`` as a record can carry it: itself if it is a valid control value, else a text
    that stands for it (a digest), so that a decision on it can still be matched to it."""
    if scalar_error(value) is None:
        return value
    text = json.dumps(value, sort_keys=True, default=repr)
    return f"<invalid value {hashlib.sha256(text.encode()).hexdigest()[:16]}>"


def same_value(a: object, b: object) -> bool:
    """``a`` and ``b`` are the same control value (``1``, ``1.0`` and ``true`` are not)."""
    a, b = recorded(a), recorded(b)
    return bool(a == b and type(a) is type(b))


def describe(value: object) -> str:
    """``a string``, ``an integer``... for messages."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def type_error(value: object, type_name: str) -> str | None:
    """Why ``value`` is not of the declared type (null fits every type: "no value"), or None."""
    if value is None:
        return None
    fits = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "str": isinstance(value, str),
    }.get(type_name, False)
    return None if fits else f"expected {type_name}, got {describe(value)}"


def log_level(text: str) -> str:
    """The canonical log level of ``text`` (``warning`` -> ``WARN``); :class:`ValueError` if it
    is not one."""
    level = _LEVEL_ALIASES.get(text.strip().upper(), text.strip().upper())
    if level not in LOG_LEVELS:
        raise ValueError(f"{text!r:.40} is not a log level ({', '.join(LOG_LEVELS)})")
    return level


def builtin_error(key: str, value: object) -> str | None:
    """Why ``value`` is not valid for the built-in ``key`` (or the key is unknown), or None."""
    if key not in BUILTIN_TYPES:
        known = ", ".join(sorted(BUILTIN_TYPES))
        return f"{key!r:.60} is not a built-in control ({known}); zkstore.* is reserved"
    problem = type_error(value, BUILTIN_TYPES[key])
    if problem is None and key == LOG_LEVEL and isinstance(value, str) and value not in LOG_LEVELS:
        return f"{value!r:.40} is not a log level ({', '.join(LOG_LEVELS)})"
    if problem is None and key == CHECKPOINT and isinstance(value, str) and len(value) > 64:
        return "a checkpoint request is a token of at most 64 characters"
    return problem


@dataclass(frozen=True)
class DeclaredKey:
    """A key the job declared: its type, and whether a change needs a new attempt."""

    type: str
    restart: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "restart": self.restart}


def type_name(kind: type | str) -> str:
    """The declared type name of ``kind`` (``float`` or ``"float"``); :class:`ValueError` else."""
    name = kind if isinstance(kind, str) else _PY_TYPES.get(kind)
    if name not in TYPES:
        raise ValueError(f"{kind!r:.40} is not a control type ({', '.join(TYPES)})")
    return name


def value_error(key: str, value: object, declared: Mapping[str, DeclaredKey] | None) -> str | None:
    """Why ``key=value`` cannot be part of a job's control object, or None: the key's syntax,
    a scalar value, the built-in's type, and (once the job declared its keys) a declared key of
    the declared type."""
    problem = key_error(key) or scalar_error(value)
    if problem is not None:
        return problem
    if is_builtin(key):
        return builtin_error(key, value)
    if declared is None:
        return None
    if key not in declared:
        names = ", ".join(sorted(declared)) or "none"
        return f"not a key the job declared (it declares: {names})"
    return type_error(value, declared[key].type)


def job_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The job's own keys of a control object (what ``ctx.config`` shows): no built-ins."""
    return {k: v for k, v in values.items() if not is_builtin(k)}
