"""Where Spark and Java are on this host, and the command Spark's launcher builds for a driver JVM.

``spark-submit`` is a shell script: it sources ``load-spark-env.sh`` (``spark-env.sh`` of
``SPARK_CONF_DIR``), runs Spark's launcher (``org.apache.spark.launcher.Main``, a small JVM that
prints the driver's ``java`` command: class path, heap, options, NUL-separated) and ``exec``\\ s
that command. A daemon that starts a driver JVM itself (a warm driver, :mod:`.pool`) runs the
same launcher and starts the command it printed, under a name of its own (its ``argv[0]``:
``ps`` shows ``zkstore warm-driver ID``); the class path the launcher prints is also what a
class-data archive is made for (:mod:`.archive`).

Pure but for :func:`find` (the environment and the file system) and :func:`launcher_command`
(a JVM).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import itertools
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Seconds Spark's launcher may take to print a command (a small JVM: a fraction of a second,
#: several on a loaded host).
LAUNCHER_TIMEOUT = 60.0


@dataclass(frozen=True)
class SparkHome:
    """The Spark a driver runs: its home (the pyspark wheel's, or ``SPARK_HOME``), pyspark's
    version, and the Java that runs it (resolved, with its size and time: a new Java at the same
    path is another Java)."""

    path: Path
    pyspark: str
    java: Path
    java_size: int
    java_mtime_ns: int

    @property
    def submit(self) -> Path:
        return self.path / "bin" / "spark-submit"


class SparkNotFound(Exception):
    """No pyspark or no Java here: drivers cannot start Spark (what is missing, one line)."""


def find(environ: Mapping[str, str]) -> SparkHome:
    """The Spark and Java a driver started with ``environ`` would run, as ``spark-submit``
    finds them (``SPARK_HOME``, else pyspark's directory; ``JAVA_HOME/bin/java``, else
    ``java`` on ``PATH``). Raises :class:`SparkNotFound`."""
    home = environ.get("SPARK_HOME")
    if home:
        path = Path(home)
    else:
        spec = importlib.util.find_spec("pyspark")
        if spec is None or not spec.submodule_search_locations:
            raise SparkNotFound("pyspark is not installed")
        path = Path(next(iter(spec.submodule_search_locations)))
    try:
        version = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        raise SparkNotFound("pyspark is not installed") from None
    java = java_binary(environ)
    if java is None:
        raise SparkNotFound("no Java: set JAVA_HOME or put java on PATH")
    resolved = java.resolve()
    found = resolved.stat()
    return SparkHome(path.resolve(), version, resolved, found.st_size, found.st_mtime_ns)


def java_binary(environ: Mapping[str, str]) -> Path | None:
    """``$JAVA_HOME/bin/java`` if it is there, else ``java`` on the environment's ``PATH``."""
    home = environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return Path(home) / "bin" / "java"
    found = shutil.which("java", path=environ.get("PATH"))
    return Path(found) if found else None


def launcher_command(
    home: SparkHome, environ: Mapping[str, str], args: Sequence[str], *, cwd: str = "/"
) -> list[str]:
    """The ``java`` command ``spark-submit ARGS`` would run in ``environ`` (its
    ``SPARK_CONF_DIR``, ``SPARK_SUBMIT_OPTS``, ``SPARK_DIST_CLASSPATH``... as given: this does
    not source ``spark-env.sh``). Raises OSError if the launcher fails."""
    env = {**environ, "SPARK_HOME": str(home.path), "SPARK_ENV_LOADED": "1"}
    env.setdefault("SPARK_SCALA_VERSION", scala_version(home.path))
    try:
        run = subprocess.run(
            [
                str(home.java),
                "-Xmx128m",
                "-cp",
                str(home.path / "jars" / "*"),
                "org.apache.spark.launcher.Main",
                "org.apache.spark.deploy.SparkSubmit",
                *args,
            ],
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=LAUNCHER_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise OSError(f"Spark's launcher did not answer within {LAUNCHER_TIMEOUT:g} s") from exc
    if run.returncode != 0:
        lines = run.stderr.decode(errors="replace").strip().splitlines() or ["no output"]
        said = next((line for line in lines if "Exception" in line or "Error" in line), lines[0])
        raise OSError(f"Spark's launcher failed (exit {run.returncode}): {said[:300]}")
    return parse_launcher_output(run.stdout)


def scala_version(spark_home: Path) -> str:
    """The Scala version of the Spark in ``spark_home`` (``load-spark-env.sh`` exports it for
    the launcher), from its core jar's name (``spark-core_2.13-4.0.0.jar``): "" if none."""
    for jar in sorted((spark_home / "jars").glob("spark-core_*.jar")):
        version = jar.name[len("spark-core_") :].split("-", 1)[0]
        if version:
            return version
    return ""


def parse_launcher_output(data: bytes) -> list[str]:
    """The command in what ``org.apache.spark.launcher.Main`` printed: anything before a NUL
    and a newline is a message for people (``spark-class`` echoes it), then the command's
    arguments, each ended by a NUL. Raises OSError if there is none."""
    marker = data.find(b"\0\n")
    if marker < 0:
        raise OSError("Spark's launcher printed no command")
    parts = data[marker + 2 :].split(b"\0")
    command = [part.decode() for part in parts[:-1]]  # the last NUL ends the last argument
    if not command:
        raise OSError("Spark's launcher printed an empty command")
    return command


def class_path(command: Sequence[str]) -> str:
    """The value of ``-cp`` in a ``java`` command ("" if it has none)."""
    for flag, value in itertools.pairwise(command):
        if flag in ("-cp", "-classpath", "--class-path"):
            return value
    return ""
