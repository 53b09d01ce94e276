"""A job's own writes in storage, in the order storage took them: the zombie-write check.

The chaos job writes as it works, from a thread of its own that ZooKeeper never blocks (a job's
output stream, say): every ``interval`` seconds for as long as the attempt lives, one small
object in its ledger (``<url>/<index>.json``: attempt, pid, a sequence number, the writer's
time). Each index is created exactly once, create-only (``If-None-Match: *`` on S3, a link on
local disk), and a writer takes the index after the last one it knows of (its own last, one it
found taken, or the last listed when it started); so an index is only ever written once the one
before it exists, and the ledger's order is the order in which storage accepted the writes:
storage's own linearization, not anybody's clock.

Then "at most one live attempt" is checked where it matters (:func:`zombie_writes`): along the
ledger, attempt numbers never go down. An entry of attempt ``a`` after an entry of attempt ``b
> a`` is a write of an older attempt that landed after a newer attempt's first: a zombie write.

Each write that succeeded is also logged locally (``ledger.log``: attempt and index), so that
:func:`missing` can tell whether anything the job wrote was deleted since.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LOG", "S3_CLIENT", "Entry", "Ledger", "LedgerWriter", "missing", "zombie_writes"]

LOG = "ledger.log"
#: Bounded calls to S3: a writer cut off from storage tries again, it does not hang.
S3_CLIENT = {
    "config_kwargs": {"connect_timeout": 2, "read_timeout": 5, "retries": {"max_attempts": 1}}
}


@dataclass(frozen=True)
class Entry:
    index: int
    attempt: int
    pid: int
    seq: int
    at: float


class Ledger:
    """The ledger at ``url`` (an fsspec URL, with its storage options)."""

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        import fsspec  # in the job's driver, or the checker: not at import

        self.url = url.rstrip("/")
        options = dict(options or {})
        self._local = self.url.startswith("file://") or "://" not in self.url
        if not self._local:
            options = {**S3_CLIENT, **options}
        self.fs, self.root = fsspec.core.url_to_fs(self.url, **options)
        if self._local:
            os.makedirs(self.root, exist_ok=True)

    def _path(self, index: int) -> str:
        return f"{self.root}/{index:09d}.json"

    def indices(self) -> list[int]:
        try:
            names = self.fs.ls(self.root, detail=False, refresh=True)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            stem = str(name).rsplit("/", 1)[-1]
            if stem.endswith(".json") and stem[:-5].isdigit():
                found.append(int(stem[:-5]))
        return sorted(found)

    def create(self, index: int, data: bytes) -> None:
        """Create entry ``index``; FileExistsError if it is there already."""
        path = self._path(index)
        if not self._local:
            self.fs.pipe_file(path, data, mode="create")
            return
        temporary = f"{self.root}/.{index:09d}.{uuid.uuid4().hex[:8]}"
        with open(temporary, "wb") as f:
            f.write(data)
        try:
            os.link(temporary, path)
        finally:
            os.unlink(temporary)

    def entries(self) -> list[Entry]:
        """Every entry, in the ledger's order (an unreadable one is skipped)."""
        found = []
        for index in self.indices():
            try:
                data = json.loads(self.fs.cat_file(self._path(index)))
                found.append(
                    Entry(
                        index, int(data["attempt"]), int(data["pid"]), int(data["seq"]), data["at"]
                    )
                )
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return found


class LedgerWriter:
    """A thread that appends one entry every ``interval`` s until :meth:`stop`; each success is
    logged in ``log`` (attempt, index). Failures (storage cut off) are tried again."""

    def __init__(
        self, ledger: Ledger, attempt: int, interval: float, log: Path | None = None
    ) -> None:
        self.ledger = ledger
        self.attempt = attempt
        self.interval = interval
        self.log = log
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-ledger", daemon=True)
        self.written = 0

    def start(self) -> LedgerWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        following = None
        seq = 0
        while not self._stop.wait(self.interval):
            try:
                if following is None:
                    following = (self.ledger.indices() or [-1])[-1] + 1
                record = {
                    "attempt": self.attempt,
                    "pid": os.getpid(),
                    "seq": seq,
                    "at": time.time(),
                }
                data = json.dumps(record).encode()
                while True:
                    try:
                        self.ledger.create(following, data)
                        break
                    except FileExistsError:
                        following += 1
            except OSError:
                continue  # storage unreachable, or a conflict it could not settle: again
            if self.log is not None:
                with open(self.log, "a") as log:
                    log.write(f"{self.attempt} {following}\n")
            following += 1
            seq += 1
            self.written += 1


def zombie_writes(entries: list[Entry]) -> list[str]:
    """A line for each entry of an older attempt that storage took after a newer attempt's
    first (see the module)."""
    found = []
    newest: Entry | None = None
    for entry in entries:
        if newest is not None and entry.attempt < newest.attempt:
            found.append(
                f"attempt {entry.attempt} (pid {entry.pid}) wrote ledger entry {entry.index} "
                f"after attempt {newest.attempt}'s entry {newest.index}: a zombie write"
            )
        if newest is None or entry.attempt > newest.attempt:
            newest = entry
    return found


def missing(ledger: Ledger, log: Path) -> list[int]:
    """The indices the writers logged as written that storage no longer holds."""
    try:
        lines = log.read_text().splitlines()
    except FileNotFoundError:
        return []
    logged = {int(line.split()[1]) for line in lines if len(line.split()) == 2}
    return sorted(logged - set(ledger.indices()))
