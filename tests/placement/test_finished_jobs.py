"""The cleanups of finished jobs, kept until the leader's turn runs them (``FinishedJobs``): the
oldest first, at least one per turn, giving way to a waiting event after that; one that meets
an outage is kept and put off, one a look takes is no longer kept."""

from __future__ import annotations

import pytest

from recovery.leader import finished
from recovery.leader.finished import FinishedJobs
from tests import builders
from zkstore.errors import StoreUnavailable
from zkstore.jobs.snapshot import JobSnapshot

pytestmark = pytest.mark.unit

HANDLE = builders.handle(created="2026-11-27T12:00:00.000Z", version=None)


def kept(jobs: FinishedJobs, *names: str) -> list[str]:
    """Add a cleanup per name, each recording its name in the list returned when it runs."""
    ran: list[str] = []
    for name in names:
        jobs.add(JobSnapshot(job_id=name, handle=HANDLE), lambda name=name: ran.append(name))
    return ran


def direct(job: JobSnapshot, cleanup: finished.Cleanup) -> None:
    cleanup()


def test_the_oldest_first_one_at_least_then_until_an_event_waits() -> None:
    jobs = FinishedJobs()
    ran = kept(jobs, "a", "b", "c")
    jobs.run(direct, give_way=lambda: True)
    assert ran == ["a"] and "a" not in jobs and "b" in jobs
    jobs.run(direct, give_way=lambda: False)
    assert ran == ["a", "b", "c"] and not jobs.due


def test_a_cleanup_a_look_takes_is_no_longer_kept() -> None:
    jobs = FinishedJobs()
    ran = kept(jobs, "a", "b")
    cleanup = jobs.take("a")
    assert cleanup is not None and "a" not in jobs and jobs.take("a") is None
    jobs.run(direct, give_way=lambda: False)
    assert ran == ["b"]


def test_an_outage_keeps_the_cleanup_and_puts_them_all_off() -> None:
    clock = [100.0]
    jobs = FinishedJobs(clock=lambda: clock[0])
    ran = kept(jobs, "a", "b")

    def unavailable(job: JobSnapshot, cleanup: finished.Cleanup) -> None:
        raise StoreUnavailable("injected")

    with pytest.raises(StoreUnavailable):
        jobs.run(unavailable, give_way=lambda: False)
    assert "a" in jobs and "b" in jobs and not jobs.due
    jobs.run(direct, give_way=lambda: False)
    assert ran == [], "not before the retry"
    clock[0] += finished.RETRY
    assert jobs.due
    jobs.run(direct, give_way=lambda: False)
    assert ran == ["a", "b"]
