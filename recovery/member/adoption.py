"""A member's drivers across its own restarts: launch records, and what to make of an attempt
placed on a member that did not start its driver in this life.

Drivers outlive their daemon (their own processes and ZooKeeper sessions). A daemon restarted
with its id finds the attempts still placed on it; each may have a live driver (adopt it: follow
its exit through a pidfd and record it, as for a driver it forked), a dead one (record the exit,
release what the dead driver held), or none yet (launch it). It must never launch an attempt
twice, nor delete a ``running`` node or a working directory whose owner is not verified gone.

What it knows, and why each source:

- **the launch record**, ``<work dir>/.launches/<daemon>/<job>-attempt-<n>.json``, written
  before the driver is started (an intent) and again once it runs (its pid, start time and
  boot), and, if the exit could not be recorded in ZooKeeper, how it ended. It is the only
  witness of the moments before the driver takes its ``running`` node, and of "this member
  launched it" at all: an attempt with a record is never launched again. It is local, so a
  record of another boot is a driver of this machine before it rebooted: dead. (Not fsynced:
  after a crash of the machine itself every driver of that boot is gone, and a lost record
  costs at most a launch that ZooKeeper refuses.) The default work directory is the same for
  every start of a daemon of one id and cluster, so that it finds its records again.
- **the running node**, which the driver writes with its host, pid, start time and boot: it
  names the holder of the attempt wherever the record is missing (a daemon started with another
  ``--work-dir``, an earlier version's).
- **the processes whose current directory is the attempt's working directory** (the driver
  starts there): a driver between its start and its ``running`` node whose record lost its pid.

The verdict (:func:`judge`) is a pure function of those, so that it is tested branch by branch.
A process is alive or dead only by :mod:`recovery.shared.processes` (pid *and* start time, same host
and boot); anything it cannot check is left alone: its ``running`` node goes when its session
does, and the leader acts then.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from recovery.shared.processes import Liveness, ProcessIdentity
from zkstore.records.job_records import RunningInfo
from zkstore.records.record import EPOCH
from zkstore.records.strict import parse_time, time_text

__all__ = [
    "LAUNCHES",
    "Adopt",
    "Dead",
    "Found",
    "Launch",
    "LaunchRecord",
    "LaunchRecords",
    "Leave",
    "Probe",
    "Verdict",
    "judge",
    "running_identity",
    "same_process",
]

logger = logging.getLogger(__name__)

LAUNCHES = ".launches"
_NAME = re.compile(r"(?P<job>[A-Za-z0-9][A-Za-z0-9._-]*)-attempt-(?P<attempt>[0-9]+)\.json")


@dataclass(frozen=True)
class LaunchRecord:
    """One attempt this member launched: the assignment it was for, and its driver process
    (``pid`` None: the launch was begun, and this incarnation never learned the pid)."""

    job_id: str
    attempt: int
    #: the assignment's time (the text of a stray's, which has none, is empty: EPOCH here)
    assigned: datetime
    status_version: int
    host: str
    boot_id: str | None
    pid: int | None = None
    start_ticks: int | None = None
    #: how the driver ended, kept while that could not be recorded in ZooKeeper
    exited: str | None = None

    @property
    def identity(self) -> ProcessIdentity | None:
        if self.pid is None:
            return None
        return ProcessIdentity(self.host, self.pid, self.start_ticks, self.boot_id)

    def to_bytes(self) -> bytes:
        values = asdict(self)
        values["assigned"] = "" if self.assigned == EPOCH else time_text(self.assigned)
        return json.dumps(values, sort_keys=True).encode()

    @classmethod
    def parse(cls, data: bytes) -> LaunchRecord:
        """Raises ValueError for anything this member would not have written."""
        raw = json.loads(data)
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        types: dict[str, tuple[type, ...]] = {
            "job_id": (str,),
            "attempt": (int,),
            "assigned": (str,),
            "status_version": (int,),
            "host": (str,),
            "boot_id": (str, type(None)),
            "pid": (int, type(None)),
            "start_ticks": (int, type(None)),
            "exited": (str, type(None)),
        }
        for name, allowed in types.items():
            if type(raw.get(name)) not in allowed:
                raise ValueError(f"{name!r} has the wrong type")
        values: dict[str, Any] = {name: raw.get(name) for name in types}
        values["assigned"] = parse_time(raw["assigned"]) if raw["assigned"] else EPOCH
        return cls(**values)


class LaunchRecords:
    """The launch records of one member, in its work directory (private to its user), in a
    folder of its own (daemons of one host may share a work directory)."""

    def __init__(self, work_root: Path, daemon_id: str) -> None:
        self.directory = work_root / LAUNCHES / daemon_id

    def path(self, job_id: str, attempt: int) -> Path:
        return self.directory / f"{job_id}-attempt-{attempt}.json"

    def write(self, record: LaunchRecord) -> None:
        """Replace the record atomically (a reader sees the old one or the new one); raises
        OSError."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        target = self.path(record.job_id, record.attempt)
        temporary = target.with_name(f".{target.name}.{os.getpid()}")
        temporary.write_bytes(record.to_bytes())
        os.replace(temporary, target)

    def read(self, job_id: str, attempt: int) -> LaunchRecord | None:
        """The record, None if there is none. An unreadable one still says that a launch was
        begun: it reads as a record without a pid."""
        path = self.path(job_id, attempt)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("cannot read launch record %s: %s", path, exc)
            return LaunchRecord(job_id, attempt, EPOCH, -1, "", None)
        try:
            record = LaunchRecord.parse(data)
        except ValueError as exc:
            logger.warning("unreadable launch record %s: %s", path, exc)
            return LaunchRecord(job_id, attempt, EPOCH, -1, "", None)
        if (record.job_id, record.attempt) != (job_id, attempt):
            logger.warning("launch record %s names another attempt: ignored", path)
            return LaunchRecord(job_id, attempt, EPOCH, -1, "", None)
        return record

    def remove(self, job_id: str, attempt: int) -> None:
        self.path(job_id, attempt).unlink(missing_ok=True)

    def listed(self) -> list[tuple[str, int]]:
        """(job, attempt) of every record."""
        try:
            names = sorted(p.name for p in self.directory.iterdir())
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            match = _NAME.fullmatch(name)
            if match is not None:
                found.append((match.group("job"), int(match.group("attempt"))))
        return found


