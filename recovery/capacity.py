"""How many drivers this host can run at once: the default of ``zkstore daemon --max-drivers``.

::

    max_drivers = max(1, min(DRIVERS_PER_CORE * cores,
                             (memory - RESERVED_MEMORY) // DRIVER_MEMORY,
                             MAX_DEFAULT))

``cores`` are the CPUs this process may use (its affinity, and a cgroup CPU quota if one is
set: a container's share, not the machine's), ``memory`` the bytes it may use (``MemTotal``,
and a cgroup memory limit if one is set).

Why these numbers. A PySpark driver is two processes: the Python driver (about 80 MB resident
with pyspark and zkstore imported) and the Spark JVM it starts (``spark.driver.memory`` defaults
to 1 GB of heap; a small job's JVM is resident at 300-500 MB, and grows toward the heap as the job
caches or collects), so :data:`DRIVER_MEMORY` is 1 GiB: the default heap, which the JVM may fill,
plus the Python side. :data:`RESERVED_MEMORY` (1 GiB) is left to the daemon, its fork server, the
log shipping and the system. CPU: with a ``local[N]`` master the driver JVM runs the job's tasks
itself and uses up to N cores while it computes, but drivers spend much of their life waiting
(on a cluster master's executors, on storage, on a schedule), so two drivers per core keep the
host busy without making every job wait on every other. The memory bound is the one that
protects the host (a JVM that cannot get its heap dies, or the kernel kills one); the CPU bound
only keeps latency sane. :data:`MAX_DEFAULT` caps the default on a big host: more than 64
drivers on one daemon is a decision to make on purpose (``--max-drivers``), not by default.

On the machine this was written on (2 cores, 24 GiB): min(4, 23) = 4, where the old default was
32; on an 8-core, 16-GiB host: min(16, 15) = 15; in a container limited to 1.5 CPUs and 4 GiB:
min(3, 3) = 3.

Warm drivers (``--warm-drivers``, :mod:`recovery.member.warm_jvms.pool`) are Spark driver JVMs
kept started ahead of need, each about :data:`WARM_RESIDENT` resident once warmed (measured:
docs/operating.md) and a driver's JVM once an attempt takes it; so each counts as a driver's
:data:`DRIVER_MEMORY`, beside the slots::

    warm_drivers = max(0, min(max(1, WARM_PER_CORE * cores),
                              (memory - RESERVED_MEMORY) // DRIVER_MEMORY - max_drivers,
                              max_drivers, MAX_WARM_DEFAULT))

Their start and warm-up cost a few seconds of CPU each (once per attempt that takes one): one
per two cores keeps that from crowding the drivers that run. Here (2 cores, 24 GiB, 4 slots):
min(1, 19, 4, 4) = 1; on the 8-core, 16-GiB host: min(4, 0, ...) = 0 (the slots use the
memory); in the 4-GiB container: min(1, 0, ...) = 0.

Pure but for :func:`read_host_size`, which reads ``/proc`` and ``/sys/fs/cgroup`` under a root
directory (a test's own, or ``/``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DRIVERS_PER_CORE",
    "DRIVER_MEMORY",
    "MAX_DEFAULT",
    "MAX_WARM_DEFAULT",
    "RESERVED_MEMORY",
    "WARM_PER_CORE",
    "WARM_RESIDENT",
    "GiB",
    "HostSize",
    "default_max_drivers",
    "default_warm_drivers",
    "explain",
    "explain_warm",
    "parse_cfs",
    "parse_cpu_max",
    "parse_meminfo",
    "parse_memory_limit",
    "parse_own_cgroups",
    "read_host_size",
]

GiB = 1 << 30
DRIVER_MEMORY = 1 * GiB
RESERVED_MEMORY = 1 * GiB
DRIVERS_PER_CORE = 2
MAX_DEFAULT = 64
#: What a warm driver JVM holds resident once warmed (a small local context built and stopped):
#: 450-498 MiB RSS, 410-459 MiB PSS measured (``python -m benchmarks spark_resume``)
WARM_RESIDENT = 464 << 20
WARM_PER_CORE = 0.5
MAX_WARM_DEFAULT = 4


@dataclass(frozen=True)
class HostSize:
    """What this process may use: CPUs (a cgroup quota may make it a fraction) and bytes."""

    cores: float
    memory: int


def default_max_drivers(host: HostSize) -> int:
    """The default number of driver slots on ``host`` (at least 1)."""
    by_cpu = math.floor(host.cores * DRIVERS_PER_CORE)
    by_memory = (host.memory - RESERVED_MEMORY) // DRIVER_MEMORY
    return max(1, min(by_cpu, by_memory, MAX_DEFAULT))


def explain(host: HostSize) -> str:
    """One line for the daemon's log and ``--help``: the default and where it comes from."""
    return (
        f"{default_max_drivers(host)} driver slots: {host.cores:g} cores x {DRIVERS_PER_CORE}, "
        f"{host.memory / GiB:.1f} GiB less {RESERVED_MEMORY // GiB} GiB at "
        f"{DRIVER_MEMORY // GiB} GiB per driver, at most {MAX_DEFAULT}"
    )


