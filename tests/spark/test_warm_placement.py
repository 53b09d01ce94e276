"""Placement knows where a warm driver JVM is ready (issue 56.2), as a user meets it: two
``zkstore daemon`` processes, one with a warm driver and one without, Spark jobs submitted one at
a time with the installed ``zkstore`` script, ``daemons list --format json`` (how many warm JVMs
each daemon holds ready, and when its first was) and ``jobs show --format json`` (where each
attempt ran, and which JVM it had).

Would fail before: the leader placed by load and then by id, so every job went to ``a``, the
daemon without warm drivers (ids sort it first), and ran in a cold JVM of its own.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import spark_jvm
from tests.cli import json_of, script, script_json
from tests.helpers import print_logs, wait_for
from tests.warm_drivers import JOB, WARM
from zkstore.config import StoreConfig

#: ten jobs, each after a warm JVM is ready again: JVM starts at their own pace on a loaded host
pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(1200)]

#: issue 56's measure: ten Spark jobs submitted one at a time, each where a warm JVM is ready
JOBS = 10
SPARK_JOB = """\
def run(ctx):
    ctx.spark.range(10).count()
"""


def daemons(config: StoreConfig, *, installed: bool = False) -> dict[str, dict[str, object]]:
    """``daemons list --format json`` by id: by the installed script, or in this process for
    a wait that asks every second (the same command, without a new interpreter each time)."""
    listed = script_json(config, "daemons list") if installed else json_of(config, "daemons list")
    return {item["id"]: item for item in listed}


def ready_on_b(config: StoreConfig) -> int:
    ready = daemons(config)["b"]["warm_ready"]
    assert isinstance(ready, int), ready
    return ready


def ended(config: StoreConfig, job_id: str, *, installed: bool = False) -> dict[str, object] | None:
    """The job's one attempt once its end is told (where it ran, which JVM it had)."""
    shown = (
        script_json(config, "jobs show", job_id)
        if installed
        else json_of(config, "jobs show", job_id)
    )
    told = [a for a in shown["attempts"] if a["outcome"] != "PLACED"]
    return told[0] if told else None


def test_spark_jobs_land_where_a_warm_jvm_is_ready(
    spark_config: StoreConfig, tmp_path: Path, laptop: Path
) -> None:
    config = spark_config
    (laptop / "job.py").write_text(SPARK_JOB)
    local = LocalCluster(
        config,
        tmp_path / "runtime",
        spark_master="local[1]",
        warm_drivers=2,  # one replaced while the other serves
        class_data=str(spark_jvm.HOME),  # the suite's archive: verified, not made again
        daemon_args={"a": ("--warm-drivers", "0")},
    )
    try:
        local.start_daemon("a")
        local.start_daemon("b")
        local.wait_for_leader(timeout=config.session_timeout * 4 + 30)
        listed = daemons(config, installed=True)
        assert listed["a"]["warm_ready"] is None, "no warm drivers: none said"
        landed: list[tuple[str, str]] = []
        for n in range(JOBS):
            # a warm JVM exists (b's, or its replacement once the jobs took both)
            wait_for(lambda: ready_on_b(config) > 0, WARM, 1.0, what="b's warm JVM")
            if n == 0:
                first = daemons(config, installed=True)["b"]["warm_first_s"]
                assert isinstance(first, float) and 0 < first < WARM, first
                text = script(config, "daemons list")
                assert " ready (first at" in text.stdout, text.stdout
            job_id = f"spark-{n}"
            made = script(
                config, "submit", "job.py:run", "--job-id", job_id, "--max-attempts", "1",
                cwd=laptop,
            )  # fmt: skip
            assert made.returncode == 0, made.stderr
            wait_for(partial(ended, config, job_id), JOB, 0.5, what=f"{job_id} ended")
            attempt = ended(config, job_id, installed=True)  # what a user reads of it
            assert attempt is not None and attempt["outcome"] == "SUCCEEDED", attempt
            landed.append((str(attempt["daemon"]), str(attempt.get("jvm"))))
        wrong = [(n, where) for n, where in enumerate(landed) if where[0] != "b"]
        told = [  # the leader's words on each (its placement's why), whichever daemon led
            line
            for daemon in local.daemons.values()
            for line in daemon.log().splitlines()
            if any(f"job spark-{n}: " in line for n, _ in wrong)
        ]
        assert not wrong, f"placed where no warm JVM was ready: {wrong}\n" + "\n".join(told)
        cold = [(n, jvm) for n, (_, jvm) in enumerate(landed) if not jvm.startswith("warm:")]
        assert not cold, f"on b but not in its warm JVM: {cold}"
    except BaseException:
        print_logs(local)  # where each job was placed and why, what each daemon held ready
        raise
    finally:
        local.stop()
