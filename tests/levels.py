"""The level of a test, and where a test module may live (issue 57.3; docs/testing.md).

A test module lives in the folder of the concern it tests (``tests/schedules/``,
``tests/placement/``...), a package of its own; its level is its module's marker,
``pytestmark = pytest.mark.unit`` (or ``integration``, ``e2e``; beside other marks in a list).
``tests/conftest.py`` refuses at collection a test with no level or two, a test module directly
in ``tests/``, and a unit test that asks for a server; ``tests/tooling/test_levels.py`` reads
every module's marker from its syntax tree.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

#: The levels, each a marker: pure code; this process against real servers; the system as
#: processes (docs/testing.md "Where a test goes").
LEVELS = ("unit", "integration", "e2e")
#: The folder of the test tree (its concern folders are its subpackages).
TESTS = Path(__file__).parent
#: Fixtures that start or reach servers or processes: never in a unit test.
SERVER_FIXTURES = frozenset(
    {
        "zk_server",
        "private_zk_server",
        "s3_server",
        "standalone",
        "zk",
        "config",
        "cluster",
        "any_cluster",
        "any_storage",
        "local",
        "client",
        "stand_in_session",
    }
)


def refusal(path: Path, levels: Iterable[str], fixtures: Iterable[str]) -> str | None:
    """Why a test of the module at ``path``, with these level marks and fixtures, may not run
    (None if it may): one level exactly, a module inside a concern folder, no server in a unit
    test."""
    found = [name for name in levels if name in LEVELS]
    if path.parent == TESTS:
        return f"{path.name} is directly in tests/: put it in the folder of its concern"
    if len(found) != 1:
        told = ", ".join(found) or "none"
        return f"a test has one level mark ({', '.join(LEVELS)}), this one {told}"
    if found == ["unit"] and SERVER_FIXTURES & set(fixtures):
        servers = ", ".join(sorted(SERVER_FIXTURES & set(fixtures)))
        return f"a unit test uses no server ({servers}): mark its module integration or e2e"
    return None


def module_levels(source: str) -> list[str]:
    """The level marks of a module's top-level ``pytestmark``, read from its syntax tree: one
    mark or a list or tuple of them."""
    marks: list[ast.expr] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(target, ast.Name) and target.id == "pytestmark" for target in targets):
            marks += value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
    return [
        mark.attr
        for mark in marks
        if isinstance(mark, ast.Attribute)
        and mark.attr in LEVELS
        and ast.unparse(mark.value) == "pytest.mark"
    ]


def modules_of_tests(root: Path = TESTS) -> list[Path]:
    """Every test module of the tree, at any depth."""
    return sorted(root.rglob("test_*.py"))
