"""A schedule's records in ZooKeeper: its spec (with its definition's handle) and its state.

::

    R/schedules/<name>          JSON ScheduleSpec: when (cron or every, time zone, bounds), the
                                policies (concurrency, catchup, grace), paused, the schedule it
                                chains after, the handle of its definition (the job options and
                                run options of submit are in that definition, as for a job), and
                                the last :data:`CHANGES_LIMIT` changes (``schedules update``:
                                when, by whom, what). Written by the command line (create,
                                update, pause, resume: compare-and-set).
    R/schedules/<name>/state    JSON ScheduleState: the newest window decided, the newest run,
                                counts, and the last :data:`HISTORY_LIMIT` decisions (fired with
                                the job id, skipped with why, missed). Written by the leader
                                only, in the transaction that fires a window (fenced).

The history lives in ZooKeeper, in the state node, because it must change in the same
transaction as the fire that it records: a window's run and its history entry exist together or
not at all. It is bounded (:data:`HISTORY_LIMIT` entries of at most :data:`MAX_REASON_CHARS`
characters of reason: under 40 KB at worst, a few KB usually); windows missed or skipped in a
row are one entry with a count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from typing import Any, ClassVar

from zkstore.config import validate_id
from zkstore.errors import ConfigError, CorruptHandle
from zkstore.records.handle import Handle
from zkstore.records.record import EPOCH, MAX_FIELD_INT, Record
from zkstore.records.strict import (
    check_text,
    escape_control,
    optional_second_text,
    parse_time,
    second_text,
    time_text,
    to_millisecond,
    to_second,
)
from zkstore.schedules.runs import validate_name
from zkstore.schedules.timing import (
    MAX_EVERY_SECONDS,
    Timing,
    ceil_second,
    parse_cron,
    parse_timezone,
)

__all__ = [
    "ALL",
    "ALLOW",
    "CHANGES_LIMIT",
    "CONCURRENCY",
    "DEFAULT_CATCHUP_MAX",
    "DEFAULT_GRACE",
    "FIRED",
    "FORBID",
    "HISTORY_LIMIT",
    "LATEST",
    "MAX_CATCHUP",
    "MAX_CATCHUP_MAX",
    "MAX_GRACE",
    "MAX_REASON_CHARS",
    "MISSED",
    "NONE",
    "REPLACE",
    "SKIPPED",
    "Change",
    "HistoryEntry",
    "ScheduleSpec",
    "ScheduleState",
    "catchup_count",
    "parse_catchup",
]

ALLOW, FORBID, REPLACE = "allow", "forbid", "replace"
CONCURRENCY = (ALLOW, FORBID, REPLACE)
NONE, LATEST, ALL = "none", "latest", "all"
#: ``--catchup N`` runs at most this many late windows.
MAX_CATCHUP = 1000
#: ``--catchup all`` runs at most this many late windows, unless the schedule says otherwise
#: (``--catchup-max``, at most :data:`MAX_CATCHUP_MAX`): the older ones are recorded missed.
DEFAULT_CATCHUP_MAX = 1000
MAX_CATCHUP_MAX = 10_000
#: A window fired at most this long after its time is on time, whatever ``--catchup`` says.
DEFAULT_GRACE = 60
MAX_GRACE = 86400

FIRED, SKIPPED, MISSED = "fired", "skipped", "missed"
HISTORY_LIMIT = 50
MAX_REASON_CHARS = 300
#: A spec keeps its newest changes (``schedules update``), each said in at most
#: :data:`MAX_REASON_CHARS` characters: at most about 8 KB.
CHANGES_LIMIT = 20


def parse_catchup(text: str) -> str:
    """``--catchup``: none, latest, all, or a number of late windows (1-1000)."""
    value = str(text).strip().lower()
    if value in (NONE, LATEST, ALL):
        return value
    if value.isdigit() and 1 <= int(value) <= MAX_CATCHUP:
        return str(int(value))
    raise ConfigError(f"--catchup is none, latest, all or a number of windows (1-{MAX_CATCHUP})")


def catchup_count(catchup: str) -> int | None:
    """How many late windows the policy runs at most: 0 (none), 1 (latest), N, None (all)."""
    if catchup == ALL:
        return None
    return {NONE: 0, LATEST: 1}[catchup] if catchup in (NONE, LATEST) else int(catchup)


@dataclass(frozen=True)
class ScheduleSpec(Record):
    """``R/schedules/<name>``: what the schedule runs (its definition's handle) and when."""

    name: str = ""
    created: datetime = EPOCH
    definition: Handle | None = None
    cron: str | None = None
    every: int | None = None
    timezone: str = "UTC"
    concurrency: str = ALLOW
    catchup: str = LATEST
    grace: int = DEFAULT_GRACE
    start_at: datetime | None = None
    end_at: datetime | None = None
    paused: bool = False
    #: the last pause: windows from ``paused_at`` until ``resumed_at`` are skipped (paused)
    paused_at: datetime | None = None
    resumed_at: datetime | None = None
    #: each run waits for this schedule's run of the same window to succeed
    after_schedule: str | None = None
    #: ``--catchup all`` fires at most this many late windows (None: the default, 1000; a
    #: daemon older than the field ignores it and fires them all)
    catchup_max: int | None = None
    #: the newest :data:`CHANGES_LIMIT` changes, oldest first (``schedules update``); a reader
    #: older than the field ignores it (a record's unknown fields are ignored)
    changes: tuple[Change, ...] = ()

    optional = frozenset(
        {
            "cron",
            "every",
            "timezone",
            "concurrency",
            "catchup",
            "grace",
            "start_at",
            "end_at",
            "paused",
            "paused_at",
            "resumed_at",
            "after_schedule",
            "catchup_max",
            "changes",
        }
    )
    times = frozenset({"created", "start_at", "end_at", "paused_at", "resumed_at"})
    seconds = frozenset({"start_at", "end_at", "paused_at", "resumed_at"})
    choices = {"concurrency": CONCURRENCY}
    handles = frozenset({"definition"})

    @classmethod
    def _values(cls, raw: dict[str, Any]) -> dict[str, Any]:
        values = super()._values({k: v for k, v in raw.items() if k != "changes"})
        changes = raw.get("changes")
        if changes is not None:
            if not isinstance(changes, list) or len(changes) > CHANGES_LIMIT:
                raise ValueError(f"changes is not a list of at most {CHANGES_LIMIT} entries")
            values["changes"] = tuple(Change.parse(entry) for entry in changes)
        return values

    def to_bytes(self) -> bytes:
        data = {k: v for k, v in self.as_dict().items() if k not in ("version", "changes")}
        if self.changes:
            data["changes"] = [change.to_json() for change in self.changes]
        return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()

    def changed(self, change: Change) -> ScheduleSpec:
        """This spec with ``change`` recorded (the oldest dropped past the limit)."""
        return replace(self, changes=(*self.changes, change)[-CHANGES_LIMIT:])

    @property
    def catchup_limit(self) -> int:
        """The most late windows ``--catchup all`` fires."""
        return DEFAULT_CATCHUP_MAX if self.catchup_max is None else self.catchup_max

    @property
    def handle(self) -> Handle:
        """The handle of the schedule's definition (parsed with the record); raises
        :class:`CorruptHandle` for a spec that has none."""
        if self.definition is None:
            raise CorruptHandle(f"schedule {self.name}: no definition handle")
        return self.definition

    def timing(self) -> Timing:
        """The schedule's windows (:class:`ConfigError` if its time zone is unknown here)."""
        start = (
            self.start_at
            if self.start_at is not None
            else ceil_second(self.created) + timedelta(seconds=self.every or 0)
        )
        return Timing(
            start=ceil_second(start),
            cron=self.cron,
            every=self.every,
            zone=parse_timezone(self.timezone),
            end=None if self.end_at is None else ceil_second(self.end_at),
        )

    def paused_during(self, window: datetime) -> bool:
        """True if ``window`` falls in the schedule's last pause (or its current one)."""
        if self.paused_at is None or window < self.paused_at:
            return False
        if self.paused:
            return True
        return self.resumed_at is not None and window < self.resumed_at

    def problem(self) -> str | None:
        try:
            validate_name(self.name)
            if self.definition is None:
                return "no definition handle"
            if (self.cron is None) == (self.every is None):
                return "neither or both of cron and every"
            if self.cron is not None and parse_cron(self.cron) != self.cron:
                return "the cron expression is not in its normal form"
            if self.every is not None and not 1 <= self.every <= MAX_EVERY_SECONDS:
                return "every is out of range"
            parse_catchup(self.catchup)
            if self.catchup != parse_catchup(self.catchup):
                return "catchup is not in its normal form"
            if not 0 <= self.grace <= MAX_GRACE:
                return "grace is out of range"
            if self.catchup_max is not None and not 1 <= self.catchup_max <= MAX_CATCHUP_MAX:
                return "catchup_max is out of range"
            if self.after_schedule is not None:
                validate_name(self.after_schedule)
            timing = self.timing()
        except (ConfigError, CorruptHandle) as exc:
            return str(exc)
        if timing.end is not None and timing.end <= timing.start:
            return "it ends before it starts"
        if self.paused and self.paused_at is None:
            return "paused without paused_at"
        return None


@dataclass(frozen=True)
class Change:
    """One change of a schedule (``schedules update``): when, by whom, and what changed
    (``every: 15s -> 30s; timeout: - -> 1m``), in at most :data:`MAX_REASON_CHARS`
    characters."""

    at: datetime
    by: str
    what: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", to_millisecond(self.at))  # what it reads back
        for name in ("by", "what"):
            clean = escape_control(getattr(self, name))
            if len(clean) > MAX_REASON_CHARS:
                clean = clean[: MAX_REASON_CHARS - 3] + "..."
            object.__setattr__(self, name, clean)

    def to_json(self) -> dict[str, Any]:
        return {"at": time_text(self.at), "by": self.by, "what": self.what}

    @classmethod
    def parse(cls, raw: Any) -> Change:
        """Strictly; :class:`ValueError` saying why not."""
        if not isinstance(raw, dict) or set(raw) != {"at", "by", "what"}:
            raise ValueError("a change is not an object of at, by and what")
        for key in ("by", "what"):
            value = raw[key]
            if not isinstance(value, str) or len(value) > MAX_REASON_CHARS:
                raise ValueError(f"a change's {key} is not text of at most {MAX_REASON_CHARS}")
            check_text(value, f"a change's {key}")
        return cls(parse_time(raw["at"]), raw["by"], raw["what"])


@dataclass(frozen=True)
class HistoryEntry:
    """One decision about one window, or about several in a row (``count`` of them, from
    ``window`` to ``through``): fired (``job``), skipped (``reason``) or missed."""

    window: datetime
    outcome: str
    job: str | None = None
    reason: str | None = None
    through: datetime | None = None
    count: int = 1

    def __post_init__(self) -> None:
        # what it reads back: windows are stored to the second
        object.__setattr__(self, "window", to_second(self.window))
        if self.through is not None:
            object.__setattr__(self, "through", to_second(self.through))
        if self.reason is not None:
            clean = escape_control(self.reason)
            if len(clean) > MAX_REASON_CHARS:
                clean = clean[: MAX_REASON_CHARS - 3] + "..."
            object.__setattr__(self, "reason", clean)

    @property
    def last(self) -> datetime:
        """The newest window the entry decides."""
        return self.window if self.through is None else self.through

    def to_json(self) -> dict[str, Any]:
        # flat fields: no deep copy (asdict's), a state writes 50 of these at each fire
        found = {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}
        found["window"] = second_text(self.window)
        if self.through is not None:
            found["through"] = second_text(self.through)
        return found

    @classmethod
    def parse(cls, raw: Any) -> HistoryEntry:
        """Strictly; :class:`ValueError` saying why not."""
        if not isinstance(raw, dict):
            raise ValueError("a history entry is not an object")
        known = {f.name for f in fields(cls)}
        raw = {k: v for k, v in raw.items() if k in known}  # a newer writer's: ignored
        for key in ("window", "through"):
            if raw.get(key) is not None:
                raw[key] = parse_time(raw[key])
        if raw.get("window") is None:
            raise ValueError("a history entry has no window")
        if raw.get("outcome") not in (FIRED, SKIPPED, MISSED):
            raise ValueError("a history entry's outcome is unknown")
        count = raw.get("count", 1)
        if type(count) is not int or not 1 <= count <= MAX_FIELD_INT:
            raise ValueError("a history entry's count is out of range")
        for key in ("job", "reason"):
            value = raw.get(key)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"a history entry's {key} is not text")
            if isinstance(value, str):
                check_text(value, f"a history entry's {key}")
        if raw.get("job") is not None:
            _check_job_id(raw["job"])
        reason = raw.get("reason")
        if reason is not None and len(reason) > MAX_REASON_CHARS:
            raise ValueError("a history entry's reason is too long")
        return cls(**raw)


