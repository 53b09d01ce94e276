"""A test module never imports another test module (docs/testing.md): what two of them share is a
helper in a module of its own (``tests/cli.py``, ``tests/stand_in_attempts.py``...), where the
next test finds it, instead of a test file's internals that change with its tests (issue 57.2:
one of each helper). Seven such imports had crept in despite the rule."""

from __future__ import annotations

import ast

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.unit


def is_test_module(name: str) -> bool:
    """Whether the dotted module ``name`` is a test module (``tests.<concern>.test_x``)."""
    return name.split(".", maxsplit=1)[0] == "tests" and name.rsplit(".", 1)[-1].startswith("test_")


def test_no_test_module_imports_another() -> None:
    """The reader on every form of import first, then every test module's imports."""
    sample = ast.parse(
        "from tests.schedules.test_journey import job_file\n"
        "import tests.placement.test_pools\n"
        "from tests.artifacts import test_artifacts\n"
        "from tests.cli import script\n"
    )
    assert imported_tests(sample) == [
        "tests.schedules.test_journey",
        "tests.placement.test_pools",
        "tests.artifacts.test_artifacts",
    ]
    found = {
        path.relative_to(REPO).as_posix(): imported_tests(ast.parse(path.read_text()))
        for path in sorted((REPO / "tests").rglob("test_*.py"))
    }
    assert {path: names for path, names in found.items() if names} == {}


def imported_tests(tree: ast.Module) -> list[str]:
    """The test modules that ``tree`` imports, in order."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names if is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if is_test_module(node.module):
                names.append(node.module)
            else:
                names += [
                    f"{node.module}.{alias.name}"
                    for alias in node.names
                    if is_test_module(f"{node.module}.{alias.name}")
                ]
    return names
