"""Each test's time kept from run to run (tests/durations.py): the order of the files and the
run's summary."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import durations
from tests.durations import Recorder, order_longest_files_first, spread

pytestmark = pytest.mark.unit

E2E = "tests/lifecycle/test_runtime.py"
UNIT = "tests/tooling/test_durations.py"


def item(nodeid: str, level: str = "unit") -> Any:
    """A collected test as the ordering sees it: its node id, its path and its level's mark."""
    return SimpleNamespace(
        nodeid=nodeid,
        path=durations.ROOT / nodeid.split("::", maxsplit=1)[0],
        get_closest_marker=lambda name: object() if name == level else None,
    )


def report(nodeid: str, seconds: float) -> pytest.TestReport:
    return pytest.TestReport(nodeid, ("", 0, ""), {}, "passed", None, "call", duration=seconds)


def test_a_files_cost_is_the_sum_of_its_tests_longest_file_first() -> None:
    items = [
        item(f"{UNIT}::a"),
        item(f"{UNIT}::b"),
        item(f"{E2E}::c", "e2e"),
        item(f"{E2E}::d", "e2e"),
    ]
    known = {f"{UNIT}::a": 30.0, f"{UNIT}::b": 25.0, f"{E2E}::c": 40.0}
    order_longest_files_first(items, known)  # unit: 55 s; e2e: 40 s + d's usual 5 s
    assert [i.nodeid for i in items] == [f"{UNIT}::a", f"{UNIT}::b", f"{E2E}::c", f"{E2E}::d"]
    known[f"{E2E}::d"] = 20.0
    order_longest_files_first(items, known)
    assert [i.nodeid for i in items] == [f"{E2E}::c", f"{E2E}::d", f"{UNIT}::a", f"{UNIT}::b"]


def test_the_spark_files_are_spread_through_the_run_each_kind_longest_first() -> None:
    """Four Spark JVMs side by side on two cores made each of their tests take half as long
    again: the files that start them are handed out among the others, each kind as far
    through its seconds as the other."""
    costs = {"A": 100.0, "B": 50.0, "C": 10.0, "X": 100.0, "Y": 100.0, "Z": 50.0, "W": 10.0}
    assert spread(costs, {"A", "B", "C"}) == ["A", "X", "Y", "B", "Z", "C", "W"]
    assert spread(costs, set()) == ["A", "X", "Y", "B", "Z", "C", "W"]  # longest, then by name
    assert spread(costs, {"X", "Y"}) == ["X", "A", "B", "Y", "Z", "C", "W"]
    spark = item(f"{UNIT}::s", "spark")  # a file with a Spark test goes first at a tie
    items = [item(f"{E2E}::c", "e2e"), spark]
    order_longest_files_first(items, {f"{E2E}::c": 7.0, spark.nodeid: 7.0})
    assert [i.nodeid for i in items] == [spark.nodeid, f"{E2E}::c"]


def test_a_files_whole_time_counts_until_its_tests_are_timed() -> None:
    items = [item(f"{UNIT}::a"), item(f"{E2E}::c", "e2e")]
    order_longest_files_first(items, {E2E: 100.0, f"{UNIT}::a": 50.0})
    assert [i.nodeid for i in items] == [f"{E2E}::c", f"{UNIT}::a"]
    order_longest_files_first(items, {E2E: 100.0, f"{E2E}::c": 1.0, f"{UNIT}::a": 50.0})
    assert [i.nodeid for i in items] == [f"{UNIT}::a", f"{E2E}::c"]


