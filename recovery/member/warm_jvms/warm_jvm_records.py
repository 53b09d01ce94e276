"""What a daemon keeps of its warm driver JVMs on disk, and what it hands a driver that takes one.

Each warm JVM has a folder's worth of entries in ``<work dir>/.warm/<daemon>/`` (private to the
daemon's user; passable, not listable, by its drivers' users):

- ``<id>.json``, its record (:class:`WarmRecord`): its process (host, boot, pid, start time), the
  user it runs as, its log, and once an attempt took it, that attempt. A restarted daemon finds
  its warm JVMs by these: one nobody took died with the daemon that started it (its standard
  input was that daemon's pipe) or is ended now; one an attempt took lives as long as that
  attempt's driver, which holds the pipe, and is ended when the attempt is over.
- ``<id>/``, its working directory, which becomes the attempt's directory when an attempt takes
  it (renamed: the JVM's current directory is the attempt's, as a driver's own JVM's is);
- ``<id>.spark/``, its ``java.io.tmpdir`` (Spark's scratch, shuffle files included);
- ``<id>.conn/``, where it writes its gateway's port and secret as it starts (read and removed
  at once).

No secret is ever in a record: the gateway's secret lives in the daemon's memory until it goes,
through the driver's configuration pipe, to the one driver that takes the JVM
(:class:`recovery.shared.jvm_settings.WarmOffer`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
from collections.abc import Collection
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from recovery.shared import attemptdir
from recovery.shared.processes import ProcessIdentity

__all__ = ["WARM", "WarmRecord", "WarmRecords", "remove_own_file"]

logger = logging.getLogger(__name__)

WARM = ".warm"
_ID = re.compile(r"[0-9a-f]{8}")


@dataclass(frozen=True)
class WarmRecord:
    """One warm JVM of a daemon (``pid`` None: it was being started)."""

    warm_id: str
    host: str
    boot_id: str | None
    log: str
    uid: int | None = None
    pid: int | None = None
    start_ticks: int | None = None
    #: the attempt that took it
    job_id: str | None = None
    attempt: int | None = None

    @property
    def identity(self) -> ProcessIdentity | None:
        if self.pid is None:
            return None
        return ProcessIdentity(self.host, self.pid, self.start_ticks, self.boot_id)

    @property
    def taken(self) -> bool:
        return self.job_id is not None

    def taken_by(self, job_id: str, attempt: int, log: Path) -> WarmRecord:
        return replace(self, job_id=job_id, attempt=attempt, log=str(log))

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def parse(cls, data: bytes) -> WarmRecord:
        """Raises ValueError for anything this daemon would not have written."""
        raw = json.loads(data)
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        optional_int = (int, type(None))
        types: dict[str, tuple[type, ...]] = {
            "warm_id": (str,),
            "host": (str,),
            "boot_id": (str, type(None)),
            "log": (str,),
            "uid": optional_int,
            "pid": optional_int,
            "start_ticks": optional_int,
            "job_id": (str, type(None)),
            "attempt": optional_int,
        }
        for name, allowed in types.items():
            if type(raw.get(name)) not in allowed:
                raise ValueError(f"{name!r} has the wrong type")
        if not _ID.fullmatch(raw["warm_id"]):
            raise ValueError("not a warm driver's id")
        values: dict[str, Any] = {name: raw.get(name) for name in types}
        return cls(**values)


class WarmRecords:
    """The warm JVMs' records and directories of one daemon (daemons of one host may share a
    work directory: each has a folder of its own)."""

    def __init__(self, work_root: Path, daemon_id: str) -> None:
        self.directory = work_root / WARM / daemon_id

    def make_directory(self, mode: int) -> None:
        """``.warm`` and the daemon's folder in it, ``mode`` (0711 when drivers run as other
        users: they pass through to their JVM's directories)."""
        for place in (self.directory.parent, self.directory):
            with contextlib.suppress(FileExistsError):
                place.mkdir(mode=mode, parents=True)
            os.chmod(place, mode)

    def record(self, warm_id: str) -> Path:
        return self.directory / f"{warm_id}.json"

    def cwd(self, warm_id: str) -> Path:
        return self.directory / warm_id

    def scratch(self, warm_id: str) -> Path:
        return self.directory / f"{warm_id}.spark"

    def conn(self, warm_id: str) -> Path:
        return self.directory / f"{warm_id}.conn"

    def write(self, record: WarmRecord) -> None:
        """Replace the record atomically; raises OSError."""
        target = self.record(record.warm_id)
        temporary = target.with_name(f".{target.name}.{os.getpid()}")
        temporary.write_bytes(record.to_bytes())
        os.replace(temporary, target)

    def read(self, warm_id: str) -> WarmRecord | None:
        """The record, None if missing or unreadable (logged)."""
        path = self.record(warm_id)
        try:
            record = WarmRecord.parse(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("unreadable warm driver record %s: %s", path, exc)
            return None
        return record if record.warm_id == warm_id else None

    def listed(self) -> list[str]:
        """The ids of every record."""
        try:
            names = sorted(p.name for p in self.directory.iterdir())
        except FileNotFoundError:
            return []
        return [n[:-5] for n in names if n.endswith(".json") and _ID.fullmatch(n[:-5])]

    def remove(self, record: WarmRecord, owners: Collection[int] = ()) -> None:
        """Remove what the warm JVM left: its directories (only this user's or its drivers'
        users', never through a link), its log if still its own (not an attempt's: never taken,
        or taken at first use, when its driver copied it into the attempt's), then
        its record (last: while anything is left, the record says so)."""
        warm_id = record.warm_id
        for place in (self.scratch(warm_id), self.conn(warm_id), self.cwd(warm_id)):
            if attemptdir.ours(place, owners):
                shutil.rmtree(place, ignore_errors=True)
        if not record.taken or Path(record.log).parent.name == WARM:  # still its own log
            remove_own_file(Path(record.log))
        self.record(warm_id).unlink(missing_ok=True)


def remove_own_file(path: Path) -> None:
    """Remove ``path`` if it is a regular file of this user's (not a link to one)."""
    with contextlib.suppress(OSError):
        found = os.lstat(path)
        if os.path.isfile(path) and not os.path.islink(path) and found.st_uid == os.getuid():
            path.unlink()
