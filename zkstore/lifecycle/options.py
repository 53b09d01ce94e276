"""A job's lifecycle options, as submitted and as its handle's summary carries them.

The leader decides without reading payloads, so what it needs of these options travels in the
job's handle summary: only the values given, to keep the handle small (a handle is at most
2 KB; these keys take at most about 300 bytes with a notification URL of
:data:`~zkstore.lifecycle.lifecycle_records.MAX_URL_BYTES`), in the job's typed run options (fleet
protocol 4: :class:`~zkstore.jobs.runoptions.LifecycleOptions`, read once on its snapshot),
flat scalars before. A missing key is the default of the leader that reads it:
:class:`Lifecycle` is what the leader decides by, its defaults with the job's options laid
over them (:meth:`Lifecycle.with_options`).

Reading is tolerant: a summary value that is not what a writer would have written is ignored
(the default applies) and reported in ``problems``, never raised: the leader must decide for
every job, and one bad key must not stop a job.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from zkstore.errors import ConfigError
from zkstore.jobs.runoptions import LIFECYCLE_KEYS, LIMIT_KEYS, NOTIFY_KEY
from zkstore.lifecycle.attempt_limits import Limits
from zkstore.lifecycle.lifecycle_records import url_problem
from zkstore.lifecycle.retry_backoff import Backoff, RetryPolicy
from zkstore.records.handle import SummaryValue

__all__ = ["NOTIFY_KEY", "RESET_KEY", "SUMMARY_KEYS", "Lifecycle"]

#: summary key -> (part, field): part "failures"/"lost" are the policy's backoffs
_BACKOFF_KEYS = {
    "retry_delay": ("failures", "delay"),
    "retry_max_delay": ("failures", "max_delay"),
    "retry_jitter": ("failures", "jitter"),
    "lost_retry_delay": ("lost", "delay"),
    "lost_retry_max_delay": ("lost", "max_delay"),
}
_LIMIT_KEYS = LIMIT_KEYS
RESET_KEY = "retry_reset_after"
#: Every lifecycle option (:data:`zkstore.jobs.runoptions.LIFECYCLE_KEYS`), each of which
#: :meth:`Lifecycle.with_options` reads.
SUMMARY_KEYS = frozenset(LIFECYCLE_KEYS)


@dataclass(frozen=True)
class Lifecycle:
    """How a job is paced, limited and reported on: its retry policy, its limits, and the URL
    its events are POSTed to (besides the daemon's ``--notify``)."""

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    limits: Limits = field(default_factory=Limits)
    notify: str | None = None

    def __post_init__(self) -> None:
        if self.notify is not None:
            problem = url_problem(self.notify)
            if problem is not None:
                raise ConfigError(f"--notify: {problem}")

    def summary(self) -> dict[str, SummaryValue]:
        """The summary keys of what differs from the defaults."""
        default = Lifecycle()
        found: dict[str, SummaryValue] = {}
        for key, (part, name) in _BACKOFF_KEYS.items():
            value = getattr(getattr(self.retry, part), name)
            if value != getattr(getattr(default.retry, part), name):
                found[key] = value
        if self.retry.reset_after != default.retry.reset_after:
            found[RESET_KEY] = 0 if self.retry.reset_after is None else self.retry.reset_after
        for key in _LIMIT_KEYS:
            value = getattr(self.limits, key)
            if value is not None:
                found[key] = value
        if self.notify is not None:
            found[NOTIFY_KEY] = self.notify
        return found

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> tuple[Lifecycle, list[str]]:
        """The options a summary carries, and what was wrong with it (ignored keys)."""
        problems: list[str] = []
        lifecycle = cls()
        for key in sorted(SUMMARY_KEYS & summary.keys()):
            try:
                lifecycle = lifecycle.with_options(**{key: _number_or_text(summary[key], key)})
            except ConfigError as exc:
                problems.append(f"{key}: {exc}")
        return lifecycle, problems

    def with_options(self, **given: Any) -> Lifecycle:
        """These options with ``given`` ones changed (the summary keys; None: unchanged).
        A limit of 0 turns it off, as does ``retry_reset_after`` 0 and ``notify`` "".
        Raises :class:`ConfigError` naming the option for a value that is not valid."""
        unknown = set(given) - SUMMARY_KEYS
        if unknown:
            raise ConfigError(f"unknown lifecycle options: {', '.join(sorted(unknown))}")
        retry, limits, notify = self.retry, self.limits, self.notify
        backoffs: dict[str, dict[str, Any]] = {"failures": {}, "lost": {}}
        for key, value in given.items():
            if value is None:
                continue
            if key in _BACKOFF_KEYS:
                part, name = _BACKOFF_KEYS[key]
                backoffs[part][name] = _seconds(value, key)
            elif key == RESET_KEY:
                reset = _seconds(value, key)
                retry = replace(retry, reset_after=None if reset == 0 else reset)
            elif key in _LIMIT_KEYS:
                limit = _seconds(value, key)
                changed: dict[str, Any] = {key: None if limit == 0 else limit}
                limits = replace(limits, **changed)
            else:
                notify = str(value) or None
        retry = _with_backoffs(retry, backoffs)
        return Lifecycle(retry=retry, limits=_valid_limits(limits), notify=notify)


def _with_backoffs(retry: RetryPolicy, changes: dict[str, dict[str, Any]]) -> RetryPolicy:
    """``retry`` with its backoffs changed; a delay raised past the max raises the max with
    it only if the max was not given (``--retry-delay 10m`` alone means a 10 minute delay)."""
    parts: dict[str, Backoff] = {}
    for part, given in changes.items():
        current: Backoff = getattr(retry, part)
        fields = dict(given)
        if "delay" in fields and "max_delay" not in fields and fields["delay"] > current.max_delay:
            fields["max_delay"] = fields["delay"]
        try:
            parts[part] = replace(current, **fields)
        except ConfigError as exc:
            prefix = "lost " if part == "lost" else ""
            raise ConfigError(f"{prefix}{exc}") from None
    return replace(retry, failures=parts["failures"], lost=parts["lost"])


def _valid_limits(limits: Limits) -> Limits:
    return replace(limits)  # checked again, against its least progress timeout


def _seconds(value: Any, key: str) -> float:
    """A non-negative number of seconds (or, for the jitter, a fraction)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        what = "a fraction" if key == "retry_jitter" else "a duration"
        raise ConfigError(f"--{key.replace('_', '-')} must be {what}, not {value!r:.40}")
    return float(value)


def _number_or_text(value: Any, key: str) -> Any:
    if key == NOTIFY_KEY and not isinstance(value, str):
        raise ConfigError("not a URL")
    return value
