"""Placement by pool, the pure part (recovery/leader/pool_placement.py) and the records: order,
limits, the waiting reason, and a job's pool in its run options."""

from __future__ import annotations

import pytest

from recovery.leader.pool_placement import (
    ahead_of,
    left_over,
    look_order,
    order,
    ready,
    refusal,
    running,
)
from zkstore.cluster.pools import Pool
from zkstore.errors import CorruptRecord
from zkstore.jobs.runspec import RunSpec

pytestmark = pytest.mark.unit

POOLS = {
    "backfill": Pool(version=0, name="backfill", max_running=2, priority=0),
    "urgent": Pool(version=0, name="urgent", max_running=None, priority=10),
    "mid": Pool(version=0, name="mid", max_running=1, priority=5),
}


def test_the_highest_priority_first_and_first_come_first_served_within_one() -> None:
    pool_of = {"b1": "backfill", "u1": "urgent", "m1": "mid", "b2": "backfill", "u2": "urgent"}
    assert order(["b1", "u1", "m1", "b2", "u2"], pool_of, POOLS) == ["u1", "u2", "m1", "b1", "b2"]


def test_a_job_of_a_pool_without_a_record_waits_as_priority_zero_without_limit() -> None:
    pool_of = {"d1": "default", "x1": "gone", "u1": "urgent"}
    assert order(["d1", "x1", "u1"], pool_of, POOLS) == ["u1", "d1", "x1"]
    assert refusal(POOLS, "gone", 1000) is None
    assert refusal(POOLS, "default", 1000) is None


def test_a_pool_at_its_limit_says_so() -> None:
    assert refusal(POOLS, "backfill", 1) is None
    assert refusal(POOLS, "backfill", 2) == "waiting: pool backfill at 2 of 2"
    zero = {"off": Pool(version=0, name="off", max_running=0)}
    assert refusal(zero, "off", 0) == "waiting: pool off at 0 of 0"


def test_running_counts_the_jobs_holding_a_slot_by_pool() -> None:
    pool_of = {"b1": "backfill", "b2": "backfill", "u1": "urgent"}
    counts = running({"b1", "b2", "u1", "unknown"}, pool_of)
    assert counts == {"backfill": 2, "urgent": 1}


def test_ready_offers_no_more_of_a_pool_than_its_limit_leaves_in_priority_order() -> None:
    waiting = [("b1", {}), ("b2", {}), ("m1", {}), ("m2", {}), ("u1", {"zone": "a"})]
    pool_of = {"b1": "backfill", "b2": "backfill", "m1": "mid", "m2": "mid", "u1": "urgent"}
    chosen = ready(waiting, pool_of, POOLS, {"backfill": 1})
    assert chosen == [("u1", {"zone": "a"}), ("m1", {}), ("b1", {})]
    assert ready(waiting, pool_of, POOLS, {"backfill": 2, "mid": 1}) == [("u1", {"zone": "a"})]


def test_the_leader_looks_by_tier_then_priority_then_the_longest_waiting() -> None:
    """A new urgent job goes before a waiting backfill job, and a leader that has just taken
    over (nobody waiting yet) looks by priority, not by id: the first job of a look that frees
    a slot is the one that gets it."""
    pool_of = {"a-bulk": "backfill", "z-urgent": "urgent", "m": "mid", "held": "backfill"}
    tiers = {"dirty": 0, "held": 1}
    ids = ["a-bulk", "z-urgent", "m", "held", "dirty", "x-new"]

    def tier(job: str) -> int:
        return tiers.get(job, 2)

    assert look_order(ids, tier, [], pool_of, POOLS) == [
        "dirty",
        "held",
        "z-urgent",
        "m",
        "a-bulk",
        "x-new",
    ]
    # within one priority the jobs waiting go first, in their order, then the others by id
    assert look_order(["x-new", "a-bulk", "b2"], tier, ["b2", "a-bulk"], pool_of, POOLS) == [
        "b2",
        "a-bulk",
        "x-new",
    ]


