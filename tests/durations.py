"""Each test's time, kept from run to run (``tests/durations.json``).

The file maps a test's node id (``tests/lifecycle/test_runtime.py::test_...``) to the seconds its
setup, call and teardown took in the last run that saved them (``make test`` does: pytest's
``--save-durations``). It serves twice:

- the order of the files (:func:`order_longest_files_first`): pytest-xdist hands each worker a
  whole file at a time (``--dist loadfile``), so the files are run longest first, a file's
  cost being the sum of its tests' (a test not listed counts as a test of its level usually
  does), with the files that start Spark JVMs spread through the run (:func:`spread`);
- ``make test-fast`` (:func:`deselected_as_slow`): the tests that took under a second (of the
  levels it selects: unit and integration);
- the run's summary (:meth:`Recorder.summary`): the ten slowest tests of this run, where the
  time went; and the CPU (:func:`cpu_seconds`): the suite's in all, and the ten tests that
  took the most of it. A test's CPU is its process's and that of every process it waited for
  (its daemons, their fork servers, drivers and Spark JVMs, the ``zkstore`` scripts it ran):
  on this 2-core machine the suite is CPU-bound (issue 57), so the CPU, not the wall time, is
  what a cut must save. Where the run has a cgroup (:mod:`tests.suite_cgroup`: root and a
  cgroup v2 hierarchy), each test process has one of its own, and a test is charged what its
  process's cgroup spent during it: every process started there, waited for or not (a daemon
  orphaned by a kill, a JVM left to its lifeline), and the servers the test process keeps for
  all its tests (ZooKeeper, S3, Spark standalone, a shared fleet) for what they spent during
  it; the summary adds the run's whole CPU beside. Without one, a process is counted when it
  is waited for: a shared fleet's daemons by the test during which the fleet is replaced, not
  at all if it lasts to the run's end, nor the servers a test process keeps for all its tests.

A run of part of the suite saves its tests' times and keeps the others'; a test that no longer
exists is dropped (its file gone, or its function no longer in it).
"""

from __future__ import annotations

import json
import resource
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

import pytest

PATH = Path(__file__).parent / "durations.json"
ROOT = Path(__file__).parent.parent
#: what a test not listed is taken to cost, by its level (its module's marker: tests/levels.py)
USUAL_COST = {"e2e": 5.0, "integration": 0.5, "unit": 0.02}
#: how many of the slowest tests the summary names
SLOWEST = 10
#: the longest a test of ``make test-fast`` took in the last saved run, by level: a second for
#: a unit test, 0.3 s for a test against real servers (the unit and integration tests of every
#: concern within a minute on two cores shared with another suite: issue 57.3); a second for a
#: test of no level
FAST_LIMIT = {"unit": 1.0, "integration": 0.3}


#: the names of a report's user properties that carry its test's CPU seconds: all of it, and
#: the test process's own
CPU, OWN_CPU = "cpu_seconds", "own_cpu_seconds"


def cpu_seconds(in_cgroup: Callable[[], float] | None = None) -> tuple[float, float]:
    """The CPU (user and system) spent so far by this process and the processes it waited
    for, and by this process alone. ``in_cgroup``, the CPU of this process's cgroup
    (:mod:`tests.suite_cgroup`: a test process's own), counts instead every process this one
    started, waited for or not."""
    own, waited = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    mine = own.ru_utime + own.ru_stime
    if in_cgroup is not None:
        return in_cgroup(), mine
    return mine + waited.ru_utime + waited.ru_stime, mine


def load(path: Path = PATH) -> dict[str, float]:
    try:
        loaded = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    return {str(name): float(took) for name, took in loaded.items()}


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def order_longest_files_first(items: list[pytest.Item], known: Mapping[str, float]) -> None:
    """Sort ``items`` by their file's cost, longest first (collection order within a file and
    between equals), the files that start a Spark JVM (marked ``spark``) spread through the
    run (:func:`spread`). A key without ``::`` is a whole file's time (the form before
    per-test times), used for a file none of whose tests is listed."""
    costs: dict[str, float] = {}
    for item in items:
        name = file_of(item.nodeid)
        costs[name] = costs.get(name, 0.0) + known.get(item.nodeid, usual_cost(item))
    listed = {file_of(nodeid) for nodeid in known if "::" in nodeid}
    for name, took in known.items():
        if "::" not in name and name in costs and name not in listed:
            costs[name] = took
    heavy = {file_of(item.nodeid) for item in items if item.get_closest_marker("spark")}
    rank = {name: n for n, name in enumerate(spread(costs, heavy))}
    order = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda item: (rank[file_of(item.nodeid)], item.nodeid, order[id(item)]))


