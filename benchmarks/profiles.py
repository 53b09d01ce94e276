"""Reading the profiles of ``benchmarks/bench_cost.py``: py-spy's raw output, the probe's counts
of ZooKeeper requests, cProfile's stats; each summarized as the top items per kind of process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path


def start_spy(pid: int, out: Path, subprocesses: bool) -> subprocess.Popen[bytes]:
    spy = Path(sys.executable).parent / "py-spy"
    command = [str(spy), "record", "--nonblocking", "-r", "200", "--format", "raw"]
    command += ["--full-filenames", "-o", str(out), "-p", str(pid)]
    if subprocesses:
        command.append("--subprocesses")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # py-spy attaches
    if process.poll() is not None:
        assert process.stderr is not None
        raise RuntimeError(f"py-spy: {process.stderr.read().decode(errors='replace')}")
    return process


def stop_spy(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()


def _short(frame: str) -> str:
    """``func (/long/path/site-packages/kazoo/x.py:12)`` as ``func (kazoo/x.py)``."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/lib/python3", "/work/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    if path.startswith(".11/"):
        path = "stdlib/" + path[4:]
    return f"{name} ({path})"


#: Innermost frames of a thread that waits: py-spy's idle detection misses some of them (its
#: samples add up to more than the CPU measured), so they are counted apart, not ranked.
WAITING = ("Condition.wait ", "EpollSelector.select ", "Event.wait ", "Queue.get ", "select (")


def _spy_stacks(path: Path, spied: int) -> dict[int, list[tuple[list[str], int]]]:
    """py-spy's raw (folded) output: each process's stacks (code frames only) and counts."""
    stacks: dict[int, list[tuple[list[str], int]]] = defaultdict(list)
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = stack.split(";")
        pids = [int(f.split(":", 1)[0].split()[1]) for f in frames if f.startswith("process ")]
        code = [f for f in frames if not f.startswith("process ")]
        if code:
            stacks[pids[-1] if pids else spied].append((code, int(count)))
    return stacks


def _kind_of(pid: int, samples: list[tuple[list[str], int]], daemon: int, server: int) -> str:
    if pid in (daemon, server):
        return "daemon" if pid == daemon else "fork server"
    text = " ".join(";".join(code) for code, _ in samples)
    return "shippers" if "recovery/member/log_shipper.py" in text else "drivers"


def summarize_spy(path: Path, spied: int, daemon: int, fork_server: int, top: int) -> None:
    """Top functions per kind of process: own samples (the innermost frame) and inclusive ones
    (anywhere in the stack), waiting frames left out."""
    own: dict[str, Counter[str]] = defaultdict(Counter)
    inclusive: dict[str, Counter[str]] = defaultdict(Counter)
    waiting: Counter[str] = Counter()
    for pid, samples in _spy_stacks(path, spied).items():
        kind = _kind_of(pid, samples, daemon, fork_server)
        for code, count in samples:
            if _short(code[-1]).startswith(WAITING):
                waiting[kind] += count
                continue
            own[kind][_short(code[-1])] += count
            for frame in {_short(f) for f in code}:
                inclusive[kind][frame] += count
    for kind in sorted(own):
        total = sum(own[kind].values())
        print(
            f"  profile of {kind}: {total} samples at 200/s, {waiting[kind]} more in waits "
            "(left out)"
        )
        for title, counter in (("own", own[kind]), ("inclusive", inclusive[kind])):
            print(f"    top {top} by {title} samples:")
            for frame, count in counter.most_common(top):
                print(f"      {count / total:6.1%}  {frame}")


def summarize_zkcalls(probe: Path, jobs: int, top: int) -> None:
    """The ZooKeeper requests each kind of process sent, per job (the daemon's over its whole
    life: its start, the idle window and every run, divided by the jobs it ran)."""
    by_role: dict[str, Counter[str]] = defaultdict(Counter)
    for line in probe.read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "zkcalls":
            by_role[event["role"]].update(event["calls"])
    for role, calls in sorted(by_role.items()):
        total = sum(calls.values())
        print(f"  ZooKeeper requests sent by {role}: {total / jobs:.1f} per job; the top {top}:")
        for call, count in calls.most_common(top):
            print(f"    {count / jobs:7.2f}  {call}")


def summarize_cprofile(directory: Path, top: int) -> None:
    """Top functions of the drivers' and shippers' main threads, by the CPU they used (own and
    cumulative), added up over every run, shown per run."""
    import pstats

    for kind in ("driver", "shipper"):
        files = sorted(directory.glob(f"{kind}-*.prof"))
        if not files:
            continue
        stats = pstats.Stats(*(str(f) for f in files), stream=open(os.devnull, "w"))  # noqa: SIM115
        table = stats.stats  # type: ignore[attr-defined]
        runs = len(files)
        total = sum(row[2] for row in table.values())
        print(f"  cProfile of {runs} {kind}s' main threads: {total / runs * 1000:.1f} ms CPU each")
        for title, index in (("cumulative", 3), ("own", 2)):
            print(f"    top {top} by {title} CPU, ms per run:")
            rows = sorted(table.items(), key=lambda item: item[1][index], reverse=True)
            for (filename, line, function), row in rows[:top]:
                where = _short(f"{function} ({filename}:{line})")
                print(f"      {row[index] / runs * 1000:7.2f}  {row[1] / runs:6.1f} calls  {where}")
