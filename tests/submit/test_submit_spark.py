"""Real PySpark programs through ``zkstore submit --wait``, typed from the user's own directory:
Spark's own examples (``pi.py``, ``wordcount.py``, as the pyspark wheel ships them), the
two-file example pipeline with ``--conf`` and ``--py-files``, and a script with a module beside
it, ``--files`` and ``--jars``. What reached the job is read back from what it wrote."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import local_log, read_until, show, start, zkstore
from tests.helpers import REPO, wait_for
from zkstore.config import StoreConfig

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

SPARK_EXAMPLES = Path(pyspark.__file__).parent / "examples" / "src" / "main" / "python"


@pytest.fixture
def daemon(
    spark_config: StoreConfig, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[LocalCluster]:
    local = LocalCluster(spark_config, tmp_path / "runtime", spark_master="local[1]")
    local.start_daemon("d1")
    yield local
    local.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for log in sorted((tmp_path / "runtime" / "drivers").rglob("*.log")):
            print(f"----- {log} -----\n{log.read_text()[-4000:]}")


def test_spark_pi_example(spark_config: StoreConfig, laptop: Path, daemon: LocalCluster) -> None:
    done = zkstore(
        spark_config,
        "submit",
        str(SPARK_EXAMPLES / "pi.py"),
        "--job-id",
        "pi",
        "--wait",
        "--",
        "2",
        cwd=laptop,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^Pi is roughly 3\.1\d+$", local_log(show(spark_config, "pi")["log"]), re.M)


def test_spark_wordcount_example_reads_a_shipped_file(
    spark_config: StoreConfig, laptop: Path, daemon: LocalCluster
) -> None:
    (laptop / "words.txt").write_text("to be or not to be\nthat is the question\n")
    done = zkstore(
        spark_config,
        "submit",
        str(SPARK_EXAMPLES / "wordcount.py"),
        "--job-id",
        "wc",
        "--files",
        "words.txt",
        "--wait",
        "--",
        "words.txt",
        cwd=laptop,
    )
    assert done.returncode == 0, done.stderr
    counted = dict(
        re.findall(r"^([a-z]+): (\d+)$", local_log(show(spark_config, "wc")["log"]), re.M)
    )
    assert counted == {"to": "2", "be": "2", "or": "1", "not": "1"} | {
        "that": "1",
        "is": "1",
        "the": "1",
        "question": "1",
    }


def test_two_file_pipeline_with_conf_and_py_files(
    spark_config: StoreConfig, laptop: Path, tmp_path: Path, daemon: LocalCluster
) -> None:
    """The example pipeline's job file alone in one place, its helper module zipped elsewhere."""
    (laptop / "orders").mkdir()
    shutil.copy(REPO / "examples" / "orders" / "job.py", laptop / "orders" / "job.py")
    libs = tmp_path / "libs"
    libs.mkdir()
    with zipfile.ZipFile(libs / "orders-deps.zip", "w") as archive:
        archive.write(REPO / "examples" / "orders" / "helpers.py", "helpers.py")
    orders = tmp_path / "orders.csv"
    orders.write_text(
        "id,customer,amount,currency\n1,ada,100,EUR\n2,ada,50,USD\n3,bob,10,GBP\n4,bob,5,XXX\n"
    )
    done = zkstore(
        spark_config,
        "submit",
        "orders/job.py:run",
        "--conf",
        "spark.sql.shuffle.partitions=3",
        "--conf",
        "spark.executor.memory=1g",
        "--py-files",
        "../libs/orders-deps.zip",
        "--wait",
        "--",
        str(orders),
        str(tmp_path / "totals"),
        cwd=laptop,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "totals" / "summary.json").read_text())
    assert summary["totals"] == {"ada": 143.0, "bob": 11.4}
    assert summary["settings"] == {
        "spark.sql.shuffle.partitions": "3",
        "spark.executor.memory": "1g",
        "spark.master": "local[1]",
    }


SCRIPT = """\
import json, os, sys, time

from pyspark.sql import SparkSession

import textutil

if __name__ == "__main__":
    release, target = sys.argv[1], sys.argv[2]
    spark = SparkSession.builder.appName("report").getOrCreate()
    sc = spark.sparkContext
    words = sc.textFile("words.txt").flatMap(textutil.words).collect()
    while not os.path.exists(release):
        time.sleep(0.1)
    result = {name: spark.conf.get(key) for name, key in [
        ("partitions", "spark.sql.shuffle.partitions"),
        ("memory", "spark.executor.memory"),
        ("flag", "spark.zkstore.test.flag"),
        ("expression", "spark.zkstore.test.expression"),
    ]}
    jars = sc._jsc.sc().listJars().mkString(",").split(",")
    result.update(words=words, app_id=sc.applicationId, jars=jars)
    with open(target, "w") as f:
        json.dump(result, f)
    spark.stop()
"""


def test_script_with_module_beside_it_conf_files_and_jars(
    spark_config: StoreConfig, laptop: Path, tmp_path: Path, daemon: LocalCluster
) -> None:
    (laptop / "report.py").write_text(SCRIPT)
    (laptop / "textutil.py").write_text("def words(line):\n    return line.upper().split()\n")
    (laptop / "words.txt").write_text("alpha beta\ngamma\n")
    with zipfile.ZipFile(laptop / "extra.jar", "w") as archive:
        archive.writestr("zkstore-test.txt", "in a jar")
    release, target = tmp_path / "release", tmp_path / "report.json"
    process = start(
        spark_config,
        "submit",
        "report.py",
        "--job-id",
        "report",
        *("--conf", "spark.sql.shuffle.partitions=3", "--conf", "spark.executor.memory=1g"),
        *("--conf", "spark.zkstore.test.flag=true", "--conf", "spark.zkstore.test.expression=a=b"),
        *("--files", "words.txt", "--jars", "extra.jar", "--wait", "--"),
        *(str(release), str(target)),
        cwd=laptop,
    )
    seen: list[str] = []
    read_until(process.stderr, ": Spark application ", seen)
    spark = wait_for(lambda: show(spark_config, "report")["spark"], timeout=60, what="Spark app")
    assert spark["ui"].startswith("http://") and spark["master"] == "local[1]"
    # issue 27: the application on a line of its own, once, after the RUNNING line
    assert any(line.startswith("report: RUNNING attempt 1 on ") for line in seen), seen
    assert (
        seen[-1].startswith("report: attempt 1: Spark application ")
        and spark["app_id"] in (seen[-1])
    )
    release.touch()
    _, rest = process.communicate(timeout=300)
    assert process.returncode == 0, seen + rest.splitlines()
    report = json.loads(target.read_text())
    assert report["words"] == ["ALPHA", "BETA", "GAMMA"]
    assert (report["partitions"], report["memory"]) == ("3", "1g")
    assert (report["flag"], report["expression"]) == ("true", "a=b")
    assert report["app_id"] == spark["app_id"]
    assert [jar.rsplit("/", 1)[-1] for jar in report["jars"]] == ["extra.jar"]
