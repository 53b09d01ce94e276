"""The job file of a submission: ``FILE.py[:FUNCTION]``, checked and, for a function job,
imported the way the driver will import it (its directory and ``--py-files`` first on the path).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from zkstore.errors import ConfigError
from zkstore.jobs.resubmit import clean_stem

__all__ = [
    "check_script_runs",
    "default_job_id",
    "idle_entry_point",
    "importable",
    "job_id_or_default",
    "load_function",
    "parse_target",
]

#: What a script's top level may hold and still run nothing (a definition, an import, a
#: docstring, a name bound to a value computed without a call).
_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_ASSIGNMENTS = (ast.Assign, ast.AnnAssign, ast.AugAssign)
#: The names of an entry point that the job's context is not first in.
_ENTRY_NAMES = ("run", "main")
#: First parameters that take the job's context (:class:`recovery.driver.context.JobContext`).
_CONTEXT_NAMES = ("ctx", "context", "job", "job_context")


def default_job_id(stem: str) -> str:
    """``<stem>-<8 hex>``, with the stem cleaned into a valid job id (as ``--idempotency-key``
    cleans it: :func:`zkstore.jobs.resubmit.clean_stem`)."""
    return f"{clean_stem(stem)}-{uuid.uuid4().hex[:8]}"


def job_id_or_default(job_id: str | None, stem: str) -> str:
    """The given job id (even an empty one: it is refused later, never replaced), or a new one."""
    return default_job_id(stem) if job_id is None else job_id


def parse_target(target: str) -> tuple[Path, str | None]:
    """Split ``FILE.py[:FUNCTION]``; the file must exist and be a Python file."""
    path_text, function = target, None
    head, sep, tail = target.rpartition(":")
    if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", tail):
        path_text, function = head, tail
    path = Path(path_text)
    if path.is_dir():
        raise ConfigError(f"{path_text} is a directory: FILE must be a .py file")
    if not path.is_file():
        raise ConfigError(f"{path_text}: no such file")
    if path.suffix != ".py":
        raise ConfigError(
            f"{path_text} is not a Python file: FILE must be a .py file "
            "(a PySpark script, or FILE.py:FUNCTION)"
        )
    return path, function


def idle_entry_point(source: str) -> str | None:
    """The function to call if the script ``source`` runs nothing at its top level, else None.

    Decided from the syntax tree (the file is never imported): a top level of imports,
    definitions, a docstring and assignments without a call runs nothing; a call anywhere in
    it (an expression, an assignment's value) or a statement of any other kind (``if __name__
    == "__main__":``, a loop) runs something, and so does a file without a candidate. The
    candidate is the first function whose first parameter takes the job's context (``ctx``,
    or annotated ``JobContext``), else ``run``, else ``main``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None  # the compiler says so, with its line
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.append(node)
        elif isinstance(node, (*_DEFINITIONS, ast.Pass)):
            continue
        elif isinstance(node, _ASSIGNMENTS):
            if node.value is not None and _calls(node.value):
                return None
        elif index == 0 and _is_docstring(node):
            continue
        else:
            return None
    for function in functions:
        if _takes_context(function):
            return function.name
    names = {function.name for function in functions}
    return next((name for name in _ENTRY_NAMES if name in names), None)


def check_script_runs(path: Path, source: str) -> None:
    """Refuse (:class:`ConfigError`, exit 2) a script that only defines an entry point: run as a
    script it would do nothing and succeed. Names ``FILE.py:NAME`` to give instead."""
    name = idle_entry_point(source)
    if name is None:
        return
    raise ConfigError(
        f"{path} runs nothing at its top level (it only defines functions, classes and "
        f"values): as a script it would succeed without doing anything; give {path}:{name} to "
        f"call {name}(ctx, ...), or call it at the top level (if __name__ == '__main__': ...)"
    )


def _calls(node: ast.AST) -> bool:
    return any(isinstance(child, ast.Call) for child in ast.walk(node))


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _takes_context(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    params = [*function.args.posonlyargs, *function.args.args]
    if not params:
        return False
    first = params[0]
    annotation = ast.unparse(first.annotation) if first.annotation is not None else ""
    return first.arg in _CONTEXT_NAMES or annotation.strip("'\"").endswith("JobContext")


def load_function(path: Path, name: str) -> tuple[Callable[..., Any], ModuleType]:
    """Import ``path`` as a module (not as ``__main__``) and return ``name`` from it.

    Only call it within :func:`importable` (the job's directory and ``py_files`` on the path).
    """
    module_name = f"zkstore_job_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}_{uuid.uuid4().hex[:6]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from exc
    except Exception as exc:
        raise ConfigError(f"{path}: importing it failed: {type(exc).__name__}: {exc}") from exc
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigError(f"{path} defines no function {name!r}")
    return function, module


@contextlib.contextmanager
def importable(job_dir: Path, py_files: Sequence[Path] = ()) -> Iterator[None]:
    """Within the block, the job's directory and its ``--py-files`` come first on ``sys.path``,
    as they will in the driver; the modules imported from them are forgotten afterwards."""
    with tempfile.TemporaryDirectory(prefix="zkstore-submit-") as loose:
        entries = [str(job_dir.resolve())]
        for path in py_files:
            if path.suffix == ".py":
                shutil.copyfile(path, Path(loose) / path.name)
            else:
                entries.append(str(path.resolve()))
        entries.append(loose)
        before = set(sys.modules)
        sys.path[:0] = entries
        try:
            yield
        finally:
            for entry in entries:
                sys.path.remove(entry)
                sys.path_importer_cache.pop(entry, None)
            for name in set(sys.modules) - before:
                origin = getattr(sys.modules[name], "__file__", None) or ""
                if any(origin.startswith(entry) for entry in entries):
                    sys.modules.pop(name, None)
