"""Strict parsing of what zkstore reads back from ZooKeeper: bounded, typed, time-zone aware.

Anybody with write access to ZooKeeper (a client's bug, an operator's mistake, an attacker while
the nodes have the open ACL) can put any bytes in a znode. Every record zkstore reads goes through
these functions, which turn anything that is not what its writer would have written into a
:class:`ValueError` with a reason; the record's parser turns that into a
:class:`~zkstore.errors.CorruptRecord` naming the path. The JSON parser's own recursion limit is
caught, and the depth of what it returns is measured without recursion, so no nesting can
exhaust the stack.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_INT",
    "MAX_YEAR",
    "MIN_YEAR",
    "check_text",
    "escape_control",
    "is_time",
    "load_object",
    "optional_second_text",
    "optional_time_text",
    "parse_time",
    "second_text",
    "time_or_none",
    "time_text",
    "to_millisecond",
    "to_second",
    "utc_in",
    "utc_moment",
    "utc_moment_in",
    "utc_now",
]

#: Records and handles are flat JSON objects; a quarantine entry nests one handle. Deeper input is
#: refused before the JSON parser sees it.
MAX_DEPTH = 3

#: Integers beyond 64 bits are refused by the parser: no writer makes them, and past it they
#: overflow whatever meets them (a float for a metric, a kazoo version, a pid for ``os.kill``).
MAX_INT = 2**63 - 1
_MAX_INT_DIGITS = len(str(MAX_INT))

#: The years a timestamp may name: arithmetic on them (a deadline, a backoff, a conversion to
#: UTC) can never leave ``datetime``'s range.
MIN_YEAR, MAX_YEAR = 1970, 9000

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_BUT_NEWLINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def load_object(data: bytes, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """The JSON object in ``data``; raises :class:`ValueError` saying why it is not one."""
    if len(data) > max_bytes:
        raise ValueError(f"{len(data)} bytes, over {max_bytes}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 JSON") from None
    try:
        value = json.loads(
            text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_bounded_int
        )
    except RecursionError:
        raise ValueError(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError:
        raise ValueError("not UTF-8 JSON") from None
    except ValueError as exc:  # refused by one of the parse_* functions: it says why
        raise ValueError(str(exc)) from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    if _depth(value) > max_depth:
        raise ValueError(f"nested deeper than {max_depth} levels")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is not a finite number")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS or abs(value := int(text)) > MAX_INT:
        raise ValueError(f"an integer of {len(text)} digits is over 64 bits")
    return value


def _depth(value: Any) -> int:
    """How deeply ``value`` nests lists and objects (1 for a flat object), without recursion.

    Raises :class:`ValueError` for a text holding a lone surrogate (JSON's ``"\\ud800"``): no
    writer makes one, and it cannot be encoded again (printed, logged, served).
    """
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        deepest = max(deepest, depth)
        children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, dict | list):
                todo.append((child, depth + 1))
            elif isinstance(child, str) and _SURROGATE.search(child):
                raise ValueError("a text holds a lone surrogate (not UTF-8)")
    return deepest


def check_text(value: str, what: str, *, multiline: bool = False) -> str:
    """``value`` if it holds no control characters (newlines and tabs allowed when
    ``multiline``, for error messages and tracebacks); else :class:`ValueError`."""
    pattern = _CONTROL_BUT_NEWLINES if multiline else _CONTROL
    if pattern.search(value):
        raise ValueError(f"{what} holds control characters")
    return value


def escape_control(value: str, *, multiline: bool = False) -> str:
    """``value`` with control characters written as ``\\xNN`` (newlines and tabs kept when
    ``multiline``): what writers do to text they did not make themselves, so that the strict
    reader never refuses a record that zkstore wrote."""
    pattern = _CONTROL_BUT_NEWLINES if multiline else _CONTROL
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}", value)


def parse_time(value: str) -> datetime:
    """Parse a zkstore timestamp (ISO 8601 with a time zone, as :func:`utc_now` writes them).

    Raises :class:`ValueError` for anything else, naive times included (comparing a naive time
    with an aware one raises ``TypeError`` far from here), and years outside
    :data:`MIN_YEAR`..:data:`MAX_YEAR` (a conversion to UTC or a deadline added to them would
    raise ``OverflowError`` far from here).
    """
    if not isinstance(value, str) or len(value) > 40:
        raise ValueError(f"not a timestamp: {value!r:.60}")
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ValueError(f"timestamp without a time zone: {value!r}")
    if not MIN_YEAR <= parsed.year <= MAX_YEAR:
        raise ValueError(f"timestamp out of range: {value!r}")
    return parsed


def utc_now() -> str:
    """The current time as ISO 8601 UTC with milliseconds: the timestamp format of zkstore."""
    return utc_in(0.0)


def utc_in(seconds: float) -> str:
    """The time ``seconds`` from now, in the timestamp format of zkstore."""
    return time_text(datetime.now(UTC) + timedelta(seconds=seconds))


def utc_moment() -> datetime:
    """The current time in UTC, to the millisecond (what a record keeps of it: a record's
    time read back equals the one written)."""
    return utc_moment_in(0.0)


def utc_moment_in(seconds: float) -> datetime:
    """The time ``seconds`` from now in UTC, to the millisecond (as :func:`utc_moment`)."""
    return to_millisecond(datetime.now(UTC) + timedelta(seconds=seconds))


def to_millisecond(moment: datetime) -> datetime:
    """``moment`` cut to the millisecond: what a record keeps of it (its text's precision)."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def to_second(moment: datetime) -> datetime:
    """``moment`` cut to the second: what a record keeps of a time stored to the second (a
    schedule's window or bound, :func:`second_text`)."""
    return moment.replace(microsecond=0)


def second_text(moment: datetime) -> str:
    """``moment`` to the second, UTC: ``2026-11-24T01:30:00Z``, as schedules store their windows
    and bounds (:func:`parse_time` reads it back)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def optional_second_text(moment: datetime | None) -> str | None:
    """:func:`second_text` of ``moment``, None for None."""
    return None if moment is None else second_text(moment)


def time_text(moment: datetime) -> str:
    """``moment`` in the timestamp format of zkstore (:func:`parse_time` reads it back)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def optional_time_text(moment: datetime | None) -> str | None:
    """:func:`time_text` of ``moment``, None for None (a record's optional time, for JSON)."""
    return None if moment is None else time_text(moment)


def time_or_none(value: object) -> datetime | None:
    """``value`` as a time if it is a valid zkstore timestamp, else None: for a time kept in
    a handle's summary (``submitted``), which is text of the job's definition."""
    try:
        return parse_time(value)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return None


def is_time(value: object) -> bool:
    """True if ``value`` is a valid zkstore timestamp."""
    try:
        parse_time(value)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return False
    return True
