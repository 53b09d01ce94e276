"""The upgrade test's pure parts (zkstore_dev/upgrade): which release it runs against, the
table of gated features, and the checks it applies to the jobs' evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

import zkstore
from tests.helpers import REPO
from zkstore.protocol import FEATURES, PROTOCOL, Feature
from zkstore_dev.chaos.schedule_checker import Attempt, Run
from zkstore_dev.upgrade import checks, features, run, workload
from zkstore_dev.upgrade.previous import ReleaseError, previous_version, released_versions

pytestmark = pytest.mark.unit

CHANGELOG = """\
# Changelog

Every release of zkstore, newest first.

## Unreleased

## 0.3.0 (2027-02-01): something
### Upgrade notes
## 0.2.1 (2026-12-20): fixes
## 0.2.0 (2026-11-28): the fleet protocol, sealed definitions
## Not a version (someday): ignored
## 0.1.0rc1 (2026-10-01): a candidate
"""


def test_the_changelog_headings_name_the_releases() -> None:
    assert released_versions(CHANGELOG) == [
        Version("0.3.0"),
        Version("0.2.1"),
        Version("0.2.0"),
        Version("0.1.0rc1"),
    ]


@pytest.mark.parametrize(
    ("current", "previous"),
    [
        ("0.3.0.dev0", "0.2.1"),  # a development version is older than its release
        ("0.3.0", "0.2.1"),  # the release itself runs against the one before it
        ("0.3.1.dev0", "0.3.0"),
        ("1.0.0", "0.3.0"),
        ("0.2.0", "0.1.0rc1"),
    ],
)
def test_the_previous_release_is_the_newest_older_than_the_code(
    current: str, previous: str
) -> None:
    assert previous_version(CHANGELOG, current) == Version(previous)


def test_no_older_release_is_an_error() -> None:
    with pytest.raises(ReleaseError, match=r"no release older than 0\.1\.0rc1"):
        previous_version(CHANGELOG, "0.1.0rc1")


def test_this_checkout_has_a_release_before_it() -> None:
    changelog = (Path(__file__).resolve().parents[2] / "CHANGELOG.md").read_text()
    assert previous_version(changelog, zkstore.__version__) < Version(zkstore.__version__)


def test_every_gated_feature_has_its_command_in_the_upgrade_test() -> None:
    assert features.untested() == []
    assert features.newer_than(PROTOCOL) == []
    assert [f.name for f, _ in features.newer_than(0)] == sorted(FEATURES)


def test_a_feature_without_a_command_fails_the_upgrade_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    feature = Feature("shiny", PROTOCOL + 1, "a shiny new record")
    monkeypatch.setitem(FEATURES, "shiny", feature)
    with pytest.raises(features.UntestedFeature, match=r"'shiny'.*features\.py GATED"):
        features.newer_than(PROTOCOL)


def test_a_refusal_needs_exit_9_and_its_reason() -> None:
    feature = Feature("shiny", 3, "a shiny new record")
    said = "zkstore: error: a shiny new record needs the fleet at protocol 3"
    assert features.refusal_problem(feature, 9, f"log line\n{said}\n") is None
    assert "not 9" in (features.refusal_problem(feature, 0, "") or "")
    assert "does not say" in (features.refusal_problem(feature, 9, "error: no") or "")


def _marker(out: Path, attempt: int, start: float, last: float, **more: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    record = {"attempt": attempt, "pid": 100 + attempt, "start": start, "last": last, **more}
    (out / f"attempt-{attempt}.json").write_text(json.dumps(record))


def _finished(out: Path, steps: list[tuple[int, int]], total: int) -> None:
    (out / "progress.log").write_text("".join(f"{a} {s} 1.0\n" for a, s in steps))
    (out / "output.json").write_text(json.dumps({"steps": steps[-1][1], "total": total}))


def test_a_job_restarted_or_run_twice_at_once_is_a_violation(tmp_path: Path) -> None:
    job = checks.Job("j", tmp_path / "j", "old")
    _marker(job.out, 1, 0.0, 5.0)
    assert checks.attempts_kept(job, [1]) == []
    _marker(job.out, 2, 4.0, 9.0)
    found = checks.attempts_kept(job, [1])
    assert found[0] == "j: attempts [1, 2], not [1] (an upgrade restarted it)"
    assert "were alive at the same time" in found[1]


def test_a_step_done_twice_or_a_wrong_total_is_a_violation(tmp_path: Path) -> None:
    job = checks.Job("j", tmp_path / "j", "old", steps=3)
    job.out.mkdir()
    _finished(job.out, [(1, 1), (1, 2), (2, 3)], 14)
    assert checks.steps_once(job) == [] and checks.output_exact(job) == []
    _finished(job.out, [(1, 1), (1, 2), (2, 2), (2, 3)], 18)
    assert checks.steps_once(job) == ["j: step 2 done by attempt 1 and again by 2"]
    assert checks.output_exact(job) == ["j: total 18 is not 14 (3 steps)"]
    spark = checks.Job("s", tmp_path / "s", "old", total=workload.spark_total)
    spark.out.mkdir()
    _finished(spark.out, [(1, 1), (1, 2)], 499500 + 1999000)
    assert checks.output_exact(spark) == []


def test_a_job_after_another_must_start_after_its_end(tmp_path: Path) -> None:
    dependency = checks.Job("dep", tmp_path / "dep", "old")
    after = checks.Job("after", tmp_path / "after", "old")
    _marker(dependency.out, 1, 0.0, 10.0, end=10.0)
    _marker(after.out, 1, 11.0, 12.0)
    assert checks.ran_after(after, dependency) == []
    _marker(after.out, 1, 9.0, 12.0)
    assert checks.ran_after(after, dependency) == ["after started 1.0 s before dep ended"]


def test_a_schedule_run_whose_code_ran_twice_is_a_violation() -> None:
    once = Run("tick-1", None, (Attempt(1, 0.0),))
    twice = Run("tick-2", None, (Attempt(1, 0.0), Attempt(2, 3.0)))
    replaced = Run("tick-3", None, (Attempt(2, 0.0),))  # its first attempt never ran
    assert checks.runs_once([once, twice, replaced]) == [
        "schedule run tick-2: ran as attempts [1, 2]"
    ]
    assert checks.replaced([once, twice, replaced]) == ["tick-3 (attempt 2)"]


def test_the_upgrade_test_finds_the_checkout_it_runs_from() -> None:
    """Its CHANGELOG.md and git history, found from the module's own place (the harness moved to
    zkstore_dev/ in issue 61: ``make upgrade-test`` said "no CHANGELOG.md in /work/wt")."""
    assert run.repository() == REPO
