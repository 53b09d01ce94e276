"""What a job's handle says of its definition for people (``jobs show``, the job page), beside
the payload: its arguments, its Spark properties (secrets redacted) and the modules that were
shipped with it automatically. Computed once at submission from the submitter's own objects;
never read back from the payload (nothing is unpickled to show a job).

Each text is cut to a few hundred UTF-8 bytes with an ellipsis, so that the handle stays under
its 2 KB whatever the job is given.
"""

from __future__ import annotations

import io
import re
import shlex
import zipfile
from collections.abc import Iterable, Mapping
from typing import Any

from zkstore.jobs.runoptions import LIMIT_KEYS, NOTIFY_KEY, RETRY_KEYS, LifecycleOptions

__all__ = [
    "ELLIPSIS",
    "LIMIT_KEYS",
    "MAX_ARGS_BYTES",
    "MAX_CONF_BYTES",
    "MAX_MODULES_BYTES",
    "REDACT",
    "REDACTED",
    "RETRY_KEYS",
    "args_text",
    "conf_text",
    "cut",
    "read_conf_text",
    "run_options_shown",
    "zipped_modules",
]

#: Spark's own default of ``spark.redaction.regex``: values of matching keys are not shown.
REDACT = re.compile(r"(?i)secret|password|token|access[.]key|credential")
REDACTED = "*********(redacted)"
MAX_ARGS_BYTES = 240
MAX_CONF_BYTES = 240
MAX_MODULES_BYTES = 120
ELLIPSIS = "…"


def cut(text: str, max_bytes: int) -> str:
    """``text`` if it fits in ``max_bytes`` of UTF-8, else its start and an ellipsis."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    room = max_bytes - len(ELLIPSIS.encode())
    return data[:room].decode(errors="ignore") + ELLIPSIS


def args_text(args: Iterable[Any], *, script: bool) -> str | None:
    """A script's arguments as a shell would take them; a function's as Python literals."""
    values = list(args)
    if not values:
        return None
    if script:
        return cut(shlex.join(str(a) for a in values), MAX_ARGS_BYTES)
    shown = []
    for value in values:
        try:
            shown.append(repr(value))
        except Exception:  # noqa: BLE001  (a repr that fails must not fail the submission)
            shown.append(f"<{type(value).__name__}>")
    return cut(", ".join(shown), MAX_ARGS_BYTES)


def conf_text(conf: Mapping[str, str]) -> str | None:
    """``key=value`` pairs, sorted, comma-separated; secret-looking keys' values redacted."""
    if not conf:
        return None
    pairs = (f"{k}={REDACTED if REDACT.search(k) else v}" for k, v in sorted(conf.items()))
    return cut(", ".join(pairs), MAX_CONF_BYTES)


#: Where :func:`conf_text` put one pair's end: a comma and a space before the next key.
_NEXT_PAIR = re.compile(r", (?=[A-Za-z0-9_.-]+=)")
#: A key cut before its ``=`` at the end of a cut text.
_KEY_CUT = re.compile(r", [A-Za-z0-9_.-]*$")


def read_conf_text(text: str) -> tuple[dict[str, str], str | None]:
    """What :func:`conf_text` wrote, read back: the pairs it shows, and the key of the last one
    if the text was cut (its value is then the start of the real one: the cut fell in it or in
    the next key, which is left out, as is every pair after it; None if nothing was cut). Only
    a hint: a value holding ``, x=`` reads as two pairs, a redacted value as :data:`REDACTED`."""
    was_cut = text.endswith(ELLIPSIS)
    body = text.removesuffix(ELLIPSIS) if was_cut else text
    if was_cut:
        body = _KEY_CUT.sub("", body)
    pairs: dict[str, str] = {}
    last: str | None = None
    for part in _NEXT_PAIR.split(body) if body else []:
        key, equals, value = part.partition("=")
        if equals and key.strip():
            pairs[key.strip()] = value
            last = key.strip()
    return pairs, (last if was_cut else None)


def zipped_modules(data: bytes) -> str | None:
    """The top-level modules and packages in a modules zip (``etl, helpers/``)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, ValueError):
        return None
    top = set()
    for name in names:
        head, sep, _ = name.partition("/")
        top.add(f"{head}/" if sep else head.removesuffix(".py"))
    return cut(", ".join(sorted(top)), MAX_MODULES_BYTES) if top else None


def run_options_shown(options: LifecycleOptions) -> dict[str, Any]:
    """The lifecycle options a job gave (its :class:`~zkstore.jobs.runspec.RunSpec`'s), for
    people: its limits and retry options (seconds; missing: the daemon's defaults) and its
    notification URL redacted (``scheme://host:port/...``: a webhook's path is often its
    secret). Derived, never read back."""
    from zkstore.jobs.stops import redact_url

    found: dict[str, Any] = options.given()
    if options.notify is not None:
        found[NOTIFY_KEY] = redact_url(options.notify)
    return found
