"""What a restarted member makes of an attempt placed on it (pure, branch by branch), its launch
records, and telling processes apart by pid *and* start time (real processes of this host)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.member.adoption import (
    Adopt,
    Dead,
    Found,
    Launch,
    LaunchRecord,
    LaunchRecords,
    Leave,
    Probe,
    Verdict,
    judge,
)
from recovery.shared.processes import Liveness, ProcessIdentity
from zkstore.records.job_records import RunningInfo
from zkstore.records.strict import parse_time

pytestmark = pytest.mark.unit

HOST, BOOT = "h", "boot-1"
T = "2026-11-21T11:59:00.000Z"


def ident(
    pid: int, ticks: int | None = 1000, host: str = HOST, boot: str | None = BOOT
) -> ProcessIdentity:
    return ProcessIdentity(host, pid, ticks, boot)


def probe_with(alive: set[int], dead: set[int]) -> Probe:
    def probe(identity: ProcessIdentity) -> Liveness:
        if identity.start_ticks is None or identity.host != HOST or identity.boot_id != BOOT:
            return Liveness.UNKNOWN
        if identity.pid in alive:
            return Liveness.ALIVE
        return Liveness.DEAD if identity.pid in dead else Liveness.UNKNOWN

    return probe


def record(pid: int | None = 10, ticks: int | None = 1000, **kw: object) -> LaunchRecord:
    values: dict[str, object] = {
        "job_id": "j",
        "attempt": 1,
        "assigned": parse_time(T),
        "status_version": 3,
        "host": HOST,
        "boot_id": BOOT,
        "pid": pid,
        "start_ticks": ticks,
        **kw,
    }
    return LaunchRecord(**values)  # type: ignore[arg-type]


def running(pid: int = 10, attempt: int = 1, ticks: int | None = 1000) -> RunningInfo:
    return RunningInfo(
        version=0,
        attempt=attempt,
        host=HOST,
        pid=pid,
        started=parse_time(T),
        start_ticks=ticks,
        boot_id=BOOT,
    )


def verdict(
    found: Found, alive: frozenset[int] = frozenset(), dead: frozenset[int] = frozenset()
) -> Verdict:
    return judge(found, probe_with(set(alive), set(dead)))


def test_nothing_says_a_driver_started_so_it_is_launched() -> None:
    assert isinstance(verdict(Found(attempt=1, boot_id=BOOT)), Launch)


def test_a_live_driver_is_adopted_from_its_record_or_its_running_node() -> None:
    by_record = verdict(Found(attempt=1, record=record(), boot_id=BOOT), alive=frozenset({10}))
    assert isinstance(by_record, Adopt) and by_record.identity.pid == 10
    by_node = verdict(
        Found(attempt=1, running=running(pid=11), boot_id=BOOT), alive=frozenset({11})
    )
    assert isinstance(by_node, Adopt) and by_node.identity.pid == 11
    starting = verdict(
        Found(attempt=1, in_directory=[ident(12)], boot_id=BOOT), alive=frozenset({12})
    )
    assert isinstance(starting, Adopt) and starting.identity.pid == 12


def test_a_process_left_in_the_directory_is_not_taken_for_a_dead_driver() -> None:
    """A dead driver's Spark JVM still in its directory is not the driver."""
    found = Found(
        attempt=1, record=record(), running=running(), in_directory=[ident(20)], boot_id=BOOT
    )
    assert isinstance(verdict(found, alive=frozenset({20}), dead=frozenset({10})), Dead)
    old = Found(attempt=1, running=running(ticks=None), in_directory=[ident(20), ident(10)])
    adopted = verdict(old, alive=frozenset({10, 20}))
    assert isinstance(adopted, Adopt) and adopted.identity.pid == 10, "the holder's pid only"


def test_a_dead_holder_is_buried_and_its_running_node_released() -> None:
    found = Found(attempt=1, record=record(), running=running(), boot_id=BOOT)
    result = verdict(found, dead=frozenset({10}))
    assert isinstance(result, Dead) and result.release == ident(10)
    assert result.how == "ended while its daemon was down"
    kept = verdict(
        Found(attempt=1, record=record(exited="killed by signal 9"), boot_id=BOOT),
        dead=frozenset({10}),
    )
    assert isinstance(kept, Dead) and kept.how == "killed by signal 9" and kept.release is None


def test_a_pid_reused_by_another_process_is_not_the_driver() -> None:
    """The same pid alive with another start time is another process: the driver is dead."""

    def probe(identity: ProcessIdentity) -> Liveness:
        return Liveness.ALIVE if identity.start_ticks == 2000 else Liveness.DEAD

    found = Found(attempt=1, record=record(ticks=1000), running=running(ticks=1000), boot_id=BOOT)
    assert isinstance(judge(found, probe), Dead)


def test_a_holder_that_cannot_be_checked_is_left_alone() -> None:
    elsewhere = RunningInfo(version=0, attempt=1, host="other", pid=10, started=parse_time(T))
    left = verdict(
        Found(attempt=1, record=record(), running=elsewhere, boot_id=BOOT), dead=frozenset({10})
    )
    assert isinstance(left, Leave), "another host's process: never taken for dead"
    unreadable = verdict(Found(attempt=1, running_unreadable=True, boot_id=BOOT))
    assert isinstance(unreadable, Leave)


def test_an_earlier_versions_running_node_is_released_through_the_record() -> None:
    """A running node without a start time, held by the pid this member launched (dead)."""
    old = running(ticks=None)
    found = Found(attempt=1, record=record(), running=old, boot_id=BOOT)
    result = verdict(found, dead=frozenset({10}))
    assert isinstance(result, Dead) and result.release is not None


def test_a_launch_begun_is_never_launched_again() -> None:
    intent = verdict(Found(attempt=1, record=record(pid=None, ticks=None), boot_id=BOOT))
    assert isinstance(intent, Dead) and "did not start" in intent.how
    rebooted = verdict(Found(attempt=1, record=record(boot_id="boot-0"), boot_id=BOOT))
    assert isinstance(rebooted, Dead), "a record of an earlier boot: that driver died with it"
    ended = verdict(Found(attempt=1, outcome_attempt=1, boot_id=BOOT))
    assert isinstance(ended, Leave)


def test_another_attempts_running_node_does_not_stop_a_launch() -> None:
    assert isinstance(verdict(Found(attempt=2, running=running(attempt=1), boot_id=BOOT)), Launch)


# -- launch records -------------------------------------------------------------------------------


def test_launch_records_round_trip_and_garbage_still_says_launched(tmp_path: Path) -> None:
    records = LaunchRecords(tmp_path, "d1")
    records.write(record())
    assert records.read("j", 1) == record()
    assert records.listed() == [("j", 1)]
    records.path("j", 2).write_text("{not json")
    garbage = records.read("j", 2)
    assert garbage is not None and garbage.pid is None, "a launch was begun: never again"
    assert records.read("j", 3) is None
    assert LaunchRecords(tmp_path, "d2").listed() == [], "each daemon its own records"
    records.remove("j", 1)
    assert records.read("j", 1) is None


# -- real processes --------------------------------------------------------------------------------
