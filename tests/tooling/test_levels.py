"""Issue 57.3: a test's folder says what it tests, its level is a marker (tests/levels.py).

Every test module has exactly one level mark in its top-level ``pytestmark``, read from its
syntax tree; every folder that holds test modules is a package (its ``__init__.py``) under
``tests/``, never ``tests/`` itself; and the rule ``tests/conftest.py`` applies at collection
refuses what it claims to refuse.
"""

from __future__ import annotations

import pytest

from tests.levels import LEVELS, TESTS, module_levels, modules_of_tests, refusal

pytestmark = pytest.mark.unit


def test_every_test_module_has_one_level_mark() -> None:
    wrong = {
        str(path.relative_to(TESTS)): levels
        for path in modules_of_tests()
        if len(levels := module_levels(path.read_text())) != 1
    }
    assert wrong == {}, "each test module needs exactly one of pytest.mark." + "|".join(LEVELS)


def test_every_folder_of_tests_is_a_concern_package() -> None:
    folders = {path.parent for path in modules_of_tests()}
    assert TESTS not in folders, "a test module lives in the folder of its concern"
    assert sorted(str(f.relative_to(TESTS)) for f in folders if f.name in LEVELS) == []
    missing = sorted(
        str(f.relative_to(TESTS)) for f in folders if not (f / "__init__.py").is_file()
    )
    assert missing == [], "a concern folder without __init__.py"


def test_the_check_reads_a_module_marker_in_every_form() -> None:
    assert module_levels('"""Doc."""\nimport pytest\n') == []
    assert module_levels("pytestmark = pytest.mark.unit\n") == ["unit"]
    assert module_levels("pytestmark = [pytest.mark.spark, pytest.mark.e2e]\n") == ["e2e"]
    assert module_levels("pytestmark = (pytest.mark.unit, pytest.mark.e2e)\n") == ["unit", "e2e"]
    assert module_levels("pytestmark: list = [pytest.mark.integration]\n") == ["integration"]
    # a level named in a string or a comment is no mark
    assert module_levels('pytestmark = pytest.mark.skipif(True, reason="unit")  # e2e\n') == []


def test_collection_refuses_no_level_two_levels_a_test_in_tests_a_unit_with_servers() -> None:
    module = TESTS / "schedules" / "test_x.py"
    assert refusal(module, ["unit", "parametrize"], ["tmp_path"]) is None
    assert refusal(module, ["e2e", "spark"], ["local", "zk"]) is None
    assert "none" in (refusal(module, ["spark"], []) or "")
    assert "unit, e2e" in (refusal(module, ["unit", "e2e"], []) or "")
    assert "unit, unit" in (refusal(module, ["unit", "unit"], []) or "")
    assert "directly in tests/" in (refusal(TESTS / "test_x.py", ["unit"], []) or "")
    told = refusal(module, ["unit"], ["tmp_path", "zk", "cluster"]) or ""
    assert "cluster, zk" in told and "integration or e2e" in told
