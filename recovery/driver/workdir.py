"""Where an attempt runs: a fresh working directory holding the files the job shipped.

Like a YARN container's directory in cluster mode: every attempt runs in a directory of its own
on the driver's host, which is the driver's current directory. Every shipped file is there under
its own name (``--files data.csv`` is ``./data.csv``; a script is there too, as its
``__file__``); the job's modules and ``--py-files`` come first on ``sys.path``; and Spark gets
them as ``spark.submit.pyFiles``, ``spark.files`` and ``spark.jars``, so that executors have them
as well. The directory is removed when the attempt ends (by the driver, or by the daemon that
started it if the driver could not).

The bytes come from the job's definition, which was verified (size, sha256 and, with a signing
key, HMAC) before it was loaded: nothing here reads anything else.

Spark's own scratch goes beside it (:func:`keep_spark_scratch`,
:mod:`recovery.shared.attemptdir`), so that the job sees only its files in its directory.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from recovery.shared import attemptdir
from recovery.shared.sparkconf import FILES, JARS, PY_FILES, UI_KILL, merge_lists
from zkstore.jobs.definition import SCRIPT, JobDefinition

__all__ = [
    "CONSOLE_PROGRESS",
    "SUBMIT_OPTS",
    "AttemptDirectory",
    "keep_spark_scratch",
    "lay_out",
    "remove",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AttemptDirectory:
    """The working directory of one attempt, once the job's files are in it."""

    path: Path
    #: entries for the front of ``sys.path``: the job's modules, its py-files, the directory
    python_path: tuple[str, ...]
    #: the job's Spark configuration with its shipped files added to the list-valued keys
    spark_conf: dict[str, str]
    #: where the script is, for ``__file__`` and ``sys.argv[0]`` (scripts only)
    script: Path | None = None

    def activate(self) -> None:
        """Put the job's Python files first on ``sys.path`` (before anything is unpickled)."""
        for entry in reversed(self.python_path):
            if entry not in sys.path:
                sys.path.insert(0, entry)


def lay_out(definition: JobDefinition, directory: Path) -> AttemptDirectory:
    """Write the job's shipped files (and its script) into ``directory``; raises OSError."""
    directory.mkdir(parents=True, exist_ok=True)
    paths: dict[str, list[str]] = {PY_FILES: [], FILES: [], JARS: []}
    python_path: list[str] = []
    for shipped in sorted(definition.files, key=lambda f: f.role != "modules"):
        target = directory / shipped.name
        target.write_bytes(shipped.data)
        if shipped.on_python_path:
            paths[PY_FILES].append(str(target))
            python_path.append(str(target) if target.suffix != ".py" else str(directory))
        else:
            paths[FILES if shipped.role == "file" else JARS].append(str(target))
    script = None
    if definition.kind == SCRIPT and definition.source is not None:
        script = directory / Path(definition.filename or f"{definition.job_id}.py").name
        if not script.exists():
            script.write_text(definition.source)
        python_path.append(str(directory))  # ``python job.py`` puts the script's directory first
    logger.info(
        "working directory %s: %s",
        directory,
        ", ".join(sorted(p.name for p in directory.iterdir())) or "empty",
    )
    spark_conf = merge_lists(definition.spark_conf, paths)
    # Spark's console progress bar (``\r[Stage 0:>  (0 + 2) / 2]``) fills a driver's log file
    # with lines nobody reads: off unless the job sets it (issue 27).
    spark_conf.setdefault(CONSOLE_PROGRESS, "false")
    # Whoever reaches a driver's UI could kill its stages: off unless the job sets it (54.6).
    spark_conf.setdefault(UI_KILL, "false")
    return AttemptDirectory(
        path=directory,
        python_path=tuple(dict.fromkeys(python_path)),
        spark_conf=spark_conf,
        script=script,
    )


CONSOLE_PROGRESS = "spark.ui.showConsoleProgress"


#: Options of the JVM ``spark-submit`` starts (the driver's, in client mode), read by Spark's
#: launcher, which splits them as a shell would (quotes, backslashes).
SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"


def keep_spark_scratch(directory: Path) -> Path | None:
    """Make the driver JVM this process starts keep its temporary files beside the attempt's
    ``directory`` (:func:`recovery.shared.attemptdir.scratch`), put before any options the
    environment gives (a ``java.io.tmpdir`` there, an operator's, wins); returns that place.
    Spark puts there its temporary directories, the block manager's files and the native
    libraries it unpacks, unless ``spark.local.dir`` or ``SPARK_LOCAL_DIRS`` names other
    places. Something there already that is not a directory of this user's (a symbolic link
    planted beside a driver started by hand in ``/tmp``) is not used: None, Spark's default."""
    scratch = attemptdir.scratch(directory)
    try:
        scratch.mkdir(mode=0o700)
    except FileExistsError:
        if not attemptdir.ours(scratch):
            logger.warning(
                "%s is not a directory of this user's: Spark's scratch stays in its default place",
                scratch,
            )
            return None
    quoted = str(scratch).replace("\\", "\\\\").replace('"', '\\"')
    option = f'"-Djava.io.tmpdir={quoted}"'
    os.environ[SUBMIT_OPTS] = " ".join(filter(None, [option, os.environ.get(SUBMIT_OPTS)]))
    return scratch


def remove(directory: Path) -> None:
    """Remove an attempt's directory and everything in it, and Spark's scratch beside it;
    missing ones are fine."""
    attemptdir.remove(directory)
