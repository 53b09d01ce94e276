"""The state handle: a small JSON record in ZooKeeper that points at a payload in storage.

Format (UTF-8 JSON, at most :data:`MAX_HANDLE_BYTES` (2 KB), typically 400-700 bytes)::

    {"format": 1, "uri": "<fsspec url>", "size": <bytes>, "sha256": "<hex>",
     "created": "<iso8601>", "writer": "<instance id>", "hmac": "<hex, when signed>",
     ...summary fields...}

Summary fields (a job's ``name``, ``submitted``, ``max_attempts``, ``kind``...) are small scalars
stored beside the reference, so that listing never reads a payload.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from zkstore import protocol
from zkstore.errors import CorruptHandle, SerializationError, TooLarge
from zkstore.records.strict import (
    check_text,
    load_object,
    parse_time,
    time_or_none,
    time_text,
    utc_moment,
)

__all__ = [
    "FORMAT",
    "MAX_HANDLE_BYTES",
    "RUN_FIELD",
    "RUN_FORMAT",
    "Handle",
    "PayloadRef",
    "SummaryValue",
    "ZnodeStatLike",
]

FORMAT = 1
#: The summary field of a job's typed run options (:data:`zkstore.jobs.runspec.RUN`).
RUN_FIELD = "run"
#: The format of a handle whose summary holds ``run`` (fleet protocol 4, feature ``run-spec``):
#: a reader of an older protocol takes it for a newer writer's record (and refuses it, naming
#: the protocol) instead of reading a job without its requirements and Spark settings.
RUN_FORMAT = protocol.FEATURES[protocol.RUN_SPEC].protocol
#: Typical handles are 400-700 bytes. The bound leaves room for the longest ids the store accepts
#: (128 characters each for cluster and job), a name of 100 characters of any script, and a
#: storage root URL of up to 300 bytes (see :data:`zkstore.config.MAX_STORAGE_URL_BYTES`).
MAX_HANDLE_BYTES = 2048

_CORE = ("format", "uri", "size", "sha256", "created", "writer", "hmac")
_FORMAT_OF = {RUN_FORMAT: f" (a handle with {RUN_FIELD!r} is format {RUN_FORMAT})"}
_HEX64 = re.compile(r"[0-9a-f]{64}")
SummaryValue = str | int | float | bool | None


class ZnodeStatLike(Protocol):
    """What a handle needs of a kazoo ``ZnodeStat``."""

    @property
    def version(self) -> int: ...


@dataclass(frozen=True)
class PayloadRef:
    """What storage returns after writing a payload: enough to find and verify it."""

    uri: str
    size: int
    sha256: str
    hmac: str | None = None


@dataclass(frozen=True)
class Handle:
    """A parsed handle, with the znode version it was read at (``None`` if not read from ZK).

    Its times are typed, parsed once here: ``created`` (given as text, it is parsed, and that
    text is what :meth:`record` writes back, so that nothing stored changes), and the job's
    ``submitted`` of its summary (:attr:`submitted`, None if it has none or not a time)."""

    uri: str
    size: int
    sha256: str
    created: datetime
    writer: str
    hmac: str | None = None
    summary: Mapping[str, SummaryValue] = field(default_factory=dict)
    version: int | None = field(default=None, compare=False)
    #: ``created`` as the handle's writer wrote it (None: :func:`~zkstore.records.strict.time_text`)
    created_text: str | None = field(default=None, compare=False, repr=False)
    #: the summary's ``submitted`` (a job definition's), parsed from the summary whatever is
    #: given here
    submitted: datetime | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        created: object = self.created
        if isinstance(created, str):  # as it is stored: kept, to be written back unchanged
            object.__setattr__(self, "created_text", created)
            object.__setattr__(self, "created", parse_time(created))
        object.__setattr__(self, "submitted", time_or_none(self.summary.get("submitted")))

    @classmethod
    def for_payload(
        cls, ref: PayloadRef, writer: str, summary: Mapping[str, SummaryValue] | None = None
    ) -> Handle:
        """A new handle for a payload just written; :class:`~zkstore.errors.TooLarge` if it would
        not fit in :data:`MAX_HANDLE_BYTES`."""
        handle = cls(
            uri=ref.uri,
            size=ref.size,
            sha256=ref.sha256,
            hmac=ref.hmac,
            created=utc_moment(),
            writer=writer,
            summary=dict(summary or {}),
        )
        handle.to_bytes()
        return handle

    @property
    def created_at(self) -> datetime:
        """``created`` (its older name)."""
        return self.created

    @property
    def ref(self) -> PayloadRef:
        return PayloadRef(self.uri, self.size, self.sha256, self.hmac)

    def to_bytes(self) -> bytes:
        """The znode data; :class:`~zkstore.errors.TooLarge` past :data:`MAX_HANDLE_BYTES`."""
        data = json.dumps(
            self.record(), separators=(",", ":"), sort_keys=True, ensure_ascii=False
        ).encode()
        if len(data) > MAX_HANDLE_BYTES:
            raise TooLarge(
                f"handle of {len(data)} bytes is over the {MAX_HANDLE_BYTES}-byte limit; "
                "keep summary fields short"
            )
        return data

    def record(self) -> dict[str, Any]:
        """The handle as its JSON object (what :meth:`to_bytes` encodes, and what a record
        that keeps a handle inside it stores: :meth:`from_record` reads it back)."""
        record: dict[str, Any] = {
            "format": self.format,
            "uri": self.uri,
            "size": self.size,
            "sha256": self.sha256,
            "created": self.created_text or time_text(self.created),
            "writer": self.writer,
        }
        if self.hmac is not None:
            record["hmac"] = self.hmac
        for key, value in self.summary.items():
            if key in _CORE:
                raise SerializationError(f"summary field {key!r} clashes with the handle format")
            record[key] = value
        return record

    @property
    def format(self) -> int:
        """The handle's format: :data:`RUN_FORMAT` if its summary holds a job's typed run
        options, else :data:`FORMAT`."""
        return RUN_FORMAT if RUN_FIELD in self.summary else FORMAT

    @classmethod
    def from_znode(cls, data: bytes, stat: ZnodeStatLike | None, path: str) -> Handle:
        """Parse znode data strictly; garbage raises :class:`CorruptHandle` naming ``path``."""
        handle = cls.parse(data, path)
        if stat is None:
            return handle
        return replace(handle, version=stat.version)

    @classmethod
    def parse(cls, data: bytes, path: str) -> Handle:
        try:
            record = load_object(data, max_bytes=MAX_HANDLE_BYTES, max_depth=1)
        except ValueError as exc:
            raise CorruptHandle(f"{path}: not a valid handle ({exc})") from None
        # A handle of a newer format was written by a newer protocol's feature: not garbage.
        protocol.check_record(record, path, field="format")
        try:
            return cls._from_record(record)
        except ValueError as exc:
            raise CorruptHandle(f"{path}: not a valid handle ({exc})") from None

    @classmethod
    def from_record(cls, record: Any, path: str) -> Handle:
        """A handle kept inside another record, as its JSON object (:meth:`record`), checked
        as :meth:`parse` checks the znode's: :class:`CorruptHandle` naming ``path`` for garbage,
        :class:`~zkstore.errors.NewerRecord` for a newer format."""
        if not isinstance(record, dict):
            raise CorruptHandle(f"{path}: not a valid handle (not a JSON object)")
        protocol.check_record(record, path, field="format")
        try:
            return cls._from_record(record)
        except ValueError as exc:
            raise CorruptHandle(f"{path}: not a valid handle ({exc})") from None

    @classmethod
    def _from_record(cls, record: dict[str, Any]) -> Handle:
        written = record.get("format")
        wanted = RUN_FORMAT if RUN_FIELD in record else FORMAT
        if written != wanted or isinstance(written, bool):
            raise ValueError(f"unknown format {written!r:.40}" + _FORMAT_OF.get(wanted, ""))
        for key in ("uri", "sha256", "created", "writer"):
            if not isinstance(record.get(key), str) or not record[key]:
                raise ValueError(f"missing or non-string {key!r}")
            check_text(record[key], key)
        size = record.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError("size is not a non-negative integer")
        if not _HEX64.fullmatch(record["sha256"]):
            raise ValueError("sha256 is not 64 hex digits")
        hmac = record.get("hmac")
        if hmac is not None and (not isinstance(hmac, str) or not _HEX64.fullmatch(hmac)):
            raise ValueError("hmac is not 64 hex digits")
        summary = {k: v for k, v in record.items() if k not in _CORE}
        for key, value in summary.items():
            if not isinstance(value, str | int | float | bool) and value is not None:
                raise ValueError(f"summary field {key!r:.40} is not a scalar")
            if isinstance(value, str):
                check_text(value, f"summary field {key!r:.40}")
        return cls(
            uri=record["uri"],
            size=size,
            sha256=record["sha256"],
            created=parse_time(record["created"]),
            writer=record["writer"],
            created_text=record["created"],
            hmac=hmac,
            summary=summary,
        )
