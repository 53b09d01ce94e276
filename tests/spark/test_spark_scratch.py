"""The driver JVM's temporary directory, as Spark's own launcher passes it to the JVM.

A driver puts ``-Djava.io.tmpdir=<attempt directory>.spark`` into ``SPARK_SUBMIT_OPTS``
(:func:`recovery.driver.workdir.keep_spark_scratch`), which Spark's launcher splits as a shell
would: a work directory whose path holds spaces, quotes or backslashes must still reach the JVM
as one option, before the options the environment held (a ``java.io.tmpdir`` there wins). Read
back from the command the launcher builds (what ``spark-class`` runs), not from our string.
The whole path, with Spark, is ``tests/spark/test_spark.py``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pyspark
import pytest

from recovery.driver import workdir
from recovery.shared import attemptdir
from zkstore.dev.embedded import find_java

pytestmark = pytest.mark.integration

SPARK_HOME = Path(pyspark.__file__).parent


def launch_command(env: dict[str, str]) -> list[str]:
    """The JVM command Spark's launcher builds for ``spark-submit pyspark-shell``."""
    (jar,) = (SPARK_HOME / "jars").glob("spark-launcher_*.jar")
    scala = jar.name.removeprefix("spark-launcher_").split("-")[0]
    main = ("org.apache.spark.launcher.Main", "org.apache.spark.deploy.SparkSubmit")
    found = subprocess.run(
        [find_java(), "-cp", f"{SPARK_HOME}/jars/*", *main, "pyspark-shell"],
        env={**env, "SPARK_HOME": str(SPARK_HOME), "SPARK_SCALA_VERSION": scala},
        capture_output=True,
        check=True,
        timeout=60,
    )
    return found.stdout.decode().split("\0")


@pytest.mark.parametrize("name", ["attempt-1", 'a b "c" \\d'])
def test_the_scratch_reaches_the_driver_jvm_as_one_option_before_the_operators(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    directory = tmp_path / name
    directory.mkdir()
    monkeypatch.setenv(workdir.SUBMIT_OPTS, "-Djava.io.tmpdir=/srv/scratch -Dx=1")
    scratch = workdir.keep_spark_scratch(directory)
    assert scratch == attemptdir.scratch(directory) and scratch.is_dir()
    assert list(directory.iterdir()) == [], "beside the job's directory, not in it"
    assert scratch.stat().st_mode & 0o777 == 0o700
    command = launch_command(dict(os.environ))
    ours = command.index(f"-Djava.io.tmpdir={scratch}")
    assert ours < command.index("-Djava.io.tmpdir=/srv/scratch") < command.index("-Dx=1")


def test_a_scratch_place_planted_beside_a_driver_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver started by hand makes its directory in /tmp, where anybody may plant a link
    where its scratch would go: Spark then keeps its default place, never the link's target."""
    directory, elsewhere = tmp_path / "zkstore-attempt-x", tmp_path / "theirs"
    directory.mkdir()
    elsewhere.mkdir()
    attemptdir.scratch(directory).symlink_to(elsewhere)
    monkeypatch.setenv(workdir.SUBMIT_OPTS, "-Dx=1")
    assert workdir.keep_spark_scratch(directory) is None
    assert os.environ[workdir.SUBMIT_OPTS] == "-Dx=1"