def test_a_test_not_timed_costs_what_its_level_usually_does_whatever_its_folder() -> None:
    """The level is the module's marker: an end-to-end test in a concern folder (not ``e2e/``)
    not timed yet still counts an end-to-end test's usual seconds."""
    untimed = [item(f"{E2E}::new", "e2e"), item(f"{UNIT}::new"), item(f"{UNIT}::newer")]
    timed = item(f"{UNIT}::timed")
    items = [timed, *untimed]
    order_longest_files_first(items, {timed.nodeid: 4.0})
    # the e2e file 5 s, the unit file 4 s and two unit tests' usual 0.02 s
    assert [i.nodeid for i in items] == [
        f"{E2E}::new",
        *(f"{UNIT}::{n}" for n in ("new", "newer", "timed")),
    ]
    assert durations.usual_cost(untimed[0]) == durations.USUAL_COST["e2e"]
    assert durations.usual_cost(untimed[1]) == durations.USUAL_COST["unit"]
    assert durations.usual_cost(item(f"{UNIT}::x", "none")) == 1.0


def test_the_summary_names_the_ten_slowest_tests_with_their_time() -> None:
    recorder = Recorder()
    for n in range(12):
        for phase_seconds in (0.5, float(n), 0.25):  # setup, call, teardown
            recorder.pytest_runtest_logreport(report(f"{UNIT}::t{n:02d}", phase_seconds))
    lines = recorder.summary()
    assert lines[0] == "the 10 slowest tests of this run (setup, call and teardown):"
    assert lines[1] == f"   11.75 s  {UNIT}::t11"
    assert lines[10] == f"    2.75 s  {UNIT}::t02"
    assert len(lines) == 11


def test_saved_times_are_per_test_and_keep_what_this_run_did_not_time(tmp_path: Path) -> None:
    recorder = Recorder()
    recorder.pytest_runtest_logreport(report(f"{UNIT}::test_saved_times_are_per_test", 1.234))
    known = {
        f"{UNIT}::test_the_summary_names_the_ten_slowest_tests_with_their_time": 0.5,
        f"{UNIT}::test_no_longer_defined": 9.0,
        "tests/tooling/test_gone.py::test_x": 9.0,
        E2E: 100.0,
        UNIT: 3.0,
    }
    path = tmp_path / "durations.json"
    assert recorder.save(known, path) == 3
    assert json.loads(path.read_text()) == {
        E2E: 100.0,
        f"{UNIT}::test_saved_times_are_per_test": 1.23,
        f"{UNIT}::test_the_summary_names_the_ten_slowest_tests_with_their_time": 0.5,
    }


def test_fast_leaves_out_properties_and_the_tests_timed_over_a_second() -> None:
    quick, slow, new, prop = (item(f"{UNIT}::{name}") for name in ("q", "s", "n", "p"))
    for each in (quick, slow, new):
        each.get_closest_marker = lambda name: None
    prop.get_closest_marker = lambda name: object() if name == "property" else None
    known = {quick.nodeid: 0.4, slow.nodeid: 1.5, prop.nodeid: 0.1}
    assert durations.deselected_as_slow([quick, slow, new, prop], known) == [slow, prop]


def test_fast_holds_a_test_against_servers_to_0_3_s_and_a_unit_test_to_one() -> None:
    unit, integration = item(f"{UNIT}::u"), item(f"{E2E}::i", "integration")
    slower = item(f"{E2E}::s", "integration")
    known = {unit.nodeid: 0.7, integration.nodeid: 0.25, slower.nodeid: 0.7}
    assert durations.deselected_as_slow([unit, integration, slower], known) == [slower]


def test_the_summary_adds_up_the_cpu_and_names_the_tests_that_took_the_most() -> None:
    recorder = Recorder()
    for n in range(12):
        for phase_cpu in (0.5, float(n), 0.25):  # setup, call, teardown
            phase = report(f"{UNIT}::t{n:02d}", 0.1)
            phase.user_properties.append((durations.CPU, phase_cpu))
            phase.user_properties.append((durations.OWN_CPU, phase_cpu / 5))
            recorder.pytest_runtest_logreport(phase)
    lines = recorder.summary()
    at = lines.index(
        "CPU: 75.0 s in all (the test processes' own 15.0 s, the rest the processes they "
        "started); the 10 tests that took the most:"
    )
    assert lines[at + 1] == f"   11.75 s  {UNIT}::t11"
    assert lines[at + 10] == f"    2.75 s  {UNIT}::t02"
    assert len(lines) == at + 11
