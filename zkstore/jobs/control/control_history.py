"""The history of a job's control object: one small JSON object per change, in object storage.

``S/<cluster>/jobs/<job>/control-history/<version, 19 digits>-<uuid>.json`` holds::

    {"version": 8, "previous": 7, "by": "ann@laptop", "when": "<iso8601>",
     "changes": {"rate": {"old": 10, "new": 20}, "mode": {"new": "fast"}}}

(``old`` absent: the key was added; ``new`` absent: removed). Entries are written create-only,
after the change is stored in ZooKeeper, by whoever made the change; the newest
:data:`HISTORY_LIMIT` are kept, older ones discarded as new ones arrive. A writer that dies
between storing a change and recording it leaves a gap in the versions, which
:meth:`ControlHistory.entries` reports. The entries are the job's (no handle references them) and
its cleanup removes them with everything else under the job's prefix.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from zkstore.errors import PayloadError, SerializationError, TooLarge, ZkStoreError
from zkstore.jobs.control.values import key_error, scalar_error
from zkstore.payloads.storage import TEMP_MARKER, StateStorage, StoredObject
from zkstore.records.strict import check_text, load_object, parse_time, time_text, to_millisecond

__all__ = [
    "HISTORY_LIMIT",
    "MAX_ENTRY_BYTES",
    "VERSION_WIDTH",
    "ControlHistory",
    "HistoryEntry",
    "diff",
    "gaps",
]

logger = logging.getLogger(__name__)

HISTORY_LIMIT = 100
MAX_ENTRY_BYTES = 64 * 1024
VERSION_WIDTH = 19


@dataclass(frozen=True)
class HistoryEntry:
    """One change of the control object: who made it, when, and each key's old and new value."""

    version: int
    previous: int | None
    by: str
    when: datetime
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    uri: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "when", to_millisecond(self.when))  # what it reads back

    def to_bytes(self) -> bytes:
        return json.dumps(self.as_dict(), separators=(",", ":"), sort_keys=True).encode()

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "previous": self.previous,
            "by": self.by,
            "when": time_text(self.when),
            "changes": self.changes,
        }

    @classmethod
    def parse(cls, data: bytes, uri: str) -> HistoryEntry:
        """Parse an entry strictly; :class:`ValueError` says why it is not one."""
        raw = load_object(data, max_bytes=MAX_ENTRY_BYTES)
        if set(raw) != {"version", "previous", "by", "when", "changes"}:
            raise ValueError("not {version, previous, by, when, changes}")
        version, previous = raw["version"], raw["previous"]
        if type(version) is not int or version < 0:
            raise ValueError("version is not a non-negative integer")
        if previous is not None and (type(previous) is not int or previous < 0):
            raise ValueError("previous is not a non-negative integer or null")
        if not isinstance(raw["by"], str) or not isinstance(raw["when"], str):
            raise ValueError("by or when is not a text")
        check_text(raw["by"], "by")
        when = parse_time(raw["when"])
        changes = raw["changes"]
        if not isinstance(changes, dict):
            raise ValueError("changes is not an object")
        for key, change in changes.items():
            if key_error(key) or not isinstance(change, dict) or not set(change) <= {"old", "new"}:
                raise ValueError(f"change of {key!r:.60} is not {{old, new}}")
            if any(scalar_error(value) for value in change.values()):
                raise ValueError(f"change of {key!r:.60} holds a value that is not a scalar")
        return cls(version, previous, raw["by"], when, changes, uri)


def diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{key: {"old": ..., "new": ...}}`` for each key whose value differs (a side is left out
    where the key is absent)."""
    changes: dict[str, dict[str, Any]] = {}
    for key in sorted(old.keys() | new.keys()):
        if key in old and key in new and old[key] == new[key] and type(old[key]) is type(new[key]):
            continue
        change = {}
        if key in old:
            change["old"] = old[key]
        if key in new:
            change["new"] = new[key]
        changes[key] = change
    return changes


def _version_of(item: StoredObject) -> int | None:
    """The version a history object's name starts with, or None for anything else."""
    name = item.uri.rsplit("/", 1)[-1]
    stem = name[:VERSION_WIDTH]
    if TEMP_MARKER in name or not stem.isdigit() or name[VERSION_WIDTH : VERSION_WIDTH + 1] != "-":
        return None
    return int(stem)


class ControlHistory:
    """The history entries of one job under ``prefix`` (relative to the storage root)."""

    def __init__(self, storage: StateStorage, prefix: str, *, limit: int = HISTORY_LIMIT) -> None:
        self.storage = storage
        self.prefix = prefix
        self.limit = limit

    def record(self, entry: HistoryEntry) -> str:
        """Write ``entry`` (create-only, at a fresh key) and discard entries past the limit;
        returns its URI. A failure to discard is logged, never raised."""
        data = entry.to_bytes()
        if len(data) > MAX_ENTRY_BYTES:
            raise TooLarge(f"history entry of {len(data)} bytes, over {MAX_ENTRY_BYTES}")
        ref = self.storage.write(
            self.prefix, data, stem=f"{entry.version:0{VERSION_WIDTH}d}-", suffix=".json"
        )
        try:
            self.prune()
        except ZkStoreError as exc:
            logger.warning("control history under %s not pruned: %s", self.prefix, exc)
        return ref.uri

    def _listed(self) -> list[tuple[int, StoredObject]]:
        found = [(_version_of(item), item) for item in self.storage.list(self.prefix)]
        return sorted((v, item) for v, item in found if v is not None)

    def prune(self) -> int:
        """Discard the oldest entries past the limit; how many were discarded."""
        listed = self._listed()
        old = listed[: max(0, len(listed) - self.limit)]
        for _, item in old:
            self.storage.discard(item.uri)
        return len(old)

    def report(self, *, last: int | None = None) -> dict[str, Any]:
        """What ``control history --format json`` prints (and the HTTP API serves): the
        entries, the versions with no entry, and the objects that are not valid entries."""
        entries, errors = self.entries(last=last)
        return {
            "entries": [e.as_dict() for e in entries],
            "missing_versions": gaps(entries),
            "unreadable": errors,
        }

    def entries(self, *, last: int | None = None) -> tuple[list[HistoryEntry], dict[str, str]]:
        """The entries, oldest first (the ``last`` ones only, if given), and the objects that
        are not valid entries, with why: garbage is reported, never raised."""
        listed = self._listed()
        if last is not None:
            listed = listed[-last:] if last > 0 else []
        uris = [item.uri for _, item in listed]
        entries, errors = [], {}
        for uri, found in zip(uris, self._read_all(uris), strict=True):
            if isinstance(found, str):
                errors[uri] = found
            else:
                entries.append(found)
        return sorted(entries, key=lambda e: e.version), errors

    def _read_all(self, uris: Iterable[str]) -> list[HistoryEntry | str]:
        if self.storage.is_local:
            return [self._read(uri) for uri in uris]
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(self._read, uris))

    def _read(self, uri: str) -> HistoryEntry | str:
        try:
            return HistoryEntry.parse(self.storage.fetch(uri, max_bytes=MAX_ENTRY_BYTES), uri)
        except (PayloadError, SerializationError) as exc:
            return f"{type(exc).__name__}: {exc}"
        except ValueError as exc:
            return f"not a history entry: {exc}"


def gaps(entries: list[HistoryEntry]) -> list[int]:
    """Versions missing between consecutive entries (a writer died before recording, or
    somebody changed the object without zkstore)."""
    missing: list[int] = []
    for before, after in itertools.pairwise(entries):
        missing += range(before.version + 1, after.version)
    return missing
