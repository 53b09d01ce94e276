"""Issue 46.3: the tree is a map a newcomer can read, and it stays one.

**Package indexes.** Every package's ``__init__.py`` docstring is an index of the package: a
``::`` literal block with one entry per module and per subpackage, each saying what it holds::

    module.py      what it holds, in a few words
    subpackage/    what it holds; a description may go on
                   on lines indented under it

An entry is a line of a literal block at the block's own indentation that starts with a name
(``name.py`` for a module, ``name/`` for a subpackage, or the bare name) followed by two or more
spaces. Other literal blocks (ZooKeeper paths, a diagram) hold no such lines and are not indexes.
``__init__.py`` and ``__pycache__`` are not listed, nor ``__main__.py``: it is the package's
``python -m`` entry, and the package's prose says ``python -m <package>`` instead.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.unit

PRODUCT = ("zkstore", "recovery", "zkstore_dev")
NOT_LISTED = frozenset({"__init__", "__main__", "__pycache__"})

#: ``name.py``, ``name/`` or ``name``, then two spaces and the description; ``name.py`` or
#: ``name/`` may stand alone on its line, its description on the lines indented under it.
_ENTRY = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<kind>\.py|/)(?: {2,}\S|$)| {2,}\S)")


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str  # ".py", "/" or "" (a bare name)
    line: str


def _packages() -> list[Path]:
    return sorted(
        init.parent
        for top in PRODUCT
        for init in (REPO / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    )


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""


def _literal_blocks(doc: str) -> list[list[str]]:
    """The literal blocks of a docstring (reStructuredText ``::``), each as its lines."""
    lines = doc.splitlines()
    blocks: list[list[str]] = []
    for at, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        indent = len(line) - len(line.lstrip())
        block = []
        for following in lines[at + 1 :]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            block.append(following)
        blocks.append(block)
    return blocks


def index_entries(doc: str) -> list[Entry]:
    """The index entries of a package docstring: the lines of its literal blocks, at the
    block's own indentation, that name a module or a subpackage followed by two spaces."""
    entries = []
    for block in _literal_blocks(doc):
        filled = [line for line in block if line.strip()]
        if not filled:
            continue
        column = min(len(line) - len(line.lstrip()) for line in filled)
        for line in filled:
            if len(line) - len(line.lstrip()) != column:
                continue  # a description going on under its entry
            match = _ENTRY.match(line.strip())
            if match is not None:
                entries.append(Entry(match["name"], match["kind"] or "", line.strip()))
    return entries


def _contents(package: Path) -> tuple[set[str], set[str]]:
    """The package's modules and subpackages, by name."""
    modules = {p.stem for p in package.glob("*.py") if p.stem not in NOT_LISTED}
    subpackages = {
        p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    } - NOT_LISTED
    return modules, subpackages


def _name(package: Path) -> str:
    return package.relative_to(REPO).as_posix()


@pytest.mark.parametrize("package", _packages(), ids=_name)
def test_every_package_indexes_its_modules_and_subpackages(package: Path) -> None:
    init = f"{_name(package)}/__init__.py"
    entries = index_entries(_docstring(package / "__init__.py"))
    modules, subpackages = _contents(package)
    listed = {entry.name for entry in entries}
    problems = []
    missing = sorted(f"{m}.py" for m in modules - listed) + sorted(
        f"{p}/" for p in subpackages - listed
    )
    if missing:
        where = (
            "to the `::` block of its docstring, one line each"
            if entries
            else "to its docstring, which has no index yet: a `::` block with one line each"
        )
        problems.append(
            f"{init} does not list {', '.join(missing)}: add `NAME.py   what it holds` "
            f"(`NAME/` for a package) {where}"
        )
    for entry in entries:
        if entry.name == "__main__":
            problems.append(
                f"{init} lists __main__.py: leave it out, and say `python -m "
                f"{_name(package).replace('/', '.')}` in the prose above the index"
            )
        elif entry.name not in modules | subpackages:
            problems.append(f"{init} lists {entry.line.split()[0]}: no such module or package")
        elif entry.kind == ".py" and entry.name not in modules:
            problems.append(f"{init} lists {entry.name}.py, a package: write {entry.name}/")
        elif entry.kind == "/" and entry.name not in subpackages:
            problems.append(f"{init} lists {entry.name}/, a module: write {entry.name}.py")
    duplicated = sorted({name for name in listed if [e.name for e in entries].count(name) > 1})
    if duplicated:
        problems.append(f"{init} lists {', '.join(duplicated)} more than once")
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.mark.parametrize("package", _packages(), ids=_name)
def test_a_runnable_package_says_how_it_is_run(package: Path) -> None:
    if not (package / "__main__.py").exists():
        return
    command = f"python -m {_name(package).replace('/', '.')}"
    assert command in _docstring(package / "__init__.py"), (
        f"{_name(package)}/__init__.py: its __main__.py is not listed in the index; say "
        f"`{command}` in the docstring's prose instead"
    )


def test_the_index_parser() -> None:
    doc = """Title.

    ::

        R/jobs/<job>/control   a path, not an entry
        one.py      holds one
                    thing.  two.py   a continuation, not an entry
        sub/        a package
        bare        a bare name
        solo.py

    Prose ``x.py  y``.
    """
    assert [(e.name, e.kind) for e in index_entries(doc)] == [
        ("one", ".py"),
        ("sub", "/"),
        ("bare", ""),
        ("solo", ".py"),
    ]


#: a product module longer than this says at its top why it is one module
LONG = 500


def _modules() -> list[Path]:
    return sorted(
        path
        for top in PRODUCT
        for path in (REPO / top).rglob("*.py")
        if "__pycache__" not in path.parts
    )


def test_a_long_module_says_why_it_is_one() -> None:
    long = [
        f"{path.relative_to(REPO)} ({lines} lines)"
        for path in _modules()
        if (lines := len(path.read_text().splitlines())) > LONG
        and "Why one module:" not in _docstring(path)
    ]
    assert not long, (
        f"over {LONG} lines without a reason: split it, or add a paragraph starting "
        f"'Why one module:' to its docstring: " + ", ".join(long)
    )


#: modules named as their package, each with the reason in its docstring
NAMED_AS_PACKAGE = {"recovery/driver/driver.py": "Why its name repeats its package's:"}


def test_no_module_is_named_as_its_package() -> None:
    repeated = [
        path.relative_to(REPO).as_posix() for path in _modules() if path.stem == path.parent.name
    ]
    unexplained = [
        name for name in repeated if NAMED_AS_PACKAGE.get(name, "\0") not in _docstring(REPO / name)
    ]
    assert not unexplained, (
        "a module named as its package says nothing its folder does not: name it for what it "
        "holds (" + ", ".join(unexplained) + ")"
    )


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exports(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    return None


def test_a_module_others_import_says_what_it_exports() -> None:
    """Every product module that product code imports from has ``__all__``, and every public
    name imported from it is in that list: what a module offers is written at its top."""
    modules = {_module_name(p): p for p in _modules()}
    problems: set[str] = set()
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0):
                continue
            source = modules.get(node.module or "")
            if source is None or source.name == "__init__.py":
                continue
            exports = _exports(source)
            for alias in node.names:
                if alias.name.startswith("_") or f"{node.module}.{alias.name}" in modules:
                    continue
                if exports is None:
                    problems.add(f"{node.module} has no __all__ (imported by {_name(path)})")
                elif alias.name not in exports:
                    problems.add(f"{node.module}.{alias.name} is imported but not in its __all__")
    assert not problems, "\n".join(sorted(problems))
