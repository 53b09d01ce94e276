"""How a deployment's ``SPARK_CONF_DIR`` reaches a driver without defeating the class-data archive.

The JVM maps an archive only if every directory on its class path that it loaded classes from
is empty, and Spark's launcher puts ``SPARK_CONF_DIR`` (``$SPARK_HOME/conf`` by default) first
on it, before Spark's jars. So a daemon whose drivers map an archive gives them an empty
``SPARK_CONF_DIR`` of its own (``<class-data dir>/conf``) and the deployment's files another
way, with the same effect:

- ``spark-defaults.conf`` as ``spark-submit --properties-file``: the launcher reads it for the
  driver's heap, class path and Java options as it read the file in ``SPARK_CONF_DIR``, and a
  job's ``--conf`` still wins over it (the file in ``SPARK_CONF_DIR`` is not read when a
  properties file is given, and ours is empty anyway);
- every other file (``log4j2.properties``, ``hive-site.xml``, ``core-site.xml``...: what Spark
  and Hadoop look up on the class path) by the deployment's directory put last on the class
  path, after the jars (``SPARK_DIST_CLASSPATH``), where no archived class comes from;
- ``*.template`` files are Spark's examples, read by nobody.

A ``spark-env.sh`` cannot travel: Spark's scripts source it from ``SPARK_CONF_DIR`` only. A
deployment that has one keeps its ``SPARK_CONF_DIR``, and its drivers load Spark's classes from
the jars (the daemon says why at its start).

Pure but for :func:`read_plan`, which lists the directory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULTS = "spark-defaults.conf"
ENV_SCRIPT = "spark-env.sh"
TEMPLATE = ".template"


@dataclass(frozen=True)
class ConfPlan:
    """What to do with a deployment's configuration directory."""

    #: the deployment's directory (``SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``)
    deployment: Path
    #: its ``spark-defaults.conf``, given to spark-submit as ``--properties-file``
    properties: Path | None = None
    #: it holds files read from the class path: put last on the class path
    on_class_path: bool = False
    #: why the drivers must keep it as their ``SPARK_CONF_DIR`` (no archive then), or None
    keep_reason: str | None = None


def plan(deployment: Path, names: Iterable[str]) -> ConfPlan:
    """The plan for ``deployment`` holding the entries ``names`` (none: missing or empty)."""
    found = sorted(n for n in names if not n.endswith(TEMPLATE))
    if ENV_SCRIPT in found:
        return ConfPlan(
            deployment,
            keep_reason=f"{deployment} has a {ENV_SCRIPT}, which Spark's scripts source from "
            "SPARK_CONF_DIR only: drivers keep that directory first on their class path",
        )
    return ConfPlan(
        deployment,
        properties=deployment / DEFAULTS if DEFAULTS in found else None,
        on_class_path=any(n != DEFAULTS for n in found),
    )


def read_plan(environ: Mapping[str, str], spark_home: Path) -> ConfPlan:
    """The plan for the directory a driver started with ``environ`` would use."""
    deployment = Path(environ.get("SPARK_CONF_DIR") or spark_home / "conf")
    try:
        names = [entry.name for entry in deployment.iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        names = []
    except OSError as exc:
        return ConfPlan(deployment, keep_reason=f"{deployment} cannot be listed: {exc}")
    return plan(deployment, names)


def environment(
    base: Mapping[str, str], conf_plan: ConfPlan, empty_conf_dir: Path
) -> dict[str, str]:
    """The variables to set in a Spark driver's environment ``base`` for ``conf_plan`` with the
    daemon's empty configuration directory (none when the plan keeps the deployment's)."""
    if conf_plan.keep_reason is not None:
        return {}
    env = {"SPARK_CONF_DIR": str(empty_conf_dir)}
    if conf_plan.on_class_path:
        after = [base.get("SPARK_DIST_CLASSPATH", ""), str(conf_plan.deployment)]
        env["SPARK_DIST_CLASSPATH"] = ":".join(p for p in after if p)
    return env
