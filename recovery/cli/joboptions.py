"""The job options of ``submit``, shared by ``schedules create`` (a schedule's runs take the
same options as a submitted job): one stack of click options, applied by :func:`job_options`.

Light on purpose: the client's modules are imported when the options are used
(:func:`job_settings`), so that a usage error costs click and this module only (issue 27).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = [
    "DEFAULT_MAX_LOST_ATTEMPTS",
    "JOB_KEYS",
    "job_options",
    "job_settings",
    "split_job_options",
]

F = TypeVar("F", bound=Callable[..., Any])

# zkstore.jobs.definition.DEFAULT_MAX_LOST_ATTEMPTS, without importing the definitions (and
# cloudpickle) for a usage error; tests/command_line/test_cli_lazy_commands.py checks that
# they agree.
DEFAULT_MAX_LOST_ATTEMPTS = 10


def _paths_option(name: str, what: str) -> Callable[[F], F]:
    return click.option(
        name,
        multiple=True,
        metavar="PATHS",
        help=f"{what}: local paths (shipped with the job) or URIs (Spark fetches them); "
        "comma-separated, repeatable",
    )


def job_options(func: F) -> F:
    """``--name``, ``--conf``, ``--py-files``, ``--files``, ``--jars``, ``--packages``,
    ``--max-attempts``, ``--max-lost-attempts``, ``--require``, ``--pool`` and
    ``--no-path-check``."""
    for option in reversed(_JOB_OPTIONS):
        func = option(func)
    return func


_JOB_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("--name", help="a name for people [default: the file name]"),
    click.option(
        "--conf",
        "conf_pairs",
        multiple=True,
        metavar="PROP=VALUE",
        help="Spark property, as spark-submit takes it (spark.executor.memory=1g); repeatable",
    ),
    _paths_option("--py-files", ".py, .zip or .egg files for the job's Python path"),
    _paths_option("--files", "files put in the job's working directory"),
    _paths_option("--jars", "jars for the driver and executor classpaths"),
    click.option(
        "--packages",
        multiple=True,
        metavar="COORDS",
        help="Maven coordinates groupId:artifactId:version (spark.jars.packages); "
        "comma-separated, repeatable",
    ),
    click.option(
        "--max-attempts",
        type=click.IntRange(1, 1000),
        default=3,
        show_default=True,
        help="attempts that may fail (the job's code raised, its script exited non-zero) before "
        "the job is FAILED",
    ),
    click.option(
        "--max-lost-attempts",
        type=click.IntRange(1, 1000),
        default=DEFAULT_MAX_LOST_ATTEMPTS,
        show_default=True,
        help="attempts that may be lost to the infrastructure (a host or ZooKeeper session "
        "lost, the driver killed) before the job is FAILED; they do not count against "
        "--max-attempts",
    ),
    click.option(
        "--require",
        "requirements",
        multiple=True,
        metavar="KEY=VALUE",
        help="run only on daemons started with --label KEY=VALUE; repeatable",
    ),
    click.option(
        "--pool",
        metavar="NAME",
        help="the pool the job waits and runs in (zkstore pools list): its limit and priority "
        "apply [default: the pool 'default']",
    ),
    click.option(
        "--no-path-check",
        is_flag=True,
        help="pass arguments that are relative paths here without refusing them",
    ),
]


def job_settings(
    *,
    name: str | None,
    conf_pairs: tuple[str, ...],
    py_files: tuple[str, ...],
    files: tuple[str, ...],
    jars: tuple[str, ...],
    packages: tuple[str, ...],
    max_attempts: int,
    max_lost_attempts: int,
    requirements: tuple[str, ...],
    pool: str | None,
    no_path_check: bool,
) -> dict[str, Any]:
    """What :func:`job_options` gave, as :meth:`recovery.Client.definition_for_file` takes it."""
    from recovery.client.spark_dependencies import Dependencies
    from recovery.shared.fleet_view import parse_labels
    from recovery.shared.sparkconf import parse_spark_conf

    return {
        "name": name,
        "conf": parse_spark_conf(conf_pairs),
        "max_attempts": max_attempts,
        "max_lost_attempts": max_lost_attempts,
        "require": parse_labels(requirements, "requirement"),
        "pool": pool,
        "needs": Dependencies(py_files=py_files, files=files, jars=jars, packages=packages),
        "check_paths": not no_path_check,
    }


#: The keyword names :func:`job_options` gives a command.
JOB_KEYS = (
    "name",
    "conf_pairs",
    "py_files",
    "files",
    "jars",
    "packages",
    "max_attempts",
    "max_lost_attempts",
    "requirements",
    "pool",
    "no_path_check",
)


def split_job_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A command's ``**options`` as (:func:`job_settings` of the job options, the others)."""
    job = {key: options[key] for key in JOB_KEYS}
    return job_settings(**job), {k: v for k, v in options.items() if k not in JOB_KEYS}
