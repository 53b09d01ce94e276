"""The suite's Spark JVMs, made cheap to start: short-JVM options (the C1 compiler alone, the
serial collector) and a class-data-sharing archive of the classes a Spark driver loads.

A Spark driver JVM spends about half of a small local job loading and verifying some ten
thousand classes from the pyspark wheel's jars; a dynamic CDS archive (``-XX:SharedArchiveFile``,
JDK 13 and newer) maps them ready-made instead (a small local job: 7.5 s -> 4 s of wall time on
the 2-core CI machine). The JVM checks the archive against its class path (each jar's size and
time, the order) and silently loads every class from the jars as usual when they differ: a stale
archive costs time, never correctness.

The archive is the product's (:mod:`recovery.member.warm_jvms.archive`), made by the same code a
daemon runs with ``--class-data`` :data:`HOME`, so a test's daemon given that directory verifies
it and makes none (an archive dumped by the short JVM serves a JVM of any collector and
compiler).

CDS requires each directory on the class path to be empty, and Spark's launcher puts
``SPARK_CONF_DIR`` first on it: so the suite's drivers, the standalone master and worker and the
worker's executors all get an empty ``SPARK_CONF_DIR`` (:data:`CONF_DIR`) and their options
from the environment (``SPARK_SUBMIT_OPTS`` for drivers, which Spark's launcher gives the
``spark-submit`` JVM, the driver in client mode; :func:`daemon_environment` for the standalone
cluster) instead of a ``spark-defaults.conf``.

    python -m tests.spark_jvm     # make the archive if missing (make pytest does, once a venv)
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

from recovery.member.warm_jvms.archive import SIDECAR, Sidecar
from recovery.member.warm_jvms.class_data import ClassData
from zkstore.dev.embedded import SHORT_JVM_OPTIONS, find_java

#: Where the archive and the empty configuration directory live: the virtual environment's, made
#: again with it (the archive names the jars it was made from).
HOME = Path(sys.prefix) / "spark-jvm"
CONF_DIR = HOME / "conf"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def archive() -> Path:
    """The archive made for this pyspark and this Java (its sidecar says so; the daemon's
    verification checks the class path and the digest too), or a path that does not exist."""
    import importlib.metadata

    java = str(Path(find_java()).resolve())
    version = importlib.metadata.version("pyspark")
    for found in sorted(HOME.glob("spark-*.jsa")):
        with contextlib.suppress(OSError, ValueError):
            key = Sidecar.parse(found.with_suffix(SIDECAR).read_bytes()).key
            if (key.java, key.pyspark) == (java, version):
                return found
    return HOME / "spark-none.jsa"


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
    """The variables the suite's drivers (this process's and every daemon's it starts) need;
    and the daemons' defaults of ``--warm-drivers`` and ``--class-data`` (their variables):
    none and off, so that a test's daemon neither starts JVMs nobody uses nor makes an archive
    of its own (this module's serves its drivers). A test of either gives the flag. A warm
    JVM's warm-up runs no query (``--warm-up-passes 0``: its start and a context, about half
    the CPU of the default's two passes, which only make it faster):
    tests/spark/test_warm_ready_soon.py runs the default."""
    return {
        **_environment("SPARK_SUBMIT_OPTS"),
        "ZKSTORE_WARM_DRIVERS": "0",
        "ZKSTORE_WARM_UP_PASSES": "0",
        "ZKSTORE_CLASS_DATA": "off",
    }


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
    """Verify the archive, or make it with the product's code (a small local job under
    ``spark-submit`` whose short JVM writes the classes it loaded as it exits; written under a
    temporary name and renamed, so that a JVM never maps a half-written one)."""
    CONF_DIR.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    env = {
        **os.environ,
        "SPARK_CONF_DIR": str(CONF_DIR),
        "SPARK_SUBMIT_OPTS": " ".join(SHORT_JVM_OPTIONS),
        "PYSPARK_PYTHON": sys.executable,
    }
    data = ClassData(HOME, lambda: env)
    try:
        data.settle()
    except OSError as exc:
        sys.exit(f"the Spark class-data archive was not made: {exc}")
    assert data.archive is not None
    print(f"{data.reason} {data.archive} in {time.monotonic() - started:.1f} s")
    return data.archive


if __name__ == "__main__":
    make_archive()
