"""What the tests of warm driver JVMs (issue 47) read: a daemon's log of its warm drivers, the
processes ``ps`` names ``zkstore warm-driver ID``, ``zkstore jobs show`` and a driver's log."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
from pathlib import Path

from recovery.dev.localcluster import DaemonProcess, LocalCluster
from recovery.member.warm_jvms.pool import JVM_START_TIMEOUT, WARM_UP_TIMEOUT
from tests.cli import connection, json_of
from tests.helpers import BIN
from zkstore.config import StoreConfig

#: A warm driver's start and warm-up, at their own deadlines.
WARM = JVM_START_TIMEOUT + WARM_UP_TIMEOUT
#: A small Spark job from its submission (a cold JVM on a loaded 2-core machine).
JOB = 300.0
_READY = re.compile(r"warm driver ([0-9a-f]{8}) ready")
_TOOK = re.compile(
    r"job (\S+): attempt (\d+) took warm driver ([0-9a-f]{8}) \(its Spark JVM, pid (\d+)\)"
)
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
_STARTED = re.compile(r"warm driver [0-9a-f]{8} ready \(pid \d+, started and warmed in ([0-9.]+) s")


def ready(daemon: DaemonProcess) -> set[str]:
    """The warm drivers the daemon says are ready and no attempt took."""
    log = daemon.log()
    return set(_READY.findall(log)) - {m[2] for m in _TOOK.findall(log)}


def took(daemon: DaemonProcess, job_id: str) -> tuple[str, int] | None:
    """The warm driver (id, JVM pid) an attempt of ``job_id`` took, per the daemon's log."""
    for job, _, warm_id, pid in _TOOK.findall(daemon.log()):
        if job == job_id:
            return warm_id, int(pid)
    return None


def stamp(line: str) -> float:
    """The moment a log line was written (its timestamp, seconds since the epoch)."""
    found = _STAMP.match(line)
    assert found is not None, line
    return datetime.datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def next_start_after_take(daemon: DaemonProcess, warm_id: str) -> float:
    """Seconds from the daemon's line saying an attempt took ``warm_id`` to the start of the
    next warm driver it made ready (that line's moment less its "started and warmed in")."""
    lines = daemon.log().splitlines()
    at = next(n for n, line in enumerate(lines) if f"took warm driver {warm_id}" in line)
    for line in lines[at + 1 :]:
        started = _STARTED.search(line)
        if started:
            return stamp(line) - float(started.group(1)) - stamp(lines[at])
    raise AssertionError(f"no warm driver ready after {warm_id} was taken")


def show(config: StoreConfig, job_id: str, *, installed: bool = False) -> dict[str, object]:
    """``zkstore jobs show JOB --format json``: in this process (a wait asks it again and again,
    without a new interpreter each time), or by the ``installed`` script as a user runs it."""
    if not installed:
        found: dict[str, object] = json_of(config, "jobs show", job_id)
        return found
    done = subprocess.run(
        [str(BIN / "zkstore"), "jobs", "show", job_id, "--format", "json", *connection(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    shown: dict[str, object] = json.loads(done.stdout)
    return shown


def had(
    config: StoreConfig, job_id: str, attempt: int = 1, *, installed: bool = False
) -> str | None:
    """The driver JVM ``jobs show`` says the attempt had, once the attempt's end is told."""
    attempts = show(config, job_id, installed=installed)["attempts"]
    assert isinstance(attempts, list), attempts
    for entry in attempts:
        if entry["attempt"] == attempt and entry["outcome"] != "PLACED":
            return str(entry.get("jvm"))
    return None


def driver_log(local: LocalCluster, job_id: str, attempt: int = 1) -> str:
    return (local.work_dir / "drivers" / job_id / f"attempt-{attempt}.log").read_text()


def titled_warm(local: LocalCluster) -> list[int]:
    """The processes of the cluster that ``ps`` shows as ``zkstore warm-driver ID``."""
    found = []
    for pid in local.spark_jvms():
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if command.startswith(b"zkstore warm-driver "):
            found.append(pid)
    return found
