"""Placement: least loaded first, never overfilled, labels followed, drained daemons skipped; a
job that would take a warm JVM placed where one is ready."""

from __future__ import annotations

from dataclasses import replace

import pytest

from recovery.leader.placement import Fleet, would_take_warm
from recovery.shared.fleet_view import Member
from zkstore.jobs.runspec import RunSpec
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.strict import parse_time, utc_now

pytestmark = pytest.mark.unit


def member(
    name: str,
    slots: int,
    *jobs_: str,
    drained: bool = False,
    warm: int | None = None,
    **labels: str,
) -> Member:
    info = MemberInfo(
        version=0,
        daemon_id=name,
        host="h",
        pid=1,
        slots=slots,
        started=parse_time(utc_now()),
        labels=labels,
        warm_ready=warm,
    )
    return Member(info, drained, frozenset(jobs_))


def test_placement_is_least_loaded_first_and_never_overfills() -> None:
    fleet = Fleet({"a": member("a", 2, "x"), "b": member("b", 2), "c": member("c", 4, "y")})
    placed = [fleet.place(f"j{i}", {})[0] for i in range(5)]
    assert placed == ["b", "c", "c", "a", "b"], "the lightest first (by share of its slots)"
    assert fleet.place("j5", {})[0] == "c"
    daemon_id, why = fleet.place("j6", {})
    assert daemon_id is None and "all 8 driver slot(s)" in why


def test_placement_follows_labels_and_skips_drained_daemons() -> None:
    fleet = Fleet(
        {
            "cpu": member("cpu", 4),
            "gpu": member("gpu", 1, gpu="a100"),
            "off": member("off", 9, drained=True, gpu="a100"),
        }
    )
    assert fleet.place("train", {"gpu": "a100"})[0] == "gpu"
    daemon_id, why = fleet.place("train-2", {"gpu": "a100"})
    assert daemon_id is None and "slot" in why
    daemon_id, why = fleet.place("other", {"gpu": "h100"})
    assert daemon_id is None and "gpu=h100" in why
    assert fleet.place("plain", {})[0] == "cpu"


def test_a_job_that_would_take_a_warm_jvm_goes_where_one_is_ready() -> None:
    """Before the least loaded: the member with a warm JVM ready (``a`` would win every tie);
    each placement of a batch counts the JVM it would take; then least loaded as today. A job
    that would not take one is placed as today."""
    fleet = Fleet({"a": member("a", 4), "b": member("b", 4, "x", warm=2), "c": member("c", 4)})
    assert fleet.place("plain", {})[0] == "a", "no warm JVM wanted: least loaded, as today"
    placed = [fleet.place(f"s{i}", {}, warm=True) for i in range(3)]
    assert [p[0] for p in placed] == ["b", "b", "c"], placed
    assert placed[0][1] == "a warm driver ready there" and placed[2][1] == "no warm driver ready"
    assert fleet.members["b"].warm_ready == 0 and fleet.members["b"].free == 1


def test_a_placement_not_written_gives_back_the_warm_jvm_it_took() -> None:
    """The leader's write of a placement failed (the job changed meanwhile) and it looks at the
    job again within a second: the copy trusted then gave the JVM to nobody, and the job went
    to ``a``, without one (seen in a CI run of tests/spark/test_warm_placement.py)."""
    fleet = Fleet({"a": member("a", 4), "b": member("b", 4, warm=1)})
    assert fleet.place("j", {}, warm=True) == ("b", "a warm driver ready there")
    fleet.untake("b", "j")
    assert fleet.members["b"].warm_ready == 1 and fleet.members["b"].free == 4
    assert fleet.place("j", {}, warm=True) == ("b", "a warm driver ready there")
    fleet.assigned("b", "j")
    fleet.untake("b", "j")  # written after all: nothing to give back
    assert fleet.members["b"].warm_ready == 0 and not fleet.warm_taken


def test_warm_preference_keeps_labels_slots_and_drain() -> None:
    fleet = Fleet(
        {
            "gpu": member("gpu", 1, gpu="a100"),
            "full": member("full", 1, "x", warm=1, gpu="a100"),
            "off": member("off", 4, drained=True, warm=1, gpu="a100"),
            "cpu": member("cpu", 4, warm=1),
        }
    )
    assert fleet.place("train", {"gpu": "a100"}, warm=True)[0] == "gpu", "no free slot there"
    assert fleet.place("etl", {}, warm=True)[0] == "cpu"
    daemon_id, why = fleet.place("train-2", {"gpu": "a100"}, warm=True)
    assert daemon_id is None and "slot" in why


def test_a_refreshed_record_replaces_what_the_batch_counted() -> None:
    fleet = Fleet({"a": member("a", 4), "b": member("b", 4, warm=1)})
    assert fleet.place("s1", {}, warm=True)[0] == "b"
    assert fleet.place("s2", {}, warm=True)[0] == "a", "b's one JVM is taken"
    fleet.refresh({"b": replace(fleet.members["b"].info, warm_ready=1)})
    assert fleet.place("s3", {}, warm=True)[0] == "b"
    assert fleet.members["b"].assigned == {"s1", "s3"}, "its slots still counted"


def test_which_jobs_would_take_a_warm_jvm() -> None:
    assert would_take_warm(RunSpec.from_summary({}))
    assert would_take_warm(RunSpec.of({"spark.sql.shuffle.partitions": "4"}, {}))
    assert not would_take_warm(None), "garbled run options: no preference"
    fixed = RunSpec.of({"spark.driver.memory": "8g", "spark.sql.shuffle.partitions": "4"}, {})
    assert not would_take_warm(fixed), "a JVM-level setting: its own JVM"
