"""A job's lifecycle options as it gave them, typed: one part of its :class:`~zkstore.jobs.
runspec.RunSpec`.

:class:`LifecycleOptions` holds what ``submit --timeout``, ``--start-timeout``,
``--progress-timeout``, the ``--retry-*`` pacing and ``--notify`` said: seconds (a limit of 0
turned off), and the URL. An option not given is None: the leader's own default applies (its
``--restart-backoff`` and ``--max-backoff`` pace a job that sets none), so the value is what the
job asked, and :func:`recovery.leader.lifecycle_inputs.job_lifecycle` lays it over the leader's
defaults into a :class:`zkstore.lifecycle.options.Lifecycle` at each decision (where a
combination that is not valid is ignored, as before: the leader decides for every job).

Two forms in a handle: from fleet protocol 4 the ``lifecycle`` object of the ``run`` field
(:meth:`LifecycleOptions.from_json`, strict: garbage raises ValueError and the job is
quarantined as any garbled handle); before, flat summary keys (``"timeout": 600.0``; read by
:meth:`LifecycleOptions.from_flat`, tolerant as every release read them: a key that is not
what a writer writes is ignored, its default applies). Both read into the same value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from zkstore.records.handle import SummaryValue

__all__ = [
    "LIFECYCLE_KEYS",
    "LIMIT_KEYS",
    "NOTIFY_KEY",
    "RETRY_KEYS",
    "LifecycleOptions",
]

#: The limits that make the leader end attempts (their summary keys and field names).
LIMIT_KEYS = ("timeout", "start_timeout", "progress_timeout")
#: The retry pacing.
RETRY_KEYS = (
    "retry_delay",
    "retry_max_delay",
    "retry_jitter",
    "retry_reset_after",
    "lost_retry_delay",
    "lost_retry_max_delay",
)
#: Where the job's own events are POSTed.
NOTIFY_KEY = "notify"
#: Every lifecycle option, the one list of them (tests/lifecycle/test_lifecycle_options.py checks
#: that every place that reads or writes them knows each).
LIFECYCLE_KEYS = (*LIMIT_KEYS, *RETRY_KEYS, NOTIFY_KEY)


@dataclass(frozen=True)
class LifecycleOptions:
    """The lifecycle options a job gave (None: not given, the leader's default applies)."""

    timeout: float | None = None
    start_timeout: float | None = None
    progress_timeout: float | None = None
    retry_delay: float | None = None
    retry_max_delay: float | None = None
    retry_jitter: float | None = None
    retry_reset_after: float | None = None
    lost_retry_delay: float | None = None
    lost_retry_max_delay: float | None = None
    notify: str | None = None

    @classmethod
    def from_json(cls, raw: object) -> LifecycleOptions:
        """The ``lifecycle`` object of a ``run`` field; ValueError for anything a writer
        would not have written (an unknown key, a value of the wrong kind)."""
        if not isinstance(raw, dict):
            raise ValueError("'lifecycle' is not an object")
        unknown = set(raw) - set(LIFECYCLE_KEYS)
        if unknown:
            raise ValueError(f"'lifecycle' has unknown options: {', '.join(sorted(unknown))[:80]}")
        return cls(**{key: _value(key, value) for key, value in raw.items()})

    @classmethod
    def from_flat(cls, summary: Mapping[str, Any]) -> LifecycleOptions:
        """The flat summary keys of a handle written before fleet protocol 4; a key that is not
        what a writer writes is left out (its default applies), as every release read it."""
        found: dict[str, Any] = {}
        for key in LIFECYCLE_KEYS:
            if key in summary:
                try:
                    found[key] = _value(key, summary[key])
                except ValueError:
                    continue
        return cls(**found)

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> LifecycleOptions:
        """A submission's options (the summary keys, as ``lifecycle_summary`` or the Python API
        gives them); ValueError naming the option for one that is not valid."""
        unknown = set(given) - set(LIFECYCLE_KEYS)
        if unknown:
            raise ValueError(f"unknown lifecycle options: {', '.join(sorted(unknown))}")
        return cls(**{key: _value(key, value) for key, value in given.items() if value is not None})

    def given(self) -> dict[str, SummaryValue]:
        """The options given, by summary key (what the leader lays over its defaults, what
        the handle's ``run`` keeps, what a handle before protocol 4 kept flat)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }

    @property
    def has_limits(self) -> bool:
        """A limit is given that the leader enforces by ending attempts (0 turns one off)."""
        return any(getattr(self, key) for key in LIMIT_KEYS)


def _value(key: str, value: object) -> Any:
    """One option's value as a writer writes it: the URL (text), else a finite number of
    seconds (or, for the jitter, a fraction), not negative; ValueError if not."""
    if key == NOTIFY_KEY:
        if not isinstance(value, str) or not value:
            raise ValueError("'notify' is not a URL")
        return value
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{key!r} is not a number of seconds")
    return float(value)
