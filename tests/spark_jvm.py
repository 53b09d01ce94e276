"""The suite's Spark JVMs, made cheap to start: short-JVM options (the C1 compiler alone, the
serial collector) and a class-data-sharing archive of the classes a Spark driver loads.

A Spark driver JVM spends about half of a small local job loading and verifying some ten
thousand classes from the pyspark wheel's jars; a dynamic CDS archive (``-XX:SharedArchiveFile``,
JDK 13 and newer) maps them ready-made instead (a small local job: 7.5 s -> 4 s of wall time on
the 2-core CI machine). The JVM checks the archive against its class path (each jar's size and
time, the order) and silently loads every class from the jars as usual when they differ: a stale
archive costs time, never correctness.

CDS requires each directory on the class path to be empty, and Spark's launcher puts
``SPARK_CONF_DIR`` first on it: so the suite's drivers, the standalone master and worker and the
worker's executors all get an empty ``SPARK_CONF_DIR`` (:data:`CONF_DIR`) and their options
from the environment (``SPARK_SUBMIT_OPTS`` for drivers, which Spark's launcher gives the
``spark-submit`` JVM, the driver in client mode; :func:`daemon_environment` for the standalone
cluster) instead of a ``spark-defaults.conf``.

    python -m tests.spark_jvm     # make the archive if missing (make pytest does, once a venv)
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zkstore.dev.embedded import SHORT_JVM_OPTIONS, find_java

#: Where the archive and the empty configuration directory live: the virtual environment's, made
#: again with it (the archive names the jars it was made from).
HOME = Path(sys.prefix) / "spark-jvm"
CONF_DIR = HOME / "conf"

#: What the archive is made from: a driver's start, a query and an RDD job, its stop.
_WARM_UP = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").appName("class-data archive").getOrCreate()
spark.range(100).selectExpr("sum(id)").collect()
spark.sparkContext.parallelize(range(10), 2).map(lambda x: x * 2).sum()
spark.stop()
"""


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def archive() -> Path:
    """The archive's path for this pyspark and this Java (a new one of either: a new name)."""
    import pyspark

    java = Path(find_java()).resolve()
    key = f"{pyspark.__version__} {java} {java.stat().st_size} {java.stat().st_mtime_ns}"
    return HOME / f"spark-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def options() -> str:
    """The JVM options of the suite's Spark JVMs: short, and the archive's when it exists."""
    found = archive()
    shared = [f"-XX:SharedArchiveFile={found}"] if found.exists() else []
    return " ".join([*SHORT_JVM_OPTIONS, *shared])


def _environment(options_variable: str) -> dict[str, str]:
    """The empty configuration directory, and this module's options in ``options_variable``."""
    CONF_DIR.mkdir(parents=True, exist_ok=True)
    return {"SPARK_CONF_DIR": str(CONF_DIR), options_variable: options()}


def driver_environment() -> dict[str, str]:
    """The variables the suite's drivers (this process's and every daemon's it starts) need."""
    return _environment("SPARK_SUBMIT_OPTS")


def report() -> str:
    """One line for the suite's header: whether its Spark JVMs map the archive."""
    found = archive()
    if found.exists():
        return f"Spark JVMs: short, classes mapped from {found}"
    return f"Spark JVMs: short, no class-data archive ({found} missing: python -m tests.spark_jvm)"


def daemon_environment(role: str) -> dict[str, str]:
    """The variables of a standalone ``master`` or ``worker``: the worker's options reach the
    executors it starts, which inherit its environment (``JAVA_TOOL_OPTIONS``: every JVM reads
    it, and says so on its standard error)."""
    return _environment("JAVA_TOOL_OPTIONS" if role == "worker" else "SPARK_DAEMON_JAVA_OPTS")


def make_archive() -> Path:
    """Run a small local job under ``spark-submit`` whose JVM writes the classes it loaded into
    the archive as it exits; written under a temporary name and renamed, so that a JVM never
    maps a half-written one."""
    target = archive()
    if target.exists():
        return target
    CONF_DIR.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=HOME) as scratch:
        script = Path(scratch) / "warm_up.py"
        script.write_text(_WARM_UP)
        written = Path(scratch) / "archive.jsa"
        dump = f"-XX:ArchiveClassesAtExit={written} -Xlog:cds=off -Xlog:cds+dynamic=off"
        env = {
            **os.environ,
            "SPARK_CONF_DIR": str(CONF_DIR),
            "SPARK_SUBMIT_OPTS": " ".join([*SHORT_JVM_OPTIONS, dump]),
            "PYSPARK_PYTHON": sys.executable,
        }
        run = subprocess.run(
            [str(spark_home() / "bin" / "spark-submit"), str(script)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0 or not written.exists():
            sys.exit(
                f"the Spark class-data archive was not made (exit {run.returncode}):\n"
                + run.stderr[-4000:]
            )
        os.replace(written, target)
    for stale in HOME.glob("spark-*.jsa"):
        if stale != target:
            stale.unlink()
    print(f"made {target} in {time.monotonic() - started:.1f} s")
    return target


if __name__ == "__main__":
    make_archive()
