"""``python -m benchmarks``: which benchmarks run, and which arguments reach the one named."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import parse

pytestmark = pytest.mark.unit


def test_a_benchmarks_own_arguments_follow_its_name() -> None:
    assert parse(["spark_resume", "--runs", "5"]) == (False, ["spark_resume"], ["--runs", "5"])
    assert parse(["--smoke", "store", "--rounds", "2"]) == (True, ["store"], ["--rounds", "2"])
    assert parse(["store", "cli"]) == (False, ["store", "cli"], [])
    assert parse(["--smoke"]) == (True, [], [])
    assert parse([]) == (False, [], [])


@pytest.mark.parametrize("argv", [["--runs", "5"], ["store", "cli", "--rounds", "1"]])
def test_arguments_for_no_one_benchmark_are_refused(argv: list[str]) -> None:
    with pytest.raises(ValueError, match="name the one benchmark"):
        parse(argv)