def spread(costs: Mapping[str, float], heavy: Collection[str]) -> list[str]:
    """The files in the order they are handed out: the ``heavy`` ones and the others each
    longest first, merged so that each kind is as far through its own seconds as the other
    (the next file is of the kind least far through; the longer one at a tie). So the Spark
    files do not all start at once: on two cores, four Spark JVMs side by side made each of
    their tests take half as long again, and the suite's CPU a fifth more (issue 57)."""
    kinds = [
        sorted(
            (name for name in costs if (name in heavy) == is_heavy), key=lambda n: (-costs[n], n)
        )
        for is_heavy in (True, False)
    ]
    totals = [sum(costs[name] for name in kind) or 1.0 for kind in kinds]
    done = [0.0, 0.0]
    merged: list[str] = []
    while kinds[0] or kinds[1]:
        ready = [k for k in (0, 1) if kinds[k]]
        k = min(ready, key=lambda k: (done[k] / totals[k], -costs[kinds[k][0]]))
        name = kinds[k].pop(0)
        done[k] += costs[name]
        merged.append(name)
    return merged


def level_of(item: pytest.Item) -> str | None:
    """The level of a test (its module's marker: tests/levels.py)."""
    return next((lvl for lvl in USUAL_COST if item.get_closest_marker(lvl) is not None), None)


def usual_cost(item: pytest.Item) -> float:
    """What a test not timed yet is taken to cost: what a test of its level usually does."""
    return USUAL_COST.get(level_of(item) or "", 1.0)


def deselected_as_slow(items: list[pytest.Item], known: Mapping[str, float]) -> list[pytest.Item]:
    """The items ``--fast`` leaves out: a property (its examples take seconds) and a test the
    last saved run timed over its level's :data:`FAST_LIMIT` (a test not timed yet is kept)."""
    return [
        item
        for item in items
        if item.get_closest_marker("property") is not None
        or known.get(item.nodeid, 0.0) > FAST_LIMIT.get(level_of(item) or "", 1.0)
    ]


class Recorder:
    """The seconds of each test of this run (setup, call and teardown added up), from the
    reports the process that reports receives (pytest-xdist's workers' included)."""

    def __init__(self) -> None:
        self.took: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.own_cpu = 0.0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.took[report.nodeid] = self.took.get(report.nodeid, 0.0) + report.duration
        for name, value in report.user_properties:
            if name == CPU:
                self.cpu[report.nodeid] = self.cpu.get(report.nodeid, 0.0) + float(value)
            elif name == OWN_CPU:
                self.own_cpu += float(value)

    def slowest(self, count: int = SLOWEST) -> list[tuple[str, float]]:
        return sorted(self.took.items(), key=lambda pair: (-pair[1], pair[0]))[:count]

    def summary(self, count: int = SLOWEST) -> list[str]:
        """The lines of the run's summary: its slowest tests, with their seconds."""
        if not self.took:
            return []
        shown = min(count, len(self.took))
        lines = [f"the {shown} slowest tests of this run (setup, call and teardown):"]
        lines += [f"{took:8.2f} s  {nodeid}" for nodeid, took in self.slowest(count)]
        if self.cpu:
            hungriest = sorted(self.cpu.items(), key=lambda pair: (-pair[1], pair[0]))[:count]
            lines.append(
                f"CPU: {sum(self.cpu.values()):.1f} s in all (the test processes' own "
                f"{self.own_cpu:.1f} s, the rest the processes they started); the "
                f"{len(hungriest)} tests that took the most:"
            )
            lines += [f"{cpu:8.2f} s  {nodeid}" for nodeid, cpu in hungriest]
        return lines

    def merged(self, known: Mapping[str, float]) -> dict[str, float]:
        """``known`` with this run's times; a test whose file is gone or no longer defines
        it is dropped, and so is a file's whole time once any of its tests is timed."""
        kept = {nodeid: took for nodeid, took in known.items() if "::" in nodeid and exists(nodeid)}
        kept.update({nodeid: round(took, 2) for nodeid, took in self.took.items()})
        timed = {file_of(nodeid) for nodeid in kept}
        kept.update(
            {
                name: took
                for name, took in known.items()
                if "::" not in name and name not in timed and (ROOT / name).exists()
            }
        )
        return dict(sorted(kept.items(), key=lambda pair: (-pair[1], pair[0])))

    def save(self, known: Mapping[str, float], path: Path = PATH) -> int:
        merged = self.merged(known)
        path.write_text(json.dumps(merged, indent=0) + "\n")
        return len(merged)


def exists(nodeid: str) -> bool:
    """Whether the test of ``nodeid`` is still defined (its function's name in its file)."""
    name = nodeid.rsplit("::", 1)[-1].split("[", 1)[0]
    try:
        return f"def {name}(" in (ROOT / file_of(nodeid)).read_text()
    except FileNotFoundError:
        return False
