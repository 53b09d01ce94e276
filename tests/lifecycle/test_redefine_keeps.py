"""What a new definition of a stopped job keeps of its handle (zkstore/lifecycle/redefine.py
``kept_job_keys``): the schedule's run it is and the jobs it runs after are the job's, not its
definition's, in either form a handle keeps its run options."""

from __future__ import annotations

import pytest

from zkstore.jobs.dependencies import Dependency
from zkstore.jobs.runspec import RUN, RunSpec
from zkstore.jobs.stored import AFTER_SCHEDULE, SCHEDULE, SCHEDULED
from zkstore.lifecycle.redefine import kept_job_keys

pytestmark = pytest.mark.unit

UP = (Dependency("up", "SUCCEEDED"),)


def test_a_schedules_run_stays_its_run_and_keeps_its_dependencies_typed() -> None:
    old = {
        "name": "nightly-20261129T020000Z",
        SCHEDULE: "nightly",
        SCHEDULED: "2026-11-29T02:00:00Z",
        AFTER_SCHEDULE: "extract",
        RUN: RunSpec.of({}, {}, lifecycle={"timeout": 3600}).with_after(UP).to_json(),
    }
    new = {"name": "nightly-20261129T020000Z", RUN: RunSpec.of({}, {}).to_json()}
    kept = kept_job_keys(old, new)
    assert (kept[SCHEDULE], kept[SCHEDULED], kept[AFTER_SCHEDULE]) == (
        "nightly",
        "2026-11-29T02:00:00Z",
        "extract",
    )
    run = RunSpec.from_summary(kept)
    assert run.after == UP
    assert run.lifecycle.timeout is None, "the new definition's options are the new ones"


def test_dependencies_kept_flat_before_the_finalization() -> None:
    old = {"name": "j", "after": "up:SUCCEEDED", "timeout": 3600.0}
    kept = kept_job_keys(old, {"name": "j"})
    assert kept == {"name": "j", "after": "up:SUCCEEDED"}
    assert RunSpec.from_summary(kept).after == UP


def test_what_the_new_definition_says_wins() -> None:
    old = {"name": "j", SCHEDULE: "a", "after": "up:SUCCEEDED"}
    new = {"name": "j", SCHEDULE: "b", "after": "other:FAILED"}
    assert kept_job_keys(old, new) == new
