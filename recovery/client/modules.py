"""The job's own modules: what its file imports from its own directory, shipped as one zip.

``python job.py`` puts ``job.py``'s directory first on ``sys.path``, so ``import helpers`` finds
``helpers.py`` beside it. A job run by a daemon on another host needs those modules too, so at
submit they are found and zipped into the definition; the driver puts the zip on its own path and
hands it to Spark as a py-file, so that executors import the same code.

What is found: the job file's imports are read (never run) with :mod:`ast`, and every top-level
name that resolves in the job's directory, to ``NAME.py`` or to a package directory ``NAME/``,
is shipped, and the imports of what is shipped are followed in turn. A module file travels alone;
a package travels whole (every file under it but ``__pycache__`` and hidden entries), so its data
files and dynamically imported submodules come along. Imports inside functions count; names
computed at run time (``importlib.import_module(name)``) cannot be seen: ship those with
``--py-files``. Installed packages are not shipped: install them on the daemons' hosts (or use
``--py-files`` / ``--packages``).
"""

from __future__ import annotations

import ast
import functools
import io
import logging
import os
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

from zkstore.errors import ConfigError
from zkstore.jobs.definition import ShippedFile

__all__ = ["MAX_MODULES_BYTES", "MODULES_ZIP", "local_imports", "modules_zip"]

logger = logging.getLogger(__name__)

MODULES_ZIP = "zkstore-modules.zip"
MAX_MODULES_BYTES = 32 * 1024 * 1024
_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed timestamps: the same sources always zip the same


def local_imports(job_file: Path) -> dict[str, Path]:
    """Modules and packages that ``job_file`` imports from its directory, directly or through
    one another: top-level name -> file or package directory."""
    root = job_file.resolve().parent
    found: dict[str, Path] = {}
    pending = [job_file.resolve()]
    while pending:
        for name in sorted(_imported_names(pending.pop())):
            if name in found:
                continue
            location = _resolve(root, name)
            if location is not None and location != job_file.resolve():
                found[name] = location
                pending.extend(_python_files(location))
    return found


def modules_zip(job_file: Path, limit: int = MAX_MODULES_BYTES) -> ShippedFile | None:
    """The zip of :func:`local_imports` (paths relative to the job's directory), or None if the
    job imports nothing from its directory. Raises :class:`ConfigError` past ``limit`` bytes."""
    found = local_imports(job_file)
    if not found:
        return None
    root = job_file.resolve().parent
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted({f for location in found.values() for f in _all_files(location)}):
            info = zipfile.ZipInfo(path.relative_to(root).as_posix(), date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
            if buffer.tell() > limit:
                break
    data = buffer.getvalue()
    if len(data) > limit:
        names = ", ".join(sorted(f"{n}/" if p.is_dir() else p.name for n, p in found.items()))
        raise ConfigError(
            f"the modules {job_file.name} imports from its directory ({names}) come to more than "
            f"{limit // (1024 * 1024)} MB zipped: install big dependencies on the daemons' hosts, "
            "or ship them with --py-files"
        )
    logger.info("shipping %s with %s: %s", MODULES_ZIP, job_file.name, ", ".join(sorted(found)))
    return ShippedFile(MODULES_ZIP, "modules", data)


_PARSER_LOCK = threading.Lock()


def _imported_names(source_file: Path) -> frozenset[str]:
    """Top-level module names imported anywhere in ``source_file`` (absolute imports only)."""
    try:
        source = source_file.read_bytes()
    except OSError as exc:
        logger.debug("not following the imports of %s: %s", source_file, exc)
        return frozenset()
    return _parsed_names(source, str(source_file))


@functools.lru_cache(maxsize=64)
def _parsed_names(source: bytes, filename: str) -> frozenset[str]:
    """:func:`_imported_names` of one source: parsed once per content, so that a program
    submitting many jobs from one module parses it once, not at every submission."""
    try:
        # CPython 3.11's parser is not safe from several threads at once (it fails with
        # "AST constructor recursion depth mismatch", gh-106905): submissions take turns.
        with _PARSER_LOCK:
            tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError) as exc:
        # Shipped as it is; Python reports the error when the job imports it.
        logger.debug("not following the imports of %s: %s", filename, exc)
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return frozenset(names)


def _resolve(root: Path, name: str) -> Path | None:
    """Where ``import name`` would find a module in ``root``: NAME.py or a package, or None."""
    module = root / f"{name}.py"
    if module.is_file():
        return module
    package = root / name
    if package.is_dir() and any(package.glob("*.py")):
        return package  # a regular package, or a namespace package with modules in it
    return None


def _all_files(location: Path) -> Iterator[Path]:
    if location.is_file():
        yield location
        return
    for directory, subdirs, files in os.walk(location):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__" and not d.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") and not name.endswith(".pyc"):
                yield Path(directory) / name


def _python_files(location: Path) -> list[Path]:
    return [p for p in _all_files(location) if p.suffix == ".py"]