def default_warm_drivers(host: HostSize, max_drivers: int) -> int:
    """The default number of warm driver JVMs on ``host`` with ``max_drivers`` slots (0: the
    slots leave no memory for one)."""
    by_cpu = max(1, math.floor(host.cores * WARM_PER_CORE))
    by_memory = (host.memory - RESERVED_MEMORY) // DRIVER_MEMORY - max_drivers
    return max(0, min(by_cpu, by_memory, max_drivers, MAX_WARM_DEFAULT))


def explain_warm(host: HostSize, max_drivers: int) -> str:
    """One line for the daemon's log: the default of ``--warm-drivers`` and where it comes
    from."""
    return (
        f"{default_warm_drivers(host, max_drivers)} warm driver(s): 1 per "
        f"{1 / WARM_PER_CORE:g} cores, {DRIVER_MEMORY // GiB} GiB each beside the "
        f"{max_drivers} slots' in {host.memory / GiB:.1f} GiB less {RESERVED_MEMORY // GiB} "
        f"GiB, at most {MAX_WARM_DEFAULT}"
    )


# -- reading the host ------------------------------------------------------------------------------


def parse_meminfo(text: str) -> int | None:
    """``MemTotal`` of ``/proc/meminfo``, in bytes."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "MemTotal":
            number, _, unit = value.strip().partition(" ")
            if number.isdigit():
                return int(number) * (1024 if unit.strip().lower() == "kb" else 1)
    return None


def parse_memory_limit(text: str) -> int | None:
    """A cgroup memory limit (v2 ``memory.max``, v1 ``memory.limit_in_bytes``), or None for no
    limit (``max``, or v1's "unlimited", a number near 2**63)."""
    value = text.strip()
    if not value.isdigit():
        return None
    limit = int(value)
    return None if limit >= 1 << 60 else limit


def parse_cpu_max(text: str) -> float | None:
    """A cgroup v2 ``cpu.max`` (``QUOTA PERIOD``) as CPUs, or None without a quota."""
    parts = text.split()
    if len(parts) != 2 or not parts[0].isdigit() or not parts[1].isdigit() or int(parts[1]) == 0:
        return None
    return int(parts[0]) / int(parts[1])


def parse_cfs(quota: str, period: str) -> float | None:
    """A cgroup v1 ``cpu.cfs_quota_us`` and ``cpu.cfs_period_us`` as CPUs, or None (quota -1)."""
    try:
        q, p = int(quota.strip()), int(period.strip())
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def parse_own_cgroups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup``: each controller's path (``""`` for the unified v2 hierarchy)."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            paths[controller] = parts[2].strip()
    return paths


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _places(cgroup: Path, own: dict[str, str], controller: str, *names: str) -> list[Path]:
    """Where a limit may be: in our own cgroup (v2, then v1's ``controller`` hierarchy), and at
    the top of the mount (a container's namespace shows its own cgroup there)."""
    places = []
    for base, key in ((cgroup, ""), (cgroup / controller, controller)):
        if key in own:
            places.append(base / own[key].lstrip("/"))
        places.append(base)
    return [place / name for place in dict.fromkeys(places) for name in names]


def read_host_size(root: Path = Path("/"), cpus: int | None = None) -> HostSize:
    """This host's size as this process sees it. ``cpus`` defaults to this process's affinity
    (``os.sched_getaffinity``); the CPU quotas and memory limits of its cgroups (v2 and v1, its
    own and the mount's top) apply if set. Anything unreadable counts as no limit; a host whose
    memory cannot be read at all counts as :data:`DRIVER_MEMORY` + :data:`RESERVED_MEMORY`
    (one driver)."""
    cores = float(cpus if cpus is not None else len(os.sched_getaffinity(0)))
    cgroup = root / "sys" / "fs" / "cgroup"
    own = parse_own_cgroups(_read(root / "proc" / "self" / "cgroup") or "")
    quotas = [parse_cpu_max(text) for text in _texts(_places(cgroup, own, "cpu", "cpu.max"))]
    for quota_path in _places(cgroup, own, "cpu", "cpu.cfs_quota_us"):
        quota, period = _read(quota_path), _read(quota_path.with_name("cpu.cfs_period_us"))
        if quota is not None and period is not None:
            quotas.append(parse_cfs(quota, period))
    cores = min([cores, *(q for q in quotas if q is not None)])
    names = ("memory.max", "memory.limit_in_bytes")
    limits = [parse_memory_limit(text) for text in _texts(_places(cgroup, own, "memory", *names))]
    total = parse_meminfo(_read(root / "proc" / "meminfo") or "")
    known = [m for m in (total, *limits) if m is not None]
    memory = min(known) if known else DRIVER_MEMORY + RESERVED_MEMORY
    return HostSize(cores=cores, memory=memory)


def _texts(paths: list[Path]) -> list[str]:
    return [text for path in paths if (text := _read(path)) is not None]
