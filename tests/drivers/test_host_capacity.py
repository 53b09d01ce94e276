"""The default of ``--max-drivers`` (issue 27: 32 on a 2-core machine): derived from the cores and
memory this process may use, cgroup quotas and limits included."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.capacity import (
    MAX_DEFAULT,
    GiB,
    HostSize,
    default_max_drivers,
    explain,
    parse_cfs,
    parse_cpu_max,
    parse_meminfo,
    parse_memory_limit,
    parse_own_cgroups,
    read_host_size,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("cores", "memory_gib", "expected"),
    [
        (2, 24, 4),  # this project's machines: the CPU bounds it (the old default was 32)
        (8, 16, 15),  # memory bounds it: 15 GiB left at 1 GiB per driver
        (1.5, 4, 3),  # a container's quota of 1.5 CPUs
        (0.5, 1, 1),  # never less than one
        (256, 2048, MAX_DEFAULT),  # a big host: capped
    ],
)
def test_the_default_is_bounded_by_cores_and_memory(
    cores: float, memory_gib: int, expected: int
) -> None:
    assert default_max_drivers(HostSize(cores=cores, memory=memory_gib * GiB)) == expected


def test_the_explanation_names_both_bounds() -> None:
    line = explain(HostSize(cores=2, memory=24 * GiB))
    assert line.startswith("4 driver slots: 2 cores x 2, 24.0 GiB")


def test_parsers_of_proc_and_cgroup_files() -> None:
    assert parse_meminfo("MemTotal:       24684084 kB\nMemFree: 1 kB\n") == 24684084 * 1024
    assert parse_meminfo("garbage") is None
    assert parse_memory_limit("max\n") is None
    assert parse_memory_limit("9223372036854771712\n") is None  # v1's "unlimited"
    assert parse_memory_limit("4294967296\n") == 4 * GiB
    assert parse_memory_limit("-1") is None
    assert parse_cpu_max("max 100000\n") is None
    assert parse_cpu_max("150000 100000\n") == 1.5
    assert parse_cpu_max("1 0") is None
    assert parse_cfs("-1\n", "100000\n") is None
    assert parse_cfs("200000", "100000") == 2.0
    assert parse_cfs("x", "100000") is None
    assert parse_own_cgroups("4:memory:/a/b\n3:cpu,cpuacct:/c\n0::/d\nbad\n") == {
        "memory": "/a/b",
        "cpu": "/c",
        "cpuacct": "/c",
        "": "/d",
    }


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_cgroup_v1_container_is_sized_by_its_own_limits(tmp_path: Path) -> None:
    _write(tmp_path, "proc/meminfo", "MemTotal: 33554432 kB\n")  # 32 GiB on the machine
    _write(tmp_path, "proc/self/cgroup", "4:memory:/box\n3:cpu,cpuacct:/box\n")
    _write(tmp_path, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
    _write(tmp_path, "sys/fs/cgroup/memory/box/memory.limit_in_bytes", str(6 * GiB))
    _write(tmp_path, "sys/fs/cgroup/cpu/box/cpu.cfs_quota_us", "250000\n")
    _write(tmp_path, "sys/fs/cgroup/cpu/box/cpu.cfs_period_us", "100000\n")
    host = read_host_size(tmp_path, cpus=16)
    assert host == HostSize(cores=2.5, memory=6 * GiB)
    assert default_max_drivers(host) == 5


def test_a_cgroup_v2_container_and_an_unreadable_host(tmp_path: Path) -> None:
    _write(tmp_path, "proc/meminfo", "MemTotal: 16777216 kB\n")
    _write(tmp_path, "proc/self/cgroup", "0::/job\n")
    _write(tmp_path, "sys/fs/cgroup/job/memory.max", "max\n")
    _write(tmp_path, "sys/fs/cgroup/job/cpu.max", "100000 100000\n")
    assert read_host_size(tmp_path, cpus=8) == HostSize(cores=1.0, memory=16 * GiB)
    empty = tmp_path / "nothing"
    empty.mkdir()
    assert default_max_drivers(read_host_size(empty, cpus=8)) == 1  # memory unknown: one slot
