"""Issue 54 item 6, the pure part: a driver's Spark UI kill is off unless its job sets it, and
in local mode its JVM listens on loopback unless the environment says where (the end-to-end
test with real Spark: tests/spark/test_spark_ui.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.driver.warm_jvm import SparkJvm
from recovery.driver.workdir import lay_out
from recovery.shared.sparkconf import LOCAL_IP_ENV, UI_KILL, is_local_master, loopback_ui
from zkstore.config import ENV_VARS
from zkstore.jobs.definition import JobDefinition

pytestmark = pytest.mark.unit


def test_ui_kill_is_off_unless_the_job_sets_it(tmp_path: Path) -> None:
    plain = JobDefinition.for_script("a", "print(1)\n", filename="/x/etl.py")
    assert lay_out(plain, tmp_path / "a").spark_conf[UI_KILL] == "false"
    own = JobDefinition.for_script(
        "b", "print(1)\n", filename="/x/etl.py", spark_conf={UI_KILL: "true"}
    )
    assert lay_out(own, tmp_path / "b").spark_conf[UI_KILL] == "true"


@pytest.mark.parametrize(
    ("master", "in_local_mode"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local[2, 3]", True),
        (" local[1] ", True),
        ("spark://h:7077", False),
        ("yarn", False),
        ("k8s://https://h", False),
        ("localhost", False),
    ],
)
def test_local_mode_listens_on_loopback_unless_the_environment_says(
    master: str, in_local_mode: bool
) -> None:
    assert is_local_master(master) is in_local_mode
    assert loopback_ui({}, master) == ({LOCAL_IP_ENV: "127.0.0.1"} if in_local_mode else {})
    assert loopback_ui({LOCAL_IP_ENV: "10.0.0.5"}, master) == {}, "the operator's wins"


def test_a_loopback_warm_jvm_is_no_driver_for_a_cluster_master() -> None:
    env = {ENV_VARS["spark_master"]: "local[2]"}
    jvm = SparkJvm(None, None, env)
    assert jvm._loopback_reason("local[1]") is None
    reason = jvm._loopback_reason("spark://h:7077")
    assert reason is not None and "loopback only" in reason
    operator = SparkJvm(None, None, {**env, LOCAL_IP_ENV: "0.0.0.0"})
    assert operator._loopback_reason("spark://h:7077") is None, "not ours: listens elsewhere"
