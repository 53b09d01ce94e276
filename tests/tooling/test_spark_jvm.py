"""The suite's Spark JVMs map Spark's classes from the archive (tests/spark_jvm.py): a JVM told
``-Xshare:on`` refuses to start when it cannot (a non-empty directory on the class path, other
jars, another Java), so the launcher Spark's drivers go through proves that the archive fits
their class path, instead of the suite getting silently slower."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests import spark_jvm

pytestmark = pytest.mark.integration


def test_a_driver_jvm_started_by_sparks_launcher_maps_the_archive() -> None:
    if not spark_jvm.archive().exists():
        pytest.skip(f"no archive ({spark_jvm.report()})")
    env = {**os.environ, **spark_jvm.driver_environment()}
    env["SPARK_SUBMIT_OPTS"] += " -Xshare:on"
    launcher = spark_jvm.spark_home() / "bin" / "spark-submit"
    run = subprocess.run(
        [str(launcher), "--version"], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "version" in run.stdout + run.stderr
