"""Job definitions refused before anything is stored."""

from __future__ import annotations

from typing import Any

import pytest

from zkstore.errors import (
    ConfigError,
)
from zkstore.jobs.definition import JobDefinition

pytestmark = pytest.mark.unit


def triple(ctx: Any, x: int) -> int:
    return x * 3


def function_job(job_id: str = "job-1", **kwargs: Any) -> JobDefinition:
    return JobDefinition.for_function(job_id, triple, args=(7,), **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"max_attempts": 10_000},
        {"name": "x" * 101},
        {"name": "two\nlines"},
        {"spark_conf": {"k": 1}},
    ],
)
def test_invalid_definitions_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        function_job(**kwargs)
