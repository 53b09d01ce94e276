"""A script that only defines its entry point is told apart from one that runs (issue 53,
item 3): decided from the syntax tree, never by importing the file."""

from __future__ import annotations

import pytest

from recovery.client.jobfile import idle_entry_point

pytestmark = pytest.mark.unit

ORDERS = '''"""Orders."""
from __future__ import annotations
import json
from pyspark.sql import functions as F
TABLE = "orders"
LIMITS: dict[str, int] = {"rows": 10}


class Row:
    pass


def helper(x):
    return x


def run(ctx, day):
    ctx.spark.range(3).count()
'''


@pytest.mark.parametrize(
    ("source", "name"),
    [
        (ORDERS, "run"),
        ("def main():\n    pass\n", "main"),
        ("def main():\n    pass\ndef run():\n    pass\n", "run"),
        ("def load(ctx, *a):\n    pass\ndef run():\n    pass\n", "load"),
        ("def load(c: 'JobContext'):\n    pass\n", "load"),
        ("async def run(ctx):\n    pass\n", "run"),
    ],
)
def test_a_file_that_only_defines_its_entry_point_names_it(source: str, name: str) -> None:
    assert idle_entry_point(source) == name


@pytest.mark.parametrize(
    "source",
    [
        ORDERS + "\nrun(None, 1)\n",
        ORDERS + "\nif __name__ == '__main__':\n    run(None, 1)\n",
        "from pyspark.sql import SparkSession\nspark = SparkSession.builder.getOrCreate()\n"
        "def run(ctx):\n    pass\n",
        "print('hello')\n",
        "def run(ctx):\n    pass\nfor i in range(2):\n    pass\n",
        "def helper(x):\n    return x\n",  # nothing to name: runs as today
        "",
        "def run(:\n",  # a syntax error is the compiler's to report
    ],
)
def test_a_script_that_runs_something_is_left_alone(source: str) -> None:
    assert idle_entry_point(source) is None
