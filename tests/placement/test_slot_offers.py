"""A freed driver slot is offered to the jobs that could take it, and only those (issue 28).

Before, each freed slot made the leader read again the first 16 waiting jobs (or 4 per free
slot): a backlog of 40 queued jobs on 4 slots read every waiting job about 16 times in its
life. Now the jobs read again are those the free slots could take, in the order they wait; a
job whose labels no free member has does not hold back the ones behind it.
"""

from __future__ import annotations

import pytest

from recovery.leader.placement import Fleet
from recovery.shared.fleet_view import Member
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.strict import parse_time, utc_now

pytestmark = pytest.mark.unit


def member(name: str, slots: int, used: int, *, drained: bool = False, **labels: str) -> Member:
    info = MemberInfo(
        version=None,
        daemon_id=name,
        host="h",
        pid=1,
        slots=slots,
        labels=labels,
        started=parse_time(utc_now()),
    )
    return Member(info, drained, frozenset(f"{name}-job{n}" for n in range(used)))


def test_as_many_waiting_jobs_as_free_slots_in_order() -> None:
    fleet = Fleet(members={"a": member("a", 4, 3), "b": member("b", 2, 1)})
    waiting = [(f"j{n:02d}", {}) for n in range(40)]
    assert fleet.could_start(waiting) == ["j00", "j01"]
    assert fleet.members["a"].free == 1, "nothing is taken"


def test_a_job_no_free_member_matches_does_not_hold_back_the_next() -> None:
    fleet = Fleet(
        members={
            "eu": member("eu", 2, 2, zone="eu"),
            "us": member("us", 2, 1, zone="us"),
            "off": member("off", 4, 0, drained=True, zone="eu"),
        }
    )
    waiting = [("wants-eu", {"zone": "eu"}), ("any", {}), ("wants-us", {"zone": "us"})]
    assert fleet.could_start(waiting) == ["any"]
    assert fleet.could_start([("wants-us", {"zone": "us"})]) == ["wants-us"]
    assert Fleet().could_start(waiting) == []
