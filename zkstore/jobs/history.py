"""What happened, for people: a job's attempts and the cluster's leaders, in two small records.

``R/jobs/<job>/history`` (:class:`JobHistory`): each attempt of the job, where the leader placed
it, when, and how it ended (succeeded, failed, lost, cancelled, stopped) with the leader's
words; the newest :data:`MAX_ATTEMPTS`. ``R/leader/history`` (:class:`LeaderHistory`): the
newest :data:`MAX_TERMS` leaders (who, since when) and the daemons the leader saw leave the
fleet while attempts were placed on them (since when), until they come back. The job page draws
them (:mod:`recovery.observe.jobpage`).

Only the leader writes them, fenced, each in a transaction of its own **after** the state change
it tells of, and :func:`remember` never raises but :class:`~zkstore.errors.NotLeader`: a record
that is garbage, planted, or lost in an outage costs the page a bar, never a placement or a
leadership. A leader killed between the state change and the history write leaves a gap: an
attempt with no placement (the page draws what the status says of the current one) or with no
end (drawn as "unknown"). Two writes are saved on a job's usual path: a first placement makes
the history in its own transaction (:func:`first_placement_op`; a node there already, which
only a planted one can be, fails it, and the placement is made again without it), and the end
of a finished job's last attempt goes into the copy its cleanup keeps (:func:`with_end`), not
into the record the cleanup deletes. The job's record goes with the job's other records
(:func:`zkstore.cluster.cleanup.clean_up` deletes ``R/jobs/<job>`` whole, after keeping a copy
beside the job's logs).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from zkstore.errors import (
    ConflictError,
    CorruptRecord,
    HandleExists,
    NotLeader,
    VersionConflict,
    ZkStoreError,
)
from zkstore.records.record import Record
from zkstore.records.strict import check_text, parse_time, time_text, to_millisecond
from zkstore.zookeeper.ops import Create, Fence, SetData
from zkstore.zookeeper.retry import RACES

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "CANCELLED",
    "ENDINGS",
    "FAILED",
    "LOST",
    "MAX_ATTEMPTS",
    "MAX_DEPARTED",
    "MAX_TERMS",
    "NOTE_CHARS",
    "PLACED",
    "STOPPED",
    "SUCCEEDED",
    "AttemptEntry",
    "JobHistory",
    "LeaderHistory",
    "first_placement_op",
    "note_attempt",
    "read",
    "remember",
    "with_end",
]

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 100
MAX_TERMS = 50
MAX_DEPARTED = 50
#: The leader's words about an attempt's end, cut to this many characters.
NOTE_CHARS = 300

PLACED = "PLACED"
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
LOST = "LOST"
CANCELLED = "CANCELLED"
STOPPED = "STOPPED"
#: How an attempt ended, as the history says it (PLACED: it has not ended yet).
ENDINGS = (PLACED, SUCCEEDED, FAILED, LOST, CANCELLED, STOPPED)

H = TypeVar("H", bound="Record")


def _cut(text: str | None) -> str | None:
    if text is None:
        return None
    line = text.strip().splitlines()[-1] if text.strip() else ""
    return line if len(line) <= NOTE_CHARS else line[: NOTE_CHARS - 1] + "\u2026"


def _entry_problem(key: str, entry: object, fields: dict[str, tuple[type, bool]]) -> str | None:
    """What is wrong with one entry of a history's map (each field: its type, whether needed);
    its times are checked where they are converted, once (the record's typed view)."""
    if not isinstance(entry, dict):
        return f"entry {key!r:.20} is not an object"
    # A field this code does not know is a newer writer's (zkstore/protocol.py): ignored.
    for name, (kind, needed) in fields.items():
        value = entry.get(name)
        if value is None:
            if needed:
                return f"entry {key!r:.20} lacks {name!r}"
            continue
        if type(value) is not kind:
            return f"entry {key!r:.20}: {name!r} has the wrong type"
        if isinstance(value, str) and name not in _TIMES:
            try:
                check_text(value, repr(name))
            except ValueError as exc:
                return f"entry {key!r:.20}: {exc}"
    return None


#: The fields of a history's entries that hold times.
_TIMES = frozenset({"placed", "ended", "since"})


_ATTEMPT_FIELDS: dict[str, tuple[type, bool]] = {
    "daemon": (str, True),
    "placed": (str, True),
    "ended": (str, False),
    "outcome": (str, True),
    "note": (str, False),
    "definition": (str, False),
    "target": (str, False),
    "jvm": (str, False),
}
_KNOWN = frozenset(_ATTEMPT_FIELDS)
_TERM_FIELDS: dict[str, tuple[type, bool]] = {"leader": (str, True), "since": (str, True)}


@dataclass(frozen=True)
class AttemptEntry:
    """One attempt as the history tells it."""

    attempt: int
    daemon: str
    placed: datetime
    outcome: str = PLACED
    ended: datetime | None = None
    note: str | None = None
    #: the SHA-256 of the definition the attempt was placed with (its payload: ``jobs resume
    #: --definition`` changes it), and what it runs (``etl.py:main``); recorded once the fleet
    #: is at the protocol of :data:`~zkstore.protocol.ATTEMPT_PROVENANCE`
    definition: str | None = None
    target: str | None = None
    #: the driver JVM the attempt had, as its driver reported it with its outcome (``warm:
    #: warm driver w-... (pid ...)``, ``cold: <why>``, ``none: ...``); None when no outcome
    #: said it (a lost attempt, a driver of an older release)
    jvm: str | None = None

    def __post_init__(self) -> None:
        # what it reads back: the history keeps times to the millisecond
        object.__setattr__(self, "placed", to_millisecond(self.placed))
        if self.ended is not None:
            object.__setattr__(self, "ended", to_millisecond(self.ended))

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"daemon": self.daemon, "placed": time_text(self.placed)}
        data["outcome"] = self.outcome
        if self.ended is not None:
            data["ended"] = time_text(self.ended)
        for name in ("note", "definition", "target", "jvm"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        return data

    @classmethod
    def from_json(cls, attempt: int, entry: dict[str, Any]) -> AttemptEntry:
        """The entry of a history read (checked by :meth:`JobHistory.problem`): its times
        parsed here, once."""
        known = {k: v for k, v in entry.items() if k in _ATTEMPT_FIELDS}
        known["placed"] = parse_time(known["placed"])
        if known.get("ended") is not None:
            known["ended"] = parse_time(known["ended"])
        return cls(attempt=attempt, **known)


@dataclass(frozen=True)
class JobHistory(Record):
    """``R/jobs/<job>/history``: ``attempts`` maps each attempt's number (as text) to where
    and when it was placed and how it ended. Written by the leader only."""

    attempts: dict[str, Any] = field(default_factory=dict)

    def problem(self) -> str | None:
        if len(self.attempts) > MAX_ATTEMPTS:
            return f"more than {MAX_ATTEMPTS} attempts"
        for key, entry in self.attempts.items():
            if not key.isdigit() or not 0 < int(key) < 2**31 or key != str(int(key)):
                return f"attempt {key!r:.20} is not a positive number"
            problem = _entry_problem(key, entry, _ATTEMPT_FIELDS)
            if problem is None and entry["outcome"] not in ENDINGS:
                problem = f"entry {key}: outcome {entry['outcome']!r:.20}"
            if problem is not None:
                return problem
        try:
            self._entries  # noqa: B018 (the times, converted once: garbage is found here)
        except ValueError as exc:
            return f"an attempt's time: {exc}"
        return None

    @cached_property
    def _entries(self) -> tuple[AttemptEntry, ...]:
        return tuple(
            AttemptEntry.from_json(int(key), entry)
            for key, entry in sorted(self.attempts.items(), key=lambda item: int(item[0]))
        )

    def entries(self) -> list[AttemptEntry]:
        """The attempts, oldest first (their times converted once, with the record)."""
        return list(self._entries)

    def with_entry(self, entry: AttemptEntry) -> JobHistory:
        """This history with ``entry`` put in (its note cut to :data:`NOTE_CHARS`; the oldest
        attempts dropped past :data:`MAX_ATTEMPTS`): always far under a record's 64 KB."""
        entry = replace(entry, note=_cut(entry.note), jvm=_cut(entry.jvm))
        attempts = {**self.attempts, str(entry.attempt): entry.as_json()}
        for key in sorted(attempts, key=int)[: max(len(attempts) - MAX_ATTEMPTS, 0)]:
            del attempts[key]
        return replace(self, attempts=attempts)


@dataclass(frozen=True)
class LeaderHistory(Record):
    """``R/leader/history``: ``terms`` maps each leader's contender node to who led and since
    when (the newest :data:`MAX_TERMS`); ``departed`` maps a daemon the leader saw leave the
    fleet, while attempts were placed on it, to when (until it joins again)."""

    terms: dict[str, Any] = field(default_factory=dict)
    departed: dict[str, Any] = field(default_factory=dict)

    optional = frozenset({"departed"})

    def problem(self) -> str | None:
        if len(self.terms) > MAX_TERMS or len(self.departed) > MAX_DEPARTED:
            return "too many entries"
        for key, entry in self.terms.items():
            problem = _entry_problem(key, entry, _TERM_FIELDS)
            if problem is not None:
                return problem
            check = _entry_problem(key, {"leader": key}, {"leader": (str, True)})
            if check is not None:
                return check
        for daemon, since in self.departed.items():
            problem = _entry_problem(daemon, {"leader": daemon, "since": since}, _TERM_FIELDS)
            if problem is not None:
                return problem
        try:
            self._leaders, self._departed  # noqa: B018 (converted once: garbage is found here)
        except ValueError as exc:
            return f"a since: {exc}"
        return None

    @cached_property
    def _leaders(self) -> tuple[tuple[datetime, str], ...]:
        return tuple(
            sorted((parse_time(entry["since"]), entry["leader"]) for entry in self.terms.values())
        )

    @cached_property
    def _departed(self) -> dict[str, datetime]:
        return {daemon: parse_time(since) for daemon, since in self.departed.items()}

    def leaders(self) -> list[tuple[datetime, str]]:
        """(since, daemon) of each term, oldest first."""
        return list(self._leaders)

    def departed_since(self) -> dict[str, datetime]:
        """Each daemon seen leaving the fleet (while attempts were placed on it), and when."""
        return dict(self._departed)

    def with_term(self, contender: str, leader: str, since: str) -> LeaderHistory:
        """This term put in (a term already known keeps its ``since``: a leadership revoked
        and granted again on the same contender node is the same term)."""
        if contender in self.terms:
            return self
        terms = {**self.terms, contender: {"leader": leader, "since": since}}
        for key, _ in sorted(terms.items(), key=lambda item: item[1]["since"])[
            : max(len(terms) - MAX_TERMS, 0)
        ]:
            del terms[key]
        return replace(self, terms=terms)

    def with_departed(self, daemons: dict[str, str], back: set[str]) -> LeaderHistory:
        """``daemons`` (id: since) noted as gone (a later leave replaces an earlier one);
        ``back`` (daemons that joined again) removed."""
        departed = {d: t for d, t in self.departed.items() if d not in back}
        departed.update(daemons)
        for key, _ in sorted(departed.items(), key=lambda item: item[1])[
            : max(len(departed) - MAX_DEPARTED, 0)
        ]:
            del departed[key]
        return replace(self, departed=departed)


def read(zk: ZooKeeper, path: str, kind: type[H]) -> H | None:
    """The record at ``path``, None if absent; raises :class:`CorruptRecord` if garbage."""
    found = zk.get_if_exists(path)
    return None if found is None else kind.from_znode(found[0], found[1], path)


def remember(
    zk: ZooKeeper,
    path: str,
    kind: type[H],
    change: Callable[[H], H],
    *,
    fence: Fence,
    what: str,
) -> bool:
    """Read the record at ``path``, apply ``change``, write it back on the version read (a
    garbage record is replaced by ``change`` of an empty one), fenced. True once written.

    Never raises but :class:`NotLeader`: the history is for people, and a write it cannot make
    (an outage, a planted node with children, races that keep being lost) is logged and left.
    """

    def once() -> None:
        found, current, changed = _changed(zk, path, kind, change, what=what)
        if current is not None and changed == current:
            return  # nothing new to tell
        data = changed.to_bytes()
        if found is None:
            zk.commit([Create(path, data)], fence=fence)
        else:
            zk.commit([SetData(path, data, found[1].version)], fence=fence)

    try:
        RACES.call(once, what=what, retry_on=(HandleExists, VersionConflict), path=path)
    except NotLeader:
        raise
    except (ConflictError, ZkStoreError) as exc:
        logger.warning("%s: not recorded (%s)", what, exc)
        return False
    return True


def _changed(
    zk: ZooKeeper, path: str, kind: type[H], change: Callable[[H], H], *, what: str
) -> tuple[tuple[bytes, Any] | None, H | None, H]:
    """The node at ``path`` as read, its record (None: absent or garbage) and ``change`` of
    that record (of an empty one for a node absent or garbage)."""
    found = zk.get_if_exists(path)
    try:
        current = None if found is None else kind.from_znode(found[0], found[1], path)
    except CorruptRecord as exc:
        logger.warning("%s: replacing an unreadable record (%s)", what, exc)
        current = None
    return found, current, change(current if current is not None else kind(version=None))


def first_placement_op(path: str, entry: AttemptEntry) -> Create:
    """The op that makes the history of a job placed for the first time (it has none yet),
    told by ``entry``: committed with the placement, one write instead of two. A history there
    already (planted: a first placement never finds one) fails it; :func:`note_attempt` then
    tells the placement apart."""
    assert entry.outcome == PLACED
    return Create(path, JobHistory(version=None).with_entry(entry).to_bytes())


def with_end(zk: ZooKeeper, path: str, entry: AttemptEntry, *, job_id: str) -> bytes:
    """The job's history with the end ``entry`` put in, as :func:`note_attempt` would write it,
    without writing it: for a cleanup that keeps it beside the logs and deletes the node (a
    write saved). Raises what the read raises."""
    _, _, changed = _changed(
        zk, path, JobHistory, _attempt_change(entry), what=f"history of job {job_id}"
    )
    return changed.to_bytes()


def _attempt_change(entry: AttemptEntry) -> Callable[[JobHistory], JobHistory]:
    """How ``entry`` changes a job's history: a placement drops later attempts (another job's,
    stale); an end keeps its attempt's placement, and is told once."""

    def change(history: JobHistory) -> JobHistory:
        known = history.attempts.get(str(entry.attempt))
        if entry.outcome == PLACED:  # attempts past a new placement are another job's, stale
            stale = [key for key in history.attempts if int(key) > entry.attempt]
            history = replace(
                history, attempts={k: v for k, v in history.attempts.items() if k not in stale}
            )
        merged = entry
        if entry.outcome != PLACED and isinstance(known, dict):
            if known["outcome"] != PLACED:
                return history  # an end is told once (a cancel after a failure changes nothing)
            told = AttemptEntry.from_json(entry.attempt, known)
            merged = replace(
                entry,
                daemon=told.daemon,
                placed=told.placed,
                definition=told.definition,
                target=told.target,
            )
        return history.with_entry(merged)

    return change


def note_attempt(
    zk: ZooKeeper, path: str, entry: AttemptEntry, *, fence: Fence, job_id: str
) -> bool:
    """Put ``entry`` in the job's history: a placement, or the end of an attempt (whose
    placement is kept if the history has it)."""
    return remember(
        zk,
        path,
        JobHistory,
        _attempt_change(entry),
        fence=fence,
        what=f"history of job {job_id} (attempt {entry.attempt} {entry.outcome.lower()})",
    )
