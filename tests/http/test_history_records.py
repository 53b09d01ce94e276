"""The history records the job page draws (:mod:`zkstore.jobs.history`) stay bounded and say
each end once, however long a job or a cluster lives."""

from __future__ import annotations

import pytest

from zkstore.jobs import history
from zkstore.jobs.history import MAX_ATTEMPTS, MAX_TERMS, AttemptEntry, JobHistory, LeaderHistory
from zkstore.records.strict import utc_in, utc_moment, utc_now

pytestmark = pytest.mark.unit


def test_a_job_of_many_attempts_keeps_the_newest_and_parses_back() -> None:
    record = JobHistory(version=None)
    for n in range(1, MAX_ATTEMPTS + 31):
        record = record.with_entry(
            AttemptEntry(n, "d1", utc_moment(), history.LOST, utc_moment(), "x" * 5000)
        )
    kept = JobHistory.from_znode(record.to_bytes(), None, "/h").entries()
    assert [e.attempt for e in kept] == list(range(31, MAX_ATTEMPTS + 31))
    assert len(record.to_bytes()) < 64 * 1024


def test_the_leader_history_keeps_the_newest_terms_and_a_term_once() -> None:
    record = LeaderHistory(version=None)
    for n in range(MAX_TERMS + 10):
        record = record.with_term(f"c{n:04d}", f"d{n % 3}", utc_in(n))
    assert len(record.terms) == MAX_TERMS
    assert min(record.terms) == "c0010"
    again = record.with_term("c0059", "d2", utc_in(9999))
    assert again.terms["c0059"] == record.terms["c0059"], (
        "a term revoked and granted keeps its since"
    )
    gone = record.with_departed({"d1": utc_now()}, set()).with_departed({}, {"d1"})
    assert gone.departed == {}
    LeaderHistory.from_znode(record.with_departed({"d2": utc_now()}, set()).to_bytes(), None, "/l")


def test_an_attempt_keeps_its_definition_through_its_end_and_unknown_fields_are_ignored() -> None:
    """Issue 49.6: the placement names the definition; the end, written later without it,
    keeps it. A field of a newer writer inside an entry is ignored, as at a record's top."""
    digest = "ab" * 32
    placed = AttemptEntry(1, "d1", utc_moment(), definition=digest, target="etl.py:run")
    record = history._attempt_change(placed)(JobHistory(version=None))
    ended = AttemptEntry(1, "d2", utc_moment(), history.FAILED, utc_moment(), "boom")
    record = history._attempt_change(ended)(record)
    (entry,) = JobHistory.from_znode(record.to_bytes(), None, "/h").entries()
    assert (entry.outcome, entry.daemon, entry.definition, entry.target) == (
        history.FAILED,
        "d1",
        digest,
        "etl.py:run",
    )
    newer = JobHistory(version=None, attempts={"1": {**entry.as_json(), "cpu_seconds": 7}})
    (read,) = JobHistory.from_znode(newer.to_bytes(), None, "/h").entries()
    assert read == entry