def running_identity(running: RunningInfo) -> ProcessIdentity:
    return ProcessIdentity(running.host, running.pid, running.start_ticks, running.boot_id)


def same_process(a: ProcessIdentity, b: ProcessIdentity) -> bool:
    """True if both name one process (start times compared where both are known: a record of
    an earlier version has none)."""
    if (a.host, a.pid) != (b.host, b.pid):
        return False
    return a.start_ticks is None or b.start_ticks is None or a.start_ticks == b.start_ticks


# -- the verdict on one attempt -----------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """What a member found of one attempt placed on it that it did not start in this life."""

    attempt: int
    record: LaunchRecord | None = None
    running: RunningInfo | None = None
    running_unreadable: bool = False
    #: the attempt of the job's ``outcome`` node, if there is one
    outcome_attempt: int | None = None
    #: processes whose current directory is the attempt's working directory, oldest first
    in_directory: list[ProcessIdentity] = field(default_factory=list)
    #: this boot (a launch record of another one is of a driver that died with it)
    boot_id: str | None = None


@dataclass(frozen=True)
class Verdict:
    reason: str


@dataclass(frozen=True)
class Adopt(Verdict):
    """Its driver lives: follow it."""

    identity: ProcessIdentity


@dataclass(frozen=True)
class Dead(Verdict):
    """Its driver is verified gone: record how (``how``); release its ``running`` node if it
    still holds it (``release``: the dead holder); remove its working directory."""

    how: str
    release: ProcessIdentity | None = None


@dataclass(frozen=True)
class Leave(Verdict):
    """Neither launch nor touch anything: the attempt is somebody else's to decide."""


@dataclass(frozen=True)
class Launch(Verdict):
    """No driver of it ever started here: start it."""


Probe = Callable[[ProcessIdentity], Liveness]


def judge(found: Found, probe: Probe) -> Verdict:
    """What to do with an attempt placed here whose driver this incarnation did not start.

    Never Launch when anything says a driver of the attempt may have started (a launch record,
    its running node, an outcome, a process in its directory); never Dead unless the process
    that may hold it is verified dead.
    """
    attempt, record = found.attempt, found.record
    held = found.running if found.running and found.running.attempt == attempt else None
    named = [record.identity] if record is not None and record.identity else []
    if held is not None:
        named.append(running_identity(held))
    # The processes in the attempt's directory are the driver's children too (its Spark JVM):
    # asked only when nothing names the driver with its start time, and then only for the pid
    # that holds the attempt, if one does (a running node of an earlier version).
    candidates = [n for n in named if n.start_ticks is not None] or [
        p for p in found.in_directory if held is None or p.pid == held.pid
    ]
    for candidate in candidates:
        if probe(candidate) is Liveness.ALIVE:
            return Adopt(f"its driver ({candidate.describe()}) is alive", candidate)
    if found.running_unreadable:
        return Leave("its running node is unreadable: its driver is taken to be alive")
    record_dead = record is not None and (
        record.identity is None
        or (record.boot_id is not None and record.boot_id != found.boot_id)
        or probe(record.identity) is Liveness.DEAD
    )
    if held is not None:
        holder = running_identity(held)
        launched = record.identity if record is not None else None
        # The holder is dead if it says so itself, or if it is the process this member launched
        # (a running node of an earlier version names no start time) and that one is dead.
        dead = probe(holder) is Liveness.DEAD or (
            record_dead and launched is not None and same_process(holder, launched)
        )
        if not dead:
            return Leave(f"its running node is held by {holder.describe()}, not known to be dead")
        return Dead(f"its driver ({holder.describe()}) is gone", _how(record), release=holder)
    if record is not None:
        return Dead("its driver is gone", _how(record))
    if found.outcome_attempt == attempt:
        return Leave("it ended already (its outcome is recorded)")
    return Launch("no driver of it was started here")


def _how(record: LaunchRecord | None) -> str:
    if record is not None and record.exited is not None:
        return record.exited
    if record is not None and record.pid is None:
        return "did not start (its daemon stopped while starting it)"
    return "ended while its daemon was down"
