"""Idempotent submission: the same submission again returns the existing job, a different one
is refused naming the difference (exit 5); idempotency keys give generated ids the same."""

from __future__ import annotations

import pytest

from zkstore.errors import ConfigError, HandleExists
from zkstore.jobs.definition import JobDefinition, ShippedFile
from zkstore.jobs.resubmit import (
    CODE,
    OPTIONS,
    check_resubmission,
    differences,
    fingerprint,
    idempotent_job_id,
)
from zkstore.records.handle import SummaryValue

pytestmark = pytest.mark.unit

SOURCE = "print('hello')\n"


def script(**changes: object) -> JobDefinition:
    values: dict[str, object] = {"filename": "/home/me/etl.py", "args": ["2026-11-24"]}
    values.update(changes)
    return JobDefinition.for_script("etl-1", str(values.pop("source", SOURCE)), **values)  # type: ignore[arg-type]


def summary(definition: JobDefinition, **fields: SummaryValue) -> dict[str, SummaryValue]:
    return {**definition.summary(), **fingerprint(definition), **fields}


def test_the_same_submission_again_is_the_same_whenever_it_is_made() -> None:
    first, again = script(), script()
    assert differences(summary(first), summary(again)) == []  # its own submission time aside
    check_resubmission("etl-1", summary(first), summary(again))


def test_the_same_script_from_another_directory_is_the_same() -> None:
    assert differences(summary(script()), summary(script(filename="/tmp/etl.py"))) == []


@pytest.mark.parametrize(
    "changes,named",
    [
        ({"source": "print('bye')\n"}, "the code differs (its source or its shipped files)"),
        ({"args": ["2026-11-25"]}, "only the arguments differ (after --)"),
        ({"max_attempts": 5}, "max_attempts: 3 there, 5 here"),
        ({"require": {"gpu": "a100"}}, "require"),
        ({"spark_conf": {"spark.executor.memory": "4g"}}, "the Spark configuration"),
        ({"name": "other"}, "name: 'etl-1' there, 'other' here"),
        ({"files": (ShippedFile("lookup.csv", "file", b"a,b\n"),)}, "files"),
    ],
)
def test_a_different_submission_is_a_conflict_naming_the_difference(
    changes: dict[str, object], named: str
) -> None:
    found = differences(summary(script()), summary(script(**changes)))
    assert any(named in item for item in found), found
    with pytest.raises(HandleExists, match="exists with another definition") as raised:
        check_resubmission("etl-1", summary(script()), summary(script(**changes)))
    assert raised.value.exit_code == 5


def test_a_shipped_files_content_is_compared_not_only_its_name() -> None:
    one = script(files=(ShippedFile("lookup.csv", "file", b"a,b\n"),))
    two = script(files=(ShippedFile("lookup.csv", "file", b"a,c\n"),))
    assert differences(summary(one), summary(two)) == [
        "the code differs (its source or its shipped files)"
    ]


def test_a_job_stored_without_the_programs_digest_is_told_apart_by_its_code_only() -> None:
    """A job an older zkstore stored has no "program" digest: what differs cannot be split."""
    old = {k: v for k, v in summary(script()).items() if k != "program"}
    found = differences(old, summary(script(args=["2026-11-25"])))
    assert found == ["the code differs (its source, its arguments or its shipped files)"]


def test_dependencies_are_part_of_the_submission() -> None:
    base = script()
    one = {**base.summary(), **fingerprint(base, after="a:SUCCEEDED"), "after": "a:SUCCEEDED"}
    two = {**base.summary(), **fingerprint(base, after="b:SUCCEEDED"), "after": "b:SUCCEEDED"}
    assert any("after" in item for item in differences(one, two))


def job(ctx: object, day: str) -> str:
    return day


def test_function_jobs_compare_by_module_source_and_arguments() -> None:
    def make(args: tuple[str, ...]) -> JobDefinition:
        return JobDefinition.for_function("etl-1", job, args=args)

    module = "def job(ctx, day):\n    return day\n"
    one = summary(make(("a",)), **fingerprint(make(("a",)), source=module, args=("a",)))
    two = summary(make(("a",)), **fingerprint(make(("a",)), source=module, args=("a",)))
    three = summary(make(("b",)), **fingerprint(make(("b",)), source=module, args=("b",)))
    four = summary(make(("a",)), **fingerprint(make(("a",)), source=module + "#\n", args=("a",)))
    assert differences(one, two) == []
    assert differences(one, three) and differences(one, four)


def test_a_job_stored_without_a_fingerprint_is_never_taken_for_the_same() -> None:
    old = script().summary()
    assert CODE not in old and OPTIONS not in old
    assert differences(old, summary(script())) == [
        "the existing job carries no fingerprint (an older zkstore submitted it)"
    ]


def test_an_idempotency_key_makes_the_same_id_every_time() -> None:
    first = idempotent_job_id("etl", "request-42")
    assert first == idempotent_job_id("etl", "request-42")
    assert first != idempotent_job_id("etl", "request-43")
    assert first.startswith("etl-") and len(first) == len("etl-") + 16
    assert idempotent_job_id("my etl!", "k").startswith("my-etl-")
    assert len(idempotent_job_id("x" * 300, "k")) <= 128
    for bad in ("", "a\nb", "k" * 201):
        with pytest.raises(ConfigError):
            idempotent_job_id("etl", bad)
