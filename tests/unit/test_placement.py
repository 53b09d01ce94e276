"""Placement: least loaded first, never overfilled, labels followed, drained daemons skipped."""

from __future__ import annotations

from recovery.leader.placement import Fleet
from recovery.shared.fleet import Member
from zkstore.jobs.records import MemberInfo
from zkstore.strict import parse_time, utc_now


def member(name: str, slots: int, *jobs_: str, drained: bool = False, **labels: str) -> Member:
    info = MemberInfo(
        version=0,
        daemon_id=name,
        host="h",
        pid=1,
        slots=slots,
        started=parse_time(utc_now()),
        labels=labels,
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
