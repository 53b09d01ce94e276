"""``submit --after JOB[:STATE]`` and schedules' chained runs: the pure verdict from what the
store shows of the named jobs (ready, waiting with why, failed with why), and the strict form
they are stored in."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from zkstore.errors import ConfigError
from zkstore.jobs.dependencies import (
    ENDED,
    READY,
    WAITING,
    Dependency,
    Seen,
    check_after,
    decide,
    format_after,
    parse_after,
    parse_summary,
)
from zkstore.records.job_states import CANCELLED, FAILED, SUCCEEDED
from zkstore.schedules.runs import dependencies_of, run_summary

pytestmark = pytest.mark.unit

WINDOW = datetime(2026, 11, 24, 2, tzinfo=UTC)


def test_after_defaults_to_succeeded_and_takes_any_case() -> None:
    assert parse_after("etl") == Dependency("etl", SUCCEEDED)
    assert parse_after("etl:failed") == Dependency("etl", FAILED)
    assert parse_after(" etl:Ended ") == Dependency("etl", ENDED)


@pytest.mark.parametrize("bad", ["", ":SUCCEEDED", "a/b", "etl:DONE", "etl:", "../x:FAILED"])
def test_bad_after_options_are_usage_errors(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_after(bad)


def test_a_job_cannot_wait_for_itself_or_name_a_job_twice() -> None:
    with pytest.raises(ConfigError, match="itself"):
        check_after("etl", [parse_after("etl")])
    with pytest.raises(ConfigError, match="twice"):
        check_after("load", [parse_after("etl"), parse_after("etl:FAILED")])
    with pytest.raises(ConfigError, match="at most"):
        check_after("load", [parse_after(f"j{n}") for n in range(9)])
    with pytest.raises(ConfigError, match="characters"):
        check_after("load", [parse_after("x" * 120 + str(n)) for n in range(3)])


def test_the_stored_form_reads_back_strictly() -> None:
    dependencies = (Dependency("etl"), Dependency("clean", ENDED))
    text = format_after(dependencies)
    assert text == "etl:SUCCEEDED,clean:ENDED"
    assert parse_summary(text) == dependencies
    assert parse_summary(None) == ()
    for garbage in ("etl", "etl:NOPE", "a/b:FAILED", 7, "x" * 400):
        with pytest.raises(ValueError):
            parse_summary(garbage)


# -- the verdict ----------------------------------------------------------------------------------


def test_ready_once_every_job_ended_as_required() -> None:
    deps = [Dependency("a"), Dependency("b", FAILED), Dependency("c", ENDED)]
    seen = {
        "a": Seen(outcome=SUCCEEDED),
        "b": Seen(outcome=FAILED),
        "c": Seen(outcome=CANCELLED),
    }
    assert decide(deps, seen).state == READY
    assert decide([], {}).state == READY


def test_waiting_says_which_job_and_how_many_more() -> None:
    deps = [Dependency("a"), Dependency("b"), Dependency("c")]
    verdict = decide(
        deps, {"a": Seen(outcome=SUCCEEDED), "b": Seen(present=True), "c": Seen(present=True)}
    )
    assert verdict.state == WAITING
    assert verdict.reason == "waiting for job b to end SUCCEEDED (and 1 more)"
    quarantined = decide([Dependency("q")], {"q": Seen(present=True, quarantined=True)})
    assert quarantined.state == WAITING and "quarantine" in (quarantined.reason or "")


def test_a_dependency_that_ended_otherwise_fails_the_job_even_while_others_run() -> None:
    deps = [Dependency("a"), Dependency("b")]
    verdict = decide(deps, {"a": Seen(present=True), "b": Seen(outcome=CANCELLED)})
    assert verdict.state == FAILED
    assert verdict.reason == "job b ended CANCELLED; this job runs only after it succeeded"


def test_a_job_with_no_trace_fails_the_job() -> None:
    verdict = decide([Dependency("ghost")], {})
    assert verdict.state == FAILED and "no job ghost" in (verdict.reason or "")


def test_a_chained_run_waits_for_its_schedule_to_fire_the_window() -> None:
    summary = {**run_summary("load", WINDOW), "after_schedule": "extract"}
    (dependency,) = dependencies_of(summary)
    assert dependency.job_id == "extract-20261124T020000Z" and dependency.schedule == "extract"
    waiting = decide([dependency], {})
    assert waiting.state == WAITING and "extract" in (waiting.reason or "")
    fate = Seen(window_decided=True, window_fate="skipped: paused")
    skipped = decide([dependency], {dependency.job_id: fate})
    assert skipped.state == FAILED
    assert skipped.reason == (
        "schedule extract did not run its window 2026-11-24T02:00:00Z (skipped: paused)"
    )
    none = decide([dependency], {dependency.job_id: Seen(window_decided=True)})
    assert none.state == FAILED and "has no window at 2026-11-24T02:00:00Z" in (none.reason or "")
    assert "the same --start-at, or a --cron for both" in (none.reason or "")
    never = decide([dependency], {dependency.job_id: Seen(no_such_window=True)})
    assert never.state == FAILED and never.reason == (
        "schedule extract has no window at 2026-11-24T02:00:00Z: its run job "
        "extract-20261124T020000Z is never made (zkstore schedules show extract says when it "
        "fires)"
    )
    gone = decide([dependency], {dependency.job_id: Seen(schedule_gone=True)})
    assert gone.state == FAILED and "deleted" in (gone.reason or "")
    running = decide([dependency], {dependency.job_id: Seen(present=True)})
    assert running.state == WAITING
    assert decide([dependency], {dependency.job_id: Seen(outcome=SUCCEEDED)}).state == READY


def test_a_runs_dependencies_combine_after_and_its_chain() -> None:
    summary = {
        **run_summary("load", WINDOW),
        "after_schedule": "extract",
        "after": "load-20261124T010000Z:ENDED",
    }
    found = dependencies_of(summary)
    assert [str(d) for d in found] == [
        "load-20261124T010000Z:ENDED",
        "extract-20261124T020000Z:SUCCEEDED",
    ]
    with pytest.raises(ValueError):
        dependencies_of({"after_schedule": "extract"})  # no window
