"""Where the suite's CPU goes: per test, the CPU seconds of the test process and of the children
it reaped (daemons, drivers, the script, JVMs), beside the wall time, and the test process's own
share (in-process commands, clients, waits).

    .venv/bin/python -m pytest -p tests.cpu_usage -n 4 --dist loadfile
    python -m tests.cpu_usage          # the files that cost most, from .cpu-usage/*.tsv
    python -m tests.cpu_usage --own    # ... by the test process's own CPU
    python -m tests.cpu_usage --save   # their wall times into tests/durations.json, which
                                       # orders the files longest first (tests/conftest.py)

A child still running at a test's end (a session's ZooKeeper) is counted when it is reaped.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.durations import cpu_seconds

OUT = Path(".cpu-usage")
DURATIONS = Path(__file__).parent / "durations.json"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    (cpu, own), wall = cpu_seconds(), time.monotonic()
    yield
    OUT.mkdir(exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (cpu_after, own_after), took = cpu_seconds(), time.monotonic() - wall
    with open(OUT / f"{worker}.tsv", "a") as out:
        out.write(f"{item.nodeid}\t{cpu_after - cpu:.2f}\t{took:.2f}\t{own_after - own:.2f}\n")


def main() -> None:
    save = "--save" in sys.argv
    args = [arg for arg in sys.argv[1:] if arg != "--save"]
    cpu: collections.Counter[str] = collections.Counter()
    wall: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    for table in OUT.glob("*.tsv"):
        for line in table.read_text().splitlines():
            nodeid, spent, took, mine = line.split("\t")
            cpu[nodeid.split("::")[0]] += float(spent)
            wall[nodeid.split("::")[0]] += float(took)
            own[nodeid.split("::")[0]] += float(mine)
    if save:
        # a file's whole time, kept beside the per-test times make test saves (tests/durations.py)
        durations = {k: v for k, v in json.loads(DURATIONS.read_text()).items() if "::" in k}
        durations |= {name: round(took, 1) for name, took in wall.most_common() if took >= 1.0}
        DURATIONS.write_text(json.dumps(durations, indent=0) + "\n")
        print(f"{DURATIONS}: {len(durations)} files")
    print(
        f"CPU {sum(cpu.values()):.0f} s (the test processes' own {sum(own.values()):.0f} s), "
        f"wall {sum(wall.values()):.0f} s over {len(cpu)} files"
    )
    by = own if "--own" in args else cpu
    args = [arg for arg in args if arg != "--own"]
    for name, _ in by.most_common(int(args[0]) if args else 40):
        print(f"{cpu[name]:7.1f} s CPU ({own[name]:6.1f} s own) {wall[name]:7.1f} s wall  {name}")


if __name__ == "__main__":
    main()
