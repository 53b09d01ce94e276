"""The base of zkstore's small JSON records in ZooKeeper, as frozen dataclasses with their
version, and the one way to read one.

Every record is parsed strictly: anything that is not what its writer would have written
raises :class:`~zkstore.errors.CorruptRecord` naming the path. ``version`` is the znode
version the record was read at (``None`` for a record not read from ZooKeeper); updates
pass it back. The families are modules beside this one: :mod:`.job_records`,
:mod:`.result_records`, :mod:`.fleet_records`; every record is parsed by the same strict
rules (:mod:`zkstore.records.strict`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from zkstore import protocol
from zkstore.errors import CorruptHandle, CorruptRecord
from zkstore.records.handle import Handle, ZnodeStatLike
from zkstore.records.strict import (
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

if TYPE_CHECKING:  # only an annotation: the records parse bytes, a reader of files or
    # of the HTTP API needs no ZooKeeper client (kazoo)
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "EPOCH",
    "MAX_ERROR_CHARS",
    "MAX_FIELD_INT",
    "MAX_RECORD_BYTES",
    "Record",
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


#: The default of a record's time field (a record read always has its own).
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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
    #: parsed time (converted here, at the boundary: stored as :func:`~zkstore.records.strict.
    #: time_text`), one annotated ``str`` the text as stored
    times: ClassVar[frozenset[str]] = frozenset()
    #: time fields stored to the whole second (:func:`~zkstore.records.strict.second_text`: a
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
    #: held as a :class:`~zkstore.records.handle.Handle` (parsed once, here)
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
        """Parse strictly (see :mod:`zkstore.records.strict`); anything else raises
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
