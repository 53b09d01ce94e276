"""The state handle: a small JSON record in ZooKeeper that points at a payload in storage.

Format (UTF-8 JSON, always under :data:`MAX_HANDLE_BYTES`)::

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
from datetime import UTC, datetime
from typing import Any, Protocol

from zkstore.errors import CorruptHandle, SerializationError

FORMAT = 1
MAX_HANDLE_BYTES = 1024
MAX_SUMMARY_VALUE_CHARS = 200

_CORE = ("format", "uri", "size", "sha256", "created", "writer", "hmac")
_HEX64 = re.compile(r"[0-9a-f]{64}")
SummaryValue = str | int | float | bool | None


class ZnodeStatLike(Protocol):
    """What a handle needs of a kazoo ``ZnodeStat``."""

    @property
    def version(self) -> int: ...


def utc_now() -> str:
    """The current time as ISO 8601 UTC with milliseconds: the timestamp format of zkstore."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: str) -> datetime:
    """Parse a zkstore timestamp (as written by :func:`utc_now`)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass(frozen=True)
class PayloadRef:
    """What storage returns after writing a payload: enough to find and verify it."""

    uri: str
    size: int
    sha256: str
    hmac: str | None = None


@dataclass(frozen=True)
class Handle:
    """A parsed handle, with the znode version it was read at (``None`` if not read from ZK)."""

    uri: str
    size: int
    sha256: str
    created: str
    writer: str
    hmac: str | None = None
    summary: Mapping[str, SummaryValue] = field(default_factory=dict)
    version: int | None = field(default=None, compare=False)

    @classmethod
    def for_payload(
        cls, ref: PayloadRef, writer: str, summary: Mapping[str, SummaryValue] | None = None
    ) -> Handle:
        """A new handle for a payload just written; raises if it would not fit in 1 KB."""
        handle = cls(
            uri=ref.uri,
            size=ref.size,
            sha256=ref.sha256,
            hmac=ref.hmac,
            created=utc_now(),
            writer=writer,
            summary=dict(summary or {}),
        )
        handle.to_bytes()
        return handle

    @property
    def ref(self) -> PayloadRef:
        return PayloadRef(self.uri, self.size, self.sha256, self.hmac)

    def to_bytes(self) -> bytes:
        """The znode data; raises :class:`SerializationError` past :data:`MAX_HANDLE_BYTES`."""
        record: dict[str, Any] = {
            "format": FORMAT,
            "uri": self.uri,
            "size": self.size,
            "sha256": self.sha256,
            "created": self.created,
            "writer": self.writer,
        }
        if self.hmac is not None:
            record["hmac"] = self.hmac
        for key, value in self.summary.items():
            if key in _CORE:
                raise SerializationError(f"summary field {key!r} clashes with the handle format")
            record[key] = value
        data = json.dumps(record, separators=(",", ":"), sort_keys=True).encode()
        if len(data) > MAX_HANDLE_BYTES:
            raise SerializationError(
                f"handle of {len(data)} bytes is over the {MAX_HANDLE_BYTES}-byte limit; "
                "keep summary fields short"
            )
        return data

    @classmethod
    def from_znode(cls, data: bytes, stat: ZnodeStatLike | None, path: str) -> Handle:
        """Parse znode data strictly; garbage raises :class:`CorruptHandle` naming ``path``."""
        handle = cls.parse(data, path)
        if stat is None:
            return handle
        return replace(handle, version=stat.version)

    @classmethod
    def parse(cls, data: bytes, path: str) -> Handle:
        def bad(reason: str) -> CorruptHandle:
            return CorruptHandle(f"{path}: not a valid handle ({reason})")

        if len(data) > MAX_HANDLE_BYTES:
            raise bad(f"{len(data)} bytes, over {MAX_HANDLE_BYTES}")
        try:
            record = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise bad("not UTF-8 JSON") from None
        if not isinstance(record, dict):
            raise bad("not a JSON object")
        if record.get("format") != FORMAT:
            raise bad(f"unknown format {record.get('format')!r}")
        for key in ("uri", "sha256", "created", "writer"):
            if not isinstance(record.get(key), str) or not record[key]:
                raise bad(f"missing or non-string {key!r}")
        size = record.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise bad("size is not a non-negative integer")
        if not _HEX64.fullmatch(record["sha256"]):
            raise bad("sha256 is not 64 hex digits")
        hmac = record.get("hmac")
        if hmac is not None and (not isinstance(hmac, str) or not _HEX64.fullmatch(hmac)):
            raise bad("hmac is not 64 hex digits")
        try:
            parse_time(record["created"])
        except ValueError:
            raise bad("created is not an ISO 8601 time") from None
        summary = {k: v for k, v in record.items() if k not in _CORE}
        for key, value in summary.items():
            if not isinstance(value, str | int | float | bool) and value is not None:
                raise bad(f"summary field {key!r} is not a scalar")
        return cls(
            uri=record["uri"],
            size=size,
            sha256=record["sha256"],
            created=record["created"],
            writer=record["writer"],
            hmac=hmac,
            summary=summary,
        )
