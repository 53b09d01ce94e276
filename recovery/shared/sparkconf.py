"""Spark configuration as spark-submit takes it: flat string keys and string values.

``--conf KEY=VALUE`` is split at the first ``=`` and the value is kept as it was typed (no JSON,
no nesting: ``spark.executor.memory=1g`` stays ``"1g"``). The list-valued properties that
spark-submit's ``--py-files``, ``--files``, ``--jars`` and ``--packages`` set are joined with
commas, so that what a job ships and what its ``--conf`` says are both kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from zkstore.config import split_pair
from zkstore.errors import ConfigError

__all__ = [
    "FILES",
    "JARS",
    "LIST_KEYS",
    "LOCAL_IP_ENV",
    "LOOPBACK",
    "PACKAGES",
    "PY_FILES",
    "UI_KILL",
    "is_local_master",
    "loopback_ui",
    "merge_lists",
    "parse_spark_conf",
    "spark_submit_args",
]

PY_FILES = "spark.submit.pyFiles"
FILES = "spark.files"
JARS = "spark.jars"
PACKAGES = "spark.jars.packages"
#: Properties whose value is a comma-separated list: merged, never overwritten.
LIST_KEYS = frozenset({PY_FILES, FILES, JARS, PACKAGES, "spark.jars.excludes"})


#: A driver's Spark UI lets anyone who reaches it kill the job's stages and jobs unless this
#: is ``false``: a driver's default, unless its job's ``--conf`` says otherwise.
UI_KILL = "spark.ui.killEnabled"
#: Where Spark binds a driver's UI (``WebUI.bind``: this variable, else every address; no
#: property sets it) and, by default, its RPC endpoint.
LOCAL_IP_ENV = "SPARK_LOCAL_IP"
LOOPBACK = "127.0.0.1"


def is_local_master(master: str) -> bool:
    """Spark's local mode: the driver runs the tasks itself, nothing else need reach it."""
    return re.fullmatch(r"local(\[.*\])?", master.strip()) is not None


def loopback_ui(environ: Mapping[str, str], master: str) -> dict[str, str]:
    """What a driver JVM's environment gets so that its UI (and RPC) listen on loopback only:
    ``SPARK_LOCAL_IP=127.0.0.1`` in local mode, unless the environment sets it already (the
    operator's choice wins). A cluster's executors must reach their driver: nothing then."""
    if not is_local_master(master) or LOCAL_IP_ENV in environ:
        return {}
    return {LOCAL_IP_ENV: LOOPBACK}


def parse_spark_conf(pairs: Iterable[str], option: str = "--conf") -> dict[str, str]:
    """``KEY=VALUE`` pairs into Spark properties, as ``spark-submit --conf`` reads them.

    Keys must be Spark properties (``spark.*``): spark-submit drops anything else with a warning
    ("Ignoring non-Spark config property"); here it is refused, so nothing is silently lost.
    A key given twice keeps its last value, as with spark-submit.
    """
    conf: dict[str, str] = {}
    for pair in pairs:
        key, value = split_pair(pair, option)
        key = key.strip()
        if not key.startswith("spark.") or key == "spark.":
            raise ConfigError(
                f"{option} {pair!r}: {key!r} is not a Spark property (they start with 'spark.')"
            )
        if any(c.isspace() for c in key):
            raise ConfigError(f"{option} {pair!r}: the key contains white space")
        conf[key] = value
    return conf


def merge_lists(conf: Mapping[str, str], additions: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """``conf`` with comma-separated ``additions`` put in front of each list-valued key."""
    merged = dict(conf)
    for key, values in additions.items():
        items = [v for v in values if v]
        existing = [v for v in merged.get(key, "").split(",") if v.strip()]
        if items or existing:
            merged[key] = ",".join([*items, *existing])
    return merged


def spark_submit_args(master: str, conf: Mapping[str, str], app_name: str) -> list[str]:
    """``spark-submit`` style arguments for the given master, configuration and app name."""
    args = ["--master", master, "--name", app_name]
    for key, value in sorted(conf.items()):
        args += ["--conf", f"{key}={value}"]
    return args
