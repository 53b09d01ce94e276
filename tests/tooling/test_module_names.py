"""Issue 61.2: module names that say their concern, and a concern-to-files index that stays true.

**One name, one module.** No two modules of zkstore/, recovery/ and zkstore_dev/ share a basename
(``__init__``, ``__main__`` and ``conftest`` aside): a name that repeats (three ``records.py``, a
``state.py`` beside ``job_states.py``) misleads the moment its meaning changes. A module that is one
role's part of a concern begins with the concern (``leader/schedule_firing.py``,
``member/log_shipping.py``, ``driver/warm_jvm.py``).

**The index.** docs/design.md's "Modules by concern" lists every such module once, under the
concern it serves, as ``- `path`: what it holds``. A module added, moved or removed fails the
test below, which prints the lines to paste (the first sentence of each module's docstring).
"""

from __future__ import annotations

import ast
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.unit

PACKAGES = ("zkstore", "recovery", "zkstore_dev")
NOT_NAMES = frozenset({"__init__", "__main__", "conftest"})
SECTION = "## Modules by concern"
#: an index line: ``- `zkstore/jobs/logs.py`: ...``
_LINE = re.compile(r"^- `(?P<path>[\w/]+\.py)`")


def modules() -> list[str]:
    return sorted(
        path.relative_to(REPO).as_posix()
        for top in PACKAGES
        for path in (REPO / top).rglob("*.py")
        if "__pycache__" not in path.parts and path.stem not in NOT_NAMES
    )


def repeated_basenames(paths: list[str]) -> dict[str, list[str]]:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        by_name[Path(path).stem].append(path)
    return {name: found for name, found in sorted(by_name.items()) if len(found) > 1}


def index_paths(design: str) -> list[str]:
    """The paths the "Modules by concern" section lists, in order, repeats kept."""
    start = design.index(SECTION)
    end = design.find("\n## ", start + len(SECTION))
    section = design[start : end if end >= 0 else len(design)]
    return [m.group("path") for line in section.splitlines() if (m := _LINE.match(line))]


def index_line(path: str) -> str:
    """The line to paste for ``path``: its docstring's first sentence."""
    doc = ast.get_docstring(ast.parse((REPO / path).read_text())) or "(no docstring: write one)"
    first = " ".join(doc.split("\n\n")[0].split())
    sentence = re.split(r"(?<=\.)\s", first, maxsplit=1)[0].rstrip(".:;")
    if len(sentence) > 90:
        sentence = sentence[: sentence.rfind(" ", 0, 88)].rstrip(",;:(") + "..."
    return f"- `{path}`: {sentence}"


def index_problems(listed: list[str], present: list[str]) -> list[str]:
    counts = Counter(listed)
    problems = [f"listed {counts[p]} times: {p}" for p in sorted(counts) if counts[p] > 1]
    problems += [f"listed, no such module: {p}" for p in sorted(set(listed) - set(present))]
    missing = [p for p in present if p not in counts]
    if missing:
        problems.append(
            f"{len(missing)} module(s) missing from docs/design.md's {SECTION!r}; paste each "
            "line under its concern:\n" + "\n".join(index_line(p) for p in missing)
        )
    return problems


def test_no_two_modules_share_a_basename() -> None:
    repeated = repeated_basenames(modules())
    assert not repeated, "module basenames that repeat (name each by its concern): " + "; ".join(
        f"{name}: {', '.join(paths)}" for name, paths in repeated.items()
    )


def test_the_concern_index_lists_every_module_once() -> None:
    design = (REPO / "docs" / "design.md").read_text()
    problems = index_problems(index_paths(design), modules())
    assert not problems, "\n".join(problems)


def test_a_repeated_basename_is_found(tmp_path: Path) -> None:
    assert repeated_basenames(["a/records.py", "b/records.py", "b/state.py", "c/states.py"]) == {
        "records": ["a/records.py", "b/records.py"]
    }


def test_an_index_with_a_module_missing_twice_or_gone_says_each() -> None:
    present = ["zkstore/jobs/logs.py", "zkstore/records/job_states.py", "zkstore/errors.py"]
    listed = ["zkstore/jobs/logs.py", "zkstore/jobs/logs.py", "zkstore/jobs/state.py"]
    problems = index_problems(listed, present)
    assert problems[0] == "listed 2 times: zkstore/jobs/logs.py"
    assert problems[1] == "listed, no such module: zkstore/jobs/state.py"
    assert "2 module(s) missing" in problems[2]
    assert "- `zkstore/errors.py`: " in problems[2]
    assert "- `zkstore/records/job_states.py`: " in problems[2]