def test_a_job_leaves_the_free_slots_to_the_startable_jobs_ahead_of_it() -> None:
    """The pure decision behind the priority gap: a backfill job looked at for its own reason
    (new, its backoff over) takes a slot only if the waiting jobs ahead of it that could start
    leave one."""
    pool_of = {"u1": "urgent", "m1": "mid", "m2": "mid", "b1": "backfill", "b2": "backfill"}
    waiting = [("b1", {}), ("u1", {"zone": "a"}), ("m1", {}), ("m2", {})]
    # a new backfill job: every startable job of priority 0 or more is ahead; m2 is not (mid
    # runs one already)
    ahead = list(ahead_of("b2", waiting, pool_of, POOLS, {"mid": 0}))
    assert ahead == [("u1", {"zone": "a"}), ("m1", {}), ("b1", {})]
    assert list(ahead_of("b2", waiting, pool_of, POOLS, {"mid": 1})) == [
        ("u1", {"zone": "a"}),
        ("b1", {}),
    ]
    # a waiting job: only those before it in the order; the first has nobody ahead
    assert list(ahead_of("m1", waiting, pool_of, POOLS, {})) == [("u1", {"zone": "a"})]
    assert list(ahead_of("u1", waiting, pool_of, POOLS, {})) == []
    # a new urgent job: nobody of a higher priority waits
    assert list(ahead_of("u9", waiting, {**pool_of, "u9": "urgent"}, POOLS, {})) == [
        ("u1", {"zone": "a"})
    ]

    zones = {"d-a": {"zone": "a"}, "d-b": {"zone": "b"}}

    def matches(daemon: str, labels: object) -> bool:
        assert isinstance(labels, dict)
        return all(zones[daemon].get(k) == v for k, v in labels.items())

    # u1 takes d-a's slot, m1 and b1 d-b's: nothing left for b2
    assert left_over({"d-a": 1, "d-b": 2}, ahead, matches) == {}
    # one more slot on d-b: it is left
    assert left_over({"d-a": 1, "d-b": 3}, ahead, matches) == {"d-b": 1}
    # u1 cannot use d-b: with d-a full, m1 and b1 take two of d-b's three
    assert left_over({"d-b": 3}, ahead, matches) == {"d-b": 1}
    # a job ahead that no daemon with a free slot matches keeps nothing
    assert left_over({"d-b": 1}, [("u1", {"zone": "a"})], matches) == {"d-b": 1}
    assert left_over({"d-a": 0}, [], matches) == {}


def test_a_pool_record_reads_back_and_garbage_is_corrupt() -> None:
    record = Pool(
        version=None, name="etl", max_running=3, priority=7, written="2026-01-01T00:00:00Z"
    )
    back = Pool.from_znode(record.to_bytes(), None, "/p/etl")
    assert (back.name, back.max_running, back.priority) == ("etl", 3, 7)
    unlimited = Pool.from_znode(
        Pool(version=None, name="x", written="2026-01-01T00:00:00Z").to_bytes(), None, "/p/x"
    )
    assert unlimited.max_running is None
    with pytest.raises(CorruptRecord):
        Pool.from_znode(
            b'{"name":"Bad Name","priority":0,"written":"2026-01-01T00:00:00Z"}', None, "/p"
        )
    with pytest.raises(CorruptRecord):
        Pool.from_znode(
            b'{"name":"x","priority":5000,"written":"2026-01-01T00:00:00Z"}', None, "/p"
        )


def test_a_jobs_pool_travels_in_its_run_options() -> None:
    spec = RunSpec.of({"spark.master": "local[1]"}, {"zone": "a"}, "etl")
    assert RunSpec.from_json(spec.to_json()).pool == "etl"
    assert RunSpec.from_summary(spec.summary_fields()).pool_name == "etl"
    assert RunSpec.of({}, {}, None).pool_name == "default"
    assert RunSpec.of({}, {}, "default").summary_fields() == {}  # today's jobs: unchanged
    assert RunSpec.of({}, {}, "etl").summary_fields() == {"run": '{"pool":"etl"}'}
    with pytest.raises(ValueError, match="not a pool name"):
        RunSpec.of({}, {}, "Not A Pool")
    with pytest.raises(ValueError, match="'pool' is not text"):
        RunSpec.from_json('{"pool": 3}')
