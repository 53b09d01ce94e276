"""The small JSON records a job keeps in ZooKeeper, as frozen dataclasses with their version.

Every record is parsed strictly: anything that is not what its writer would have written raises
:class:`~zkstore.errors.CorruptRecord` naming the path. ``version`` is the znode version the
record was read at (``None`` for a record not read from ZooKeeper); updates pass it back.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar, TypeVar

from zkstore.errors import CorruptRecord
from zkstore.handle import ZnodeStatLike, parse_time

R = TypeVar("R", bound="Record")

MAX_ERROR_CHARS = 2000

# Job states, as the leader records them in ``status``.
PENDING = "PENDING"  # submitted, no attempt running yet
STARTING = "STARTING"  # attempt assigned, driver starting or running (see ``running``)
RESTARTING = "RESTARTING"  # the last attempt failed; the next starts at ``not_before``
# Outcomes, in ``outcome`` (driver) and ``results`` (leader).
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
CANCELLED = "CANCELLED"
BROKEN = "BROKEN"  # the driver could not load the definition: quarantine, do not retry
OUTCOMES = (SUCCEEDED, FAILED, CANCELLED)
DIRTY = "DIRTY"  # result recorded, cleanup not finished
CLEAN = "CLEAN"  # result recorded and every other trace of the job removed


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
    #: fields holding timestamps, checked to parse
    times: ClassVar[frozenset[str]] = frozenset()
    #: allowed values of the ``state``/``outcome`` fields, when they have them
    choices: ClassVar[dict[str, tuple[str, ...]]] = {}

    def to_bytes(self) -> bytes:
        data = {k: v for k, v in asdict(self).items() if k != "version"}
        return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_znode(cls: type[R], data: bytes, stat: ZnodeStatLike | None, path: str) -> R:
        def bad(reason: str) -> CorruptRecord:
            return CorruptRecord(f"{path}: not a valid {cls.__name__} record ({reason})")

        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise bad("not UTF-8 JSON") from None
        if not isinstance(raw, dict):
            raise bad("not a JSON object")
        values: dict[str, Any] = {"version": stat.version if stat is not None else None}
        for f in fields(cls):
            if f.name == "version":
                continue
            value = raw.get(f.name)
            if value is None:
                if f.name not in cls.optional:
                    raise bad(f"missing {f.name!r}")
            elif not _matches(value, str(f.type)):
                raise bad(f"{f.name!r} has the wrong type")
            elif f.name in cls.choices and value not in cls.choices[f.name]:
                raise bad(f"{f.name!r} is {value!r}")
            elif f.name in cls.times:
                try:
                    parse_time(value)
                except ValueError:
                    raise bad(f"{f.name!r} is not a time") from None
            values[f.name] = value
        return cls(**values)

    def with_version(self: R, version: int | None) -> R:
        return replace(self, version=version)


def _matches(value: Any, annotation: str) -> bool:
    """True if a JSON value fits a field annotation such as ``str | None`` or ``dict[str, Any]``."""
    allowed = {part.strip().split("[", 1)[0] for part in annotation.split("|")}
    kind = {bool: "bool", int: "int", str: "str", dict: "dict"}.get(type(value))
    return kind in allowed


@dataclass(frozen=True)
class JobStatus(Record):
    """``R/jobs/<job>/status``, written by the leader only.

    While an attempt is live the leader leaves ``status`` alone, so its version identifies the
    attempt: the driver's writes are fenced on it (together with its ``running`` node).
    """

    state: str = PENDING
    attempt: int = 0
    failures: int = 0
    updated: str = ""
    last_error: str | None = None
    not_before: str | None = None
    leader: str | None = None

    optional = frozenset({"last_error", "not_before", "leader"})
    times = frozenset({"updated", "not_before"})
    choices = {"state": (PENDING, STARTING, RESTARTING, *OUTCOMES)}


@dataclass(frozen=True)
class RunningInfo(Record):
    """``R/jobs/<job>/running``: EPHEMERAL, held by the live driver of ``attempt``."""

    attempt: int = 0
    host: str = ""
    pid: int = 0
    started: str = ""
    log: str | None = None

    optional = frozenset({"log"})
    times = frozenset({"started"})


@dataclass(frozen=True)
class Outcome(Record):
    """``R/jobs/<job>/outcome``: how ``attempt`` ended, written by its driver as it exits."""

    attempt: int = 0
    outcome: str = FAILED
    finished: str = ""
    error: str | None = None
    host: str | None = None
    log: str | None = None

    optional = frozenset({"error", "host", "log"})
    times = frozenset({"finished"})
    choices = {"outcome": (*OUTCOMES, BROKEN)}


@dataclass(frozen=True)
class CancelRequest(Record):
    """``R/jobs/<job>/cancel``: somebody asked the job to stop."""

    requested: str = ""
    by: str | None = None
    reason: str | None = None

    optional = frozenset({"by", "reason"})
    times = frozenset({"requested"})


@dataclass(frozen=True)
class JobResult(Record):
    """``R/results/<job>``: the durable end of a job (FLIP-194's job result store, in ZK)."""

    job_id: str = ""
    state: str = DIRTY
    outcome: str = FAILED
    attempts: int = 0
    finished: str = ""
    error: str | None = None
    name: str | None = None
    #: what the job's handle said (kind, entry, submitted, max_attempts...): the handle is gone
    #: once the job is cleaned up, the result stays
    summary: dict[str, Any] | None = None
    #: the cancel request (requested, by, reason) of a cancelled job
    cancel: dict[str, Any] | None = None
    #: where the log of the last attempt is (a URI)
    log: str | None = None

    optional = frozenset({"error", "name", "summary", "cancel", "log"})
    times = frozenset({"finished"})
    choices = {"state": (DIRTY, CLEAN), "outcome": OUTCOMES}


@dataclass(frozen=True)
class QuarantineEntry(Record):
    """``R/quarantine/<job>``: a job that cannot be run, why, and its handle for forensics."""

    job_id: str = ""
    reason: str = ""
    since: str = ""
    handle: dict[str, Any] | None = None
    raw: str | None = None

    optional = frozenset({"handle", "raw"})
    times = frozenset({"since"})


@dataclass(frozen=True)
class SparkApp(Record):
    """``R/jobs/<job>/spark``: EPHEMERAL, the Spark application of the live driver of
    ``attempt``, written by that driver (fenced on the attempt) once its SparkContext is up."""

    attempt: int = 0
    app_id: str = ""
    master: str = ""
    ui: str | None = None
    started: str = ""

    optional = frozenset({"ui"})
    times = frozenset({"started"})
