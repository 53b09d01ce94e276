"""What a job takes along, gathered at submit: spark-submit's dependency options, by value.

``--py-files``, ``--files`` and ``--jars`` name local files (read now and stored in the job's
definition, so that any host can run the job) or URIs that Spark fetches itself (``hdfs://``,
``s3a://``, ``https://``, ``local:/``: passed through to Spark untouched). ``--packages`` are
Maven coordinates, passed through as ``spark.jars.packages``. Each option may be repeated or
given a comma-separated list, as with spark-submit. The job's own modules (what its file imports
from its directory, see :mod:`recovery.client.modules`) are added as a zip.

Every shipped file lands in the attempt's working directory under its own name, so two files of
the same name are refused, and so are relative paths in the job's arguments that exist here but
would mean something else there (:func:`check_arguments`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recovery.client.modules import modules_zip
from recovery.shared.sparkconf import FILES, JARS, PACKAGES, PY_FILES, merge_lists
from zkstore.errors import ConfigError
from zkstore.jobs.definition import FileRole, ShippedFile

__all__ = ["PY_FILE_SUFFIXES", "Dependencies", "Shipment", "check_arguments", "prepare"]

PY_FILE_SUFFIXES = (".py", ".zip", ".egg")
_URI = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|local:)")
_COORDINATE = re.compile(r"[^:,/\s]+:[^:,/\s]+:[^:,/\s]+")


@dataclass(frozen=True)
class Dependencies:
    """spark-submit's dependency options, as given: local paths or URIs (see module doc)."""

    py_files: Sequence[str] = ()
    files: Sequence[str] = ()
    jars: Sequence[str] = ()
    packages: Sequence[str] = ()


@dataclass(frozen=True)
class Shipment:
    """The files a job takes along by value, and its Spark configuration with the URIs and
    packages that Spark fetches itself merged in."""

    files: tuple[ShippedFile, ...]
    spark_conf: dict[str, str]
    #: local ``--py-files``, for the submitting process to import a function job's module
    import_paths: tuple[Path, ...] = ()

    @property
    def size(self) -> int:
        return sum(len(f.data) for f in self.files)

    def names(self) -> set[str]:
        return {f.name for f in self.files}


def prepare(
    job_file: Path | None, needs: Dependencies, spark_conf: Mapping[str, str] | None = None
) -> Shipment:
    """Read every local file named in ``needs`` (and zip the job's local modules, if
    ``job_file`` is given). Raises :class:`ConfigError` naming the option at fault."""
    shipped: list[ShippedFile] = []
    remote: dict[str, list[str]] = {PY_FILES: [], FILES: [], JARS: []}
    import_paths: list[Path] = []
    if job_file is not None and (modules := modules_zip(job_file)) is not None:
        shipped.append(modules)
    options: list[tuple[str, FileRole, str, Sequence[str]]] = [
        ("--py-files", "py-file", PY_FILES, needs.py_files),
        ("--files", "file", FILES, needs.files),
        ("--jars", "jar", JARS, needs.jars),
    ]
    for option, role, key, values in options:
        for item in _split(values):
            if _URI.match(item) and not item.startswith("file://"):
                remote[key].append(item)
                continue
            path = _local_file(option, item.removeprefix("file://"))
            if role == "py-file":
                if path.suffix not in PY_FILE_SUFFIXES:
                    raise ConfigError(f"--py-files {item!r}: want a .py, .zip or .egg file")
                import_paths.append(path)
            shipped.append(_read(option, role, path))
    packages = _split(needs.packages)
    for coordinate in packages:
        if not _COORDINATE.fullmatch(coordinate):
            raise ConfigError(f"--packages {coordinate!r} is not groupId:artifactId:version")
    conf = merge_lists(spark_conf or {}, {**remote, PACKAGES: packages})
    return Shipment(tuple(shipped), conf, tuple(import_paths))


def check_arguments(
    args: Iterable[object], shipped: set[str], warn: Callable[[str], None], cwd: Path | None = None
) -> None:
    """Refuse relative paths in ``args`` that exist here but would mean another place where the
    job runs (its own working directory on the driver's host); warn about other relative paths.

    A relative path is fine when it names a shipped file (``--files data.csv -- data.csv``):
    the file is in the job's working directory under that name.
    """
    here = cwd or Path.cwd()
    for arg in args:
        if not isinstance(arg, str) or not arg or arg.startswith("-") or _URI.match(arg):
            continue
        if os.path.isabs(arg) or arg in shipped:
            continue
        local = here / arg
        if os.path.lexists(local):
            raise ConfigError(_relative_path_message(arg, local.resolve(), shipped))
        if "/" in arg or arg.startswith("."):
            warn(
                f"argument {arg!r} looks like a relative path: it will mean the job's own "
                "working directory on the driver's host (a fresh directory per attempt)"
            )


def _relative_path_message(arg: str, local: Path, shipped: set[str]) -> str:
    where = (
        f"argument {arg!r} is {local} here, but the job runs in its own working directory on "
        "the driver's host"
    )
    if local.is_dir():
        fix = "pass an absolute path or a URI that the driver's host can read"
    elif local.name in shipped:
        fix = f"it is shipped as {local.name!r}: pass that"
    else:
        fix = f"pass an absolute path or a URI, or ship it with --files {arg} and pass {local.name}"
    return f"{where}: {fix} (or --no-path-check if it is not a path)"


def _split(values: Iterable[str]) -> list[str]:
    """Repeated options and comma-separated lists, flattened (spark-submit takes both)."""
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def _local_file(option: str, item: str) -> Path:
    path = Path(item).expanduser()
    if path.is_dir():
        raise ConfigError(f"{option} {item!r} is a directory: ship files, or zip it")
    if not path.is_file():
        raise ConfigError(f"{option} {item!r}: no such file")
    return path


def _read(option: str, role: FileRole, path: Path) -> ShippedFile:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{option} {str(path)!r}: cannot read it: {exc.strerror}") from exc
    try:
        return ShippedFile(path.name, role, data)
    except ConfigError as exc:
        raise ConfigError(f"{option} {str(path)!r}: {exc}") from None
