"""The small JSON records a job keeps in ZooKeeper, as frozen dataclasses with their version.

Every record is parsed strictly: anything that is not what its writer would have written raises
:class:`~zkstore.errors.CorruptRecord` naming the path. ``version`` is the znode version the
record was read at (``None`` for a record not read from ZooKeeper); updates pass it back.

Why one module: it is the wire format of a job's small ZooKeeper records, each parsed by the
same strict rules (:mod:`zkstore.strict`) and read side by side by the snapshot; one place to
see what every node holds.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from zkstore import protocol
from zkstore.errors import CorruptHandle, CorruptRecord
from zkstore.handle import Handle, ZnodeStatLike
from zkstore.jobs.states import (
    ATTEMPT_OUTCOMES,
    CLEAN,
    DIRTY,
    END_REASONS,
    FAILED,
    OUTCOMES,
    PENDING,
    STATUS_STATES,
)
from zkstore.strict import (
    MAX_INT,
    check_text,
    escape_control,
    load_object,
    parse_time,
    second_text,
    time_text,
    to_millisecond,
    to_second,
)
from zkstore.zk import ZooKeeper

__all__ = [
    "EPOCH",
    "LABEL",
    "MAX_CONTROL_BYTES",
    "MAX_ERROR_CHARS",
    "MAX_FIELD_INT",
    "MAX_RECORD_BYTES",
    "Assignment",
    "CancelRequest",
    "ControlObject",
    "DrainMark",
    "JobResult",
    "JobStatus",
    "LeaderInfo",
    "MemberInfo",
    "Outcome",
    "QuarantineEntry",
    "Record",
    "RunningInfo",
    "SparkApp",
    "check_scalars",
    "read_record",
    "short_error",
]

R = TypeVar("R", bound="Record")

#: A record is a few hundred bytes; ZooKeeper's own bound on what we write is 64 KB.
MAX_RECORD_BYTES = 64 * 1024

#: Every integer field of a record (an attempt, a count, a pid, a znode version) fits in 32
#: bits, as ZooKeeper's own versions do: a larger one is garbage (a version past it breaks
#: kazoo's connection when it is sent back, a pid past it makes ``os.kill`` raise). A field that
#: may legitimately be wider (a time in milliseconds) is named in its record's ``wide``.
MAX_FIELD_INT = 2**31 - 1

MAX_ERROR_CHARS = 2000

#: A control object (``R/jobs/<job>/control``) is at most this big.
MAX_CONTROL_BYTES = 16 * 1024

#: The default of a record's time field (a record read always has its own).
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: A daemon's label key or value (``--label key=value``).
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,62}")


def short_error(message: str | None) -> str | None:
    """An error message cut to a size that fits a record comfortably."""
    if message is None or len(message) <= MAX_ERROR_CHARS:
        return message
    return message[: MAX_ERROR_CHARS - 15] + "... (truncated)"


@dataclass(frozen=True)
class Record:
    """Base of the JSON records: strict parsing, compact encoding, the version carried along."""

    version: int | None

    #: fields that may be missing or null in the JSON
    optional: ClassVar[frozenset[str]] = frozenset()
    #: fields holding timestamps, checked to parse; a field annotated ``datetime`` holds the
    #: parsed time (converted here, at the boundary: stored as :func:`~zkstore.strict.
    #: time_text`), one annotated ``str`` the text as stored
    times: ClassVar[frozenset[str]] = frozenset()
    #: time fields stored to the whole second (:func:`~zkstore.strict.second_text`: a
    #: schedule's windows and bounds), not to the millisecond
    seconds: ClassVar[frozenset[str]] = frozenset()
    #: allowed values of the ``state``/``outcome`` fields, when they have them
    choices: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: text fields that may hold newlines (error messages and tracebacks)
    multiline: ClassVar[frozenset[str]] = frozenset()
    #: the most bytes a node of this kind may hold
    max_bytes: ClassVar[int] = MAX_RECORD_BYTES
    #: integer fields bounded by the parser's 64 bits only, not :data:`MAX_FIELD_INT`
    wide: ClassVar[frozenset[str]] = frozenset()
    #: fields stored under another JSON name (the name records had before the code said
    #: ``daemon_id`` everywhere): read and written under that name, so that every version
    #: of zkstore reads what every other wrote
    stored: ClassVar[dict[str, str]] = {}
    #: fields holding a handle kept inside the record: stored as the handle's JSON object,
    #: held as a :class:`~zkstore.handle.Handle` (parsed once, here)
    handles: ClassVar[frozenset[str]] = frozenset()

    def __post_init__(self) -> None:
        # Text that came from elsewhere (an exception's message, a --reason) may hold control
        # characters; escape them here so that what we write always parses back.
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str):
                clean = escape_control(value, multiline=f.name in self.multiline)
                if clean != value:
                    object.__setattr__(self, f.name, clean)
            elif isinstance(value, datetime) and f.name in self.times:
                # what the record holds is what it reads back: its stored precision
                kept = to_second(value) if f.name in self.seconds else to_millisecond(value)
                if kept != value:
                    object.__setattr__(self, f.name, kept)

    def to_bytes(self) -> bytes:
        data = {self.stored.get(k, k): v for k, v in self.as_dict().items() if k != "version"}
        return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()

    def as_dict(self) -> dict[str, Any]:
        """The record's fields as JSON values (a kept handle as its JSON object)."""
        values = asdict(self)
        for name in self.times:
            if isinstance(values.get(name), datetime):
                text = second_text if name in self.seconds else time_text
                values[name] = text(values[name])
        for name in self.handles:
            handle = getattr(self, name)
            values[name] = handle.record() if isinstance(handle, Handle) else None
        return values

    @classmethod
    def from_znode(cls: type[R], data: bytes, stat: ZnodeStatLike | None, path: str) -> R:
        """Parse strictly (see :mod:`zkstore.strict`); anything else raises
        :class:`~zkstore.errors.CorruptRecord` naming ``path``."""
        try:
            raw = load_object(data, max_bytes=cls.max_bytes)
        except ValueError as exc:
            raise CorruptRecord(f"{path}: not a valid {cls.__name__} record ({exc})") from None
        protocol.check_record(raw, path)  # a newer writer's record: not garbage
        try:
            values = cls._values(raw)
        except ValueError as exc:
            raise CorruptRecord(f"{path}: not a valid {cls.__name__} record ({exc})") from None
        record = cls(version=stat.version if stat is not None else None, **values)
        problem = record.problem()
        if problem is not None:
            raise CorruptRecord(f"{path}: not a valid {cls.__name__} record ({problem})")
        return record

    def problem(self) -> str | None:
        """What is wrong with the record beyond its fields' types (a record with nested
        values checks them here), or None."""
        return None

    @classmethod
    def _values(cls, raw: dict[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name == "version":
                continue
            value = raw.get(cls.stored.get(f.name, f.name))
            if value is None:
                if f.name not in cls.optional:
                    raise ValueError(f"missing {cls.stored.get(f.name, f.name)!r}")
                continue  # the field's default
            if f.name in cls.handles or (f.name in cls.times and "datetime" in str(f.type)):
                values[f.name] = cls._converted(f.name, value)
                continue
            if not _matches(value, str(f.type)):
                raise ValueError(f"{f.name!r} has the wrong type")
            if f.name in cls.choices and value not in cls.choices[f.name]:
                raise ValueError(f"{f.name!r} is {value!r:.40}")
            elif f.name in cls.times:
                parse_time(value)
            elif isinstance(value, int) and not 0 <= value <= cls._int_bound(f.name):
                raise ValueError(f"{f.name!r} is out of range")
            elif isinstance(value, str):
                check_text(value, repr(f.name), multiline=f.name in cls.multiline)
            values[f.name] = value
        return values

    @classmethod
    def _converted(cls, name: str, value: Any) -> Any:
        """A kept handle or a time, from its JSON value to what the record holds; ValueError
        for garbage (a newer format's handle raises :class:`~zkstore.errors.NewerRecord`)."""
        if name in cls.handles:
            try:
                return Handle.from_record(value, f"the kept {name}")
            except CorruptHandle as exc:
                raise ValueError(str(exc)) from None
        if not isinstance(value, str):
            raise ValueError(f"{name!r} has the wrong type")
        return parse_time(value)

    @classmethod
    def _int_bound(cls, name: str) -> int:
        return MAX_INT if name in cls.wide else MAX_FIELD_INT

    def with_version(self: R, version: int | None) -> R:
        return replace(self, version=version)


def _matches(value: Any, annotation: str) -> bool:
    """True if a JSON value fits a field annotation such as ``str | None`` or ``dict[str, Any]``."""
    allowed = {part.strip().split("[", 1)[0] for part in annotation.split("|")}
    kind = {bool: "bool", int: "int", str: "str", dict: "dict", list: "list"}.get(type(value))
    return kind in allowed


@dataclass(frozen=True)
class JobStatus(Record):
    """``R/jobs/<job>/status``, written by the leader only.

    While an attempt is live the leader leaves ``status`` alone, so its version identifies the
    attempt: the driver's writes are fenced on it (together with its ``running`` node).
    ``daemon_id`` is the daemon the current attempt was placed on (stored as ``member``),
    ``leader_id`` the leader that wrote the status (stored as ``leader``); ``reason`` says why a
    job that is not running waits (no free driver slot, no member with the labels it requires).
    """

    state: str = PENDING
    attempt: int = 0
    failures: int = 0
    lost: int = 0
    updated: datetime = EPOCH
    last_error: str | None = None
    not_before: datetime | None = None
    leader_id: str | None = None
    daemon_id: str | None = None
    reason: str | None = None
    #: consecutive failures / lost attempts since the last stable run (the retry pacing's
    #: streaks, :class:`zkstore.lifecycle.retry_backoff.Streak`); missing: as ``failures``/``lost``
    streak_failures: int | None = None
    streak_lost: int | None = None
    #: how the leader ended the last attempt (TIMED_OUT, STUCK, STOPPED), and why
    ended: str | None = None
    ended_detail: str | None = None

    optional = frozenset(
        {
            "lost",
            "last_error",
            "not_before",
            "leader_id",
            "daemon_id",
            "reason",
            "streak_failures",
            "streak_lost",
            "ended",
            "ended_detail",
        }
    )
    stored = {"leader_id": "leader", "daemon_id": "member"}
    multiline = frozenset({"last_error", "ended_detail"})
    times = frozenset({"updated", "not_before"})
    choices = {"state": (*STATUS_STATES, *OUTCOMES), "ended": END_REASONS}


@dataclass(frozen=True)
class RunningInfo(Record):
    """``R/jobs/<job>/running``: EPHEMERAL, held by the live driver of ``attempt``.

    ``start_ticks`` (when the process started, field 22 of ``/proc/<pid>/stat``) and ``boot_id``
    make host and pid name one process for ever (a pid is reused, never with the same start
    time in the same boot): how a daemon restarted on that host recognises its live drivers.
    """

    attempt: int = 0
    host: str = ""
    pid: int = 0
    started: datetime = EPOCH
    log: str | None = None
    start_ticks: int | None = None
    boot_id: str | None = None

    optional = frozenset({"log", "start_ticks", "boot_id"})
    #: clock ticks since boot: past 2**31 after 248 days of uptime at 100 Hz
    wide = frozenset({"start_ticks"})
    times = frozenset({"started"})


@dataclass(frozen=True)
class Outcome(Record):
    """``R/jobs/<job>/outcome``: how ``attempt`` ended, written by its driver as it exits."""

    attempt: int = 0
    outcome: str = FAILED
    finished: datetime = EPOCH
    error: str | None = None
    host: str | None = None
    log: str | None = None
    #: when the attempt's driver took ``running`` (its ``running.started``): how long it ran
    started: datetime | None = None
    #: the driver JVM the attempt had and why (``warm: ...``, ``cold: ...``, ``none: ...``):
    #: kept by the leader in the job's history; a reader of an older release ignores it
    jvm: str | None = None

    optional = frozenset({"error", "host", "log", "started", "jvm"})
    times = frozenset({"finished", "started"})
    choices = {"outcome": ATTEMPT_OUTCOMES}
    multiline = frozenset({"error"})


@dataclass(frozen=True)
class CancelRequest(Record):
    """``R/jobs/<job>/cancel``: somebody asked the job to stop."""

    requested: datetime = EPOCH
    by: str | None = None
    reason: str | None = None

    optional = frozenset({"by", "reason"})
    times = frozenset({"requested"})
    multiline = frozenset({"reason"})


@dataclass(frozen=True)
class JobResult(Record):
    """``R/results/<job>``: the durable end of a job (FLIP-194's job result store, in ZK).

    ``logs_until`` is written with CLEAN when the job's logs are kept for a retention period,
    and dropped once they are removed: a CLEAN result without it owns nothing in storage.
    """

    job_id: str = ""
    state: str = DIRTY
    outcome: str = FAILED
    attempts: int = 0
    finished: datetime = EPOCH
    error: str | None = None
    name: str | None = None
    #: what the job's handle said (kind, entry, submitted, max_attempts...): the handle is gone
    #: once the job is cleaned up, the result stays
    summary: dict[str, Any] | None = None
    #: the cancel request (requested, by, reason) of a cancelled job
    cancel: dict[str, Any] | None = None
    #: where the log of the last attempt is (a URI)
    log: str | None = None
    #: set while the job's driver logs are kept in storage after its cleanup: until when
    logs_until: datetime | None = None
    #: the artifacts a SUCCEEDED job marked to keep (name: URI), left in place by its cleanup
    outputs: dict[str, Any] | None = None
    #: the daemon the last attempt was placed on (``jobs list`` keeps its DAEMON once finished)
    daemon: str | None = None
    #: the job's counters at its end: attempts that failed, attempts lost to the infrastructure
    failures: int | None = None
    lost: int | None = None

    optional = frozenset(
        {
            "error",
            "name",
            "summary",
            "cancel",
            "log",
            "logs_until",
            "outputs",
            "daemon",
            "failures",
            "lost",
        }
    )
    times = frozenset({"finished", "logs_until"})
    choices = {"state": (DIRTY, CLEAN), "outcome": OUTCOMES}
    multiline = frozenset({"error"})

    @classmethod
    def _values(cls, raw: dict[str, Any]) -> dict[str, Any]:
        values = super()._values(raw)
        for name, uri in (values.get("outputs") or {}).items():
            if not isinstance(uri, str):
                raise ValueError(f"output {name!r:.40} is not a URI")
            check_text(name, "an output's name")
            check_text(uri, f"output {name!r:.40}")
        check_scalars(values.get("summary") or {}, "summary")
        if values.get("cancel") is not None:
            CancelRequest._values(values["cancel"])
        return values


@dataclass(frozen=True)
class QuarantineEntry(Record):
    """``R/quarantine/<job>``: a job that cannot be run, why, and its handle for forensics."""

    job_id: str = ""
    reason: str = ""
    since: datetime = EPOCH
    handle: Handle | None = None
    raw: str | None = None

    optional = frozenset({"handle", "raw"})
    times = frozenset({"since"})
    multiline = frozenset({"reason", "raw"})
    handles = frozenset({"handle"})


@dataclass(frozen=True)
class MemberInfo(Record):
    """``R/members/<id>``: EPHEMERAL, one per daemon, held in the daemon's own session."""

    daemon_id: str = ""
    host: str = ""
    pid: int = 0
    slots: int = 1
    started: datetime = EPOCH
    labels: dict[str, Any] | None = None
    #: the daemon process's start time and boot (see :class:`RunningInfo`)
    start_ticks: int | None = None
    boot_id: str | None = None
    #: the fleet protocols the daemon serves (:mod:`zkstore.protocol`) and its release; a
    #: record without them is a daemon older than the fleet protocol: protocol 1
    speaks: int | None = None
    serves_from: int | None = None
    release: str | None = None
    #: the digest of the settings the daemon would enforce as a leader
    #: (:func:`zkstore.cluster.cluster_settings.settings_digest`); a daemon older than them has none
    settings: str | None = None
    #: its driver users out of its pool (``--driver-user``), name -> why (a process left
    #: running as it, or what could not be removed of what a driver left); read by people
    #: only (``daemons list``): a reader of an older release ignores it
    users_out: dict[str, Any] | None = None
    #: the daemon's own memory as it last reported it (:mod:`recovery.shared.memory`): its
    #: resident set in bytes and the blocks its Python allocator holds; an older daemon's
    #: record has neither, and an older reader ignores them
    rss: int | None = None
    heap_blocks: int | None = None
    #: its warm driver JVMs (``--warm-drivers``) ready for an attempt now, as it last said
    #: (the leader prefers a daemon with one for a job that would take one); and the seconds
    #: (in milliseconds) from its start to its first one ready. None: no warm drivers (not
    #: yet), or a daemon older than them (an older reader ignores both)
    warm_ready: int | None = None
    warm_first_ms: int | None = None

    optional = frozenset(
        {
            "labels",
            "start_ticks",
            "boot_id",
            "speaks",
            "serves_from",
            "release",
            "settings",
            "users_out",
            "rss",
            "heap_blocks",
            "warm_ready",
            "warm_first_ms",
        }
    )
    wide = frozenset({"start_ticks", "rss", "heap_blocks"})  # see RunningInfo
    times = frozenset({"started"})
    #: (not stored as ``protocol``: that field marks a record written at a newer protocol)
    stored = {"daemon_id": "member_id"}

    @property
    def protocol(self) -> int:
        """The newest fleet protocol this daemon speaks (1 for a daemon older than them)."""
        return self.speaks if self.speaks is not None else 1

    @property
    def min_protocol(self) -> int:
        """The oldest fleet protocol this daemon can serve."""
        return self.serves_from if self.serves_from is not None else 1

    @classmethod
    def _values(cls, raw: dict[str, Any]) -> dict[str, Any]:
        values = super()._values(raw)
        for key, value in (values.get("labels") or {}).items():
            if not isinstance(value, str) or not LABEL.fullmatch(key) or not LABEL.fullmatch(value):
                raise ValueError(f"label {key!r:.40} is not key=value of [A-Za-z0-9._/-]")
        for key, value in (values.get("users_out") or {}).items():
            if not isinstance(value, str):
                raise ValueError(f"users_out {key!r:.40} is not text")
            check_text(key, "a user's name")
            check_text(value, "why a user is out")
        return values


@dataclass(frozen=True)
class Assignment(Record):
    """``R/assignments/<member>/<job>``: the leader placed ``attempt`` of the job on the member.

    Written by the leader in one transaction with the status (STARTING, the member, a new
    version); the driver's ``running`` transaction checks that status version, so a member that
    launches an attempt it no longer owns is refused by ZooKeeper. ``exited`` is how the driver
    process ended, as its member saw it.
    """

    job_id: str = ""
    daemon_id: str = ""
    attempt: int = 0
    status_version: int = 0
    assigned: datetime = EPOCH
    exited: str | None = None

    optional = frozenset({"exited"})
    times = frozenset({"assigned"})
    stored = {"daemon_id": "member_id"}


@dataclass(frozen=True)
class SparkApp(Record):
    """``R/jobs/<job>/spark``: EPHEMERAL, the Spark application of the live driver of
    ``attempt``, written by that driver (fenced on the attempt) once its SparkContext is up."""

    attempt: int = 0
    app_id: str = ""
    master: str = ""
    ui: str | None = None
    started: datetime = EPOCH
    #: the driver JVM the attempt got and why (``warm: ...``, ``cold: ...``); optional, read
    #: by nothing but people (a reader of an older release ignores it)
    jvm: str | None = None

    optional = frozenset({"ui", "jvm"})
    times = frozenset({"started"})


@dataclass(frozen=True)
class ControlObject(Record):
    """``R/jobs/<job>/control``: the desired configuration, a flat JSON object of the job's
    keys (anybody writes it, compare-and-set). Here it is only a JSON object of bounded size
    and depth; each key and value is judged where it is applied (a value the job cannot take is
    rejected with a reason, never a reason to refuse the others)."""

    values: dict[str, Any] = field(default_factory=dict)

    max_bytes = MAX_CONTROL_BYTES

    @classmethod
    def _values(cls, raw: dict[str, Any]) -> dict[str, Any]:
        return {"values": raw}

    def to_bytes(self) -> bytes:
        return json.dumps(self.values, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class LeaderInfo(Record):
    """``R/leader/info``: EPHEMERAL, who leads (``daemon_id``, stored as ``id``; ``host``,
    ``pid``), ``since`` when, its ``contender`` node, and (once its first pass over every job is
    done) when it had ``recovered`` them. Written by the leader, fenced on its contender node."""

    daemon_id: str = ""
    host: str = ""
    pid: int = 0
    since: datetime = EPOCH
    contender: str = ""
    recovered: datetime | None = None

    optional = frozenset({"recovered"})
    times = frozenset({"since", "recovered"})
    stored = {"daemon_id": "id"}


@dataclass(frozen=True)
class DrainMark(Record):
    """``R/drained/<daemon>``: persistent, present while the daemon takes no new attempts
    (``zkstore daemons drain``); only its presence counts, ``since`` is for people."""

    since: datetime = EPOCH

    times = frozenset({"since"})


def check_scalars(values: dict[str, Any], what: str) -> None:
    """Raise :class:`ValueError` unless ``values`` holds JSON scalars only, its texts (keys
    included) without control characters: what a handle's summary holds."""
    for key, value in values.items():
        check_text(key, f"a key of {what}")
        if isinstance(value, dict | list):
            raise ValueError(f"{what} field {key!r:.40} is not a scalar")
        if isinstance(value, str):
            check_text(value, f"{what} field {key!r:.40}")


def read_record(
    zk: ZooKeeper, kind: type[R], path: str, *, timeout: float | None = None
) -> R | None:
    """The one way to read a record: the ``kind`` at ``path`` parsed strictly, or None if the
    node does not exist. Raises :class:`CorruptRecord` (garbage) or
    :class:`~zkstore.errors.StoreUnavailable` (an outage: never taken for absent)."""
    found = zk.get_if_exists(path, timeout=timeout)
    return None if found is None else kind.from_znode(found[0], found[1], path)
