"""The CPU of every process a run of the suite starts, and the processes it leaves running.

:func:`tests.durations.cpu_seconds` counts a process when its parent waits for it: a daemon
that outlives the test that started it, a driver whose daemon was killed, a JVM a killed
driver left to its lifeline, are counted late or never (a run of the suite at 1e2bb96's tests
counted 351 s of the 488 s its processes spent). The suite is CPU-bound on two cores (issue
57), so the summary needs the whole of it: the process that runs the suite (pytest-xdist's
controller, or pytest alone) moves itself into a cgroup of its own before any test process is
started (:meth:`SuiteCgroup.enter`), so that everything started after it is in that cgroup
whatever becomes of its parents, and reads the cgroup's ``cpu.stat`` at the end. Each test
process (an xdist worker) moves itself into one of its own inside it as it starts, and a test is
charged what its process's cgroup spent while it ran (:func:`tests.durations.cpu_seconds`): the
CPU of what it started, waited for or not, and of what its process keeps for all its tests
(its ZooKeeper server, a shared fleet) while it ran. A cgroup removed adds its CPU to its
parent's, so the run's count includes its test processes'.

The cgroup is a child of the controller's own cgroup in the unified (v2) hierarchy, which
counts CPU with no controller enabled (``usage_usec``). Where there is none, or it cannot be
written (not root), the summary says so and keeps the counted CPU alone.

At its end a test process moves itself back, and what it left running with it (the run's end
names those). At the end the controller moves itself back and waits for the cgroup to empty:
what is still there after :data:`EMPTY_WAIT` was left running by some test and is named in the
summary; it is moved to the controller's cgroup (never killed: a process's owner may still need
it) so that the cgroup, empty, can be removed. A cgroup is only ever removed empty (the kernel
refuses otherwise), and only one whose name says this module made it.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

#: how the cgroups of the suite's runs are named, the controller's pid after it
PREFIX = "zkstore-suite-"
#: how long the processes the test processes started get to end after them (a ZooKeeper
#: server's JVM a worker stopped, a lifeline wrapper that follows its child)
EMPTY_WAIT = 10.0
MOUNTS = Path("/proc/self/mounts")


def unified_mount(mounts: str) -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup``, or ``/sys/fs/cgroup/
    unified`` on a hybrid system), from ``/proc/self/mounts``; None without one."""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def own_unified_path(proc_cgroup: str) -> str | None:
    """This process's place in the v2 hierarchy (the ``0::`` line of ``/proc/PID/cgroup``)."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def cpu_stat(text: str) -> dict[str, float]:
    """``cpu.stat``'s microsecond counters, in seconds (``usage``, ``user``, ``system``,
    ``nice``)."""
    seconds = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key.endswith("_usec") and value.strip().isdigit():
            seconds[key.removesuffix("_usec")] = int(value) / 1e6
    return seconds


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "(ended)"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:160]


@dataclass
class Ended:
    """What the cgroup says at the end: its CPU (seconds by kind) and what was left running
    (pid and command line)."""

    cpu: dict[str, float]
    left: list[tuple[int, str]]

    def lines(self, counted: float) -> list[str]:
        usage = self.cpu.get("usage", 0.0)
        said = (
            f"CPU of every process the run started: {usage:.1f} s (user "
            f"{self.cpu.get('user', 0.0):.1f} s, system {self.cpu.get('system', 0.0):.1f} s, "
            f"at a lower priority {self.cpu.get('nice', 0.0):.1f} s; its cgroup), of which "
            f"the tests' own counts name {counted:.1f} s"
        )
        if not self.left:
            return [said, "left running after the run: nothing"]
        return [
            said,
            f"left running after the run ({len(self.left)}), moved out of its cgroup:",
            *(f"  pid {pid}: {command}" for pid, command in self.left),
        ]


class SuiteCgroup:
    """The run's cgroup: entered by the controller before any test process starts."""

    def __init__(self, path: Path, home: Path) -> None:
        self.path = path
        self.home = home  # the controller's cgroup before, where it and any leftover go back

    @classmethod
    def enter(cls, pid: int | None = None) -> SuiteCgroup | str:
        """Move this process into a new cgroup of its own; or why it cannot (a string)."""
        pid = os.getpid() if pid is None else pid
        try:
            mount = unified_mount(MOUNTS.read_text())
            own = own_unified_path(Path(f"/proc/{pid}/cgroup").read_text())
        except OSError as error:
            return f"no cgroup: {error}"
        if mount is None or own is None:
            return "no cgroup: no cgroup v2 hierarchy here"
        home = mount / own.lstrip("/")
        _remove_empty_leftovers(home)
        path = home / f"{PREFIX}{pid}"
        try:
            path.mkdir()
        except OSError as error:
            return f"no cgroup: {path}: {error.strerror}"
        try:
            (path / "cgroup.procs").write_text(f"{pid}\n")
        except OSError as error:
            with contextlib.suppress(OSError):
                path.rmdir()
            return f"no cgroup: moving into {path}: {error.strerror}"
        return cls(path, home)

    def cpu(self) -> dict[str, float]:
        return cpu_stat((self.path / "cpu.stat").read_text())

    def usage(self) -> float:
        """The CPU seconds of every process that has been in this cgroup while in it."""
        return self.cpu().get("usage", 0.0)

    def end(self, pid: int | None = None, wait: float = EMPTY_WAIT) -> Ended:
        """Move this process (``pid``, if still in it) out, wait up to ``wait`` for the rest
        to end, read the CPU, move what is left to this process's cgroup and remove the
        cgroup."""
        pid = os.getpid() if pid is None else pid
        if pid in self._members():
            (self.home / "cgroup.procs").write_text(f"{pid}\n")
        deadline = time.monotonic() + wait
        while self._members() and time.monotonic() < deadline:
            time.sleep(0.1)
        cpu = self.cpu()
        left = [(member, _command(member)) for member in self._members()]
        for member, _ in left:
            with contextlib.suppress(OSError):  # it may have ended meanwhile
                (self.home / "cgroup.procs").write_text(f"{member}\n")
        _remove(self.path)
        return Ended(cpu, left)

    def _members(self) -> list[int]:
        """Every process in this cgroup or in one inside it (a test process's, which a test
        process killed in mid-run could not remove)."""
        found = []
        for cgroup in [self.path, *_inside(self.path)]:
            with contextlib.suppress(OSError):  # removed meanwhile
                found += [int(pid) for pid in (cgroup / "cgroup.procs").read_text().split()]
        return found


def _inside(cgroup: Path) -> list[Path]:
    """The cgroups this module made inside ``cgroup``, the deepest first."""
    made = [path for path in cgroup.rglob(f"{PREFIX}*") if path.is_dir()]
    return sorted(made, key=lambda path: -len(path.parts))


def _remove(cgroup: Path) -> None:
    """Remove ``cgroup`` and the cgroups this module made inside it, the deepest first: each
    only if empty (the kernel refuses to remove a cgroup with a process or a child)."""
    for path in [*_inside(cgroup), cgroup]:
        with contextlib.suppress(OSError):
            path.rmdir()


def _remove_empty_leftovers(home: Path) -> None:
    """Remove the empty cgroups of earlier runs that could not remove their own (a killed
    controller): only this module's names, whose controller is gone (a run beside this one,
    ``make test-soak``'s, keeps its own), and only empty (``rmdir`` of a cgroup with a process
    or a child fails)."""
    with contextlib.suppress(OSError):
        for stale in home.glob(f"{PREFIX}*"):
            owner = stale.name.removeprefix(PREFIX)
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                _remove(stale)