def _check_job_id(value: str) -> None:
    """A job id read back: a bad one makes the record garbage (ValueError, which the parser turns
    into CorruptRecord), not a usage error of whoever reads it."""
    try:
        validate_id(value, "job id")
    except ConfigError as exc:
        raise ValueError(str(exc)) from exc


@dataclass(frozen=True)
class ScheduleState(Record):
    """``R/schedules/<name>/state``: what the leaders decided, written by them only (fenced).

    ``last`` is the newest window decided (every window up to it was fired, skipped or missed);
    ``last_run`` the job id of the newest fired run (the "previous run" of the concurrency
    policy); ``history`` the newest :data:`HISTORY_LIMIT` decisions, oldest first.
    """

    updated: datetime = EPOCH
    last: datetime | None = None
    last_run: str | None = None
    fired: int = 0
    skipped: int = 0
    missed: int = 0
    history: tuple[HistoryEntry, ...] = ()

    optional = frozenset({"last", "last_run", "fired", "skipped", "missed", "history"})
    times = frozenset({"updated", "last"})
    seconds = frozenset({"updated", "last"})
    counters: ClassVar[dict[str, str]] = {FIRED: "fired", SKIPPED: "skipped", MISSED: "missed"}

    @classmethod
    def _values(cls, raw: dict[str, Any]) -> dict[str, Any]:
        rest = {k: v for k, v in raw.items() if k != "history"}
        values = super()._values(rest)
        history = raw.get("history")
        if history is not None:
            if not isinstance(history, list) or len(history) > HISTORY_LIMIT:
                raise ValueError(f"history is not a list of at most {HISTORY_LIMIT} entries")
            values["history"] = tuple(HistoryEntry.parse(entry) for entry in history)
        if values.get("last_run") is not None:
            _check_job_id(values["last_run"])
        return values

    def to_bytes(self) -> bytes:
        data = {k: v for k, v in self.as_dict().items() if k != "version"}
        return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()

    def as_dict(self) -> dict[str, Any]:
        # flat fields: no deep copy (asdict's) of the 50 history entries
        return {
            "version": self.version,
            "updated": second_text(self.updated),
            "last": optional_second_text(self.last),
            "last_run": self.last_run,
            **{name: getattr(self, name) for name in self.counters.values()},
            "history": [entry.to_json() for entry in self.history],
        }

    def recording(self, entries: tuple[HistoryEntry, ...], now: datetime) -> ScheduleState:
        """This state with ``entries`` decided (oldest first, each newer than :attr:`last`):
        ``last`` moved to the newest, counts and history updated, ``last_run`` the newest
        fired run."""
        counts = {name: getattr(self, name) for name in self.counters.values()}
        last_run = self.last_run
        for entry in entries:
            counts[self.counters[entry.outcome]] += entry.count
            if entry.outcome == FIRED:
                last_run = entry.job
        newest = entries[-1].last if entries else self.last
        return replace(
            self,
            updated=now,
            last=newest,
            last_run=last_run,
            history=(*self.history, *entries)[-HISTORY_LIMIT:],
            **{name: min(value, MAX_FIELD_INT) for name, value in counts.items()},
        )
