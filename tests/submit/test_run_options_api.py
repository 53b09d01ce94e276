"""The Python API takes a job's run options as one ``RunOptions`` (issue 53): the keywords
``submit_function``, ``submit_script`` and ``definition_for_file`` took before keep working, the
lifecycle options reach every one of them, and all land in the handle's typed run options; a
new definition for ``jobs resume --definition`` keeps the job's options, its pool included."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.client.api import Client
from zkstore.cluster import Cluster
from zkstore.cluster.pools import set_pool
from zkstore.jobs.dependencies import Dependency
from zkstore.jobs.runoptions import LifecycleOptions
from zkstore.jobs.runspec import RunSpec

pytestmark = pytest.mark.integration

JOB = """
def run(ctx, day):
    return day
"""
SCRIPT = "print('hello')\n"


def _run(cluster: Cluster, job_id: str) -> RunSpec:
    return RunSpec.from_summary(cluster.jobs.handles.get_handle(job_id).summary)


def test_every_submit_takes_the_run_options_and_the_handle_keeps_them(
    cluster: Cluster, laptop: Path
) -> None:
    (laptop / "etl.py").write_text(JOB)
    (laptop / "hello.py").write_text(SCRIPT)
    set_pool(cluster.zk, cluster.layout, "etl", max_running=2)
    with Client(cluster=cluster) as client:
        client.submit_file(
            f"{laptop / 'etl.py'}:run",
            ["2026-11-29"],
            job_id="by-file",
            max_attempts=2,
            max_lost_attempts=4,
            require={"zone": "a"},
            pool="etl",
            lifecycle={"timeout": 60.0, "retry_delay": 9.0},
            after=["upstream"],
        )
        client.submit_script(
            laptop / "hello.py", job_id="by-script", lifecycle={"start_timeout": 30.0}
        )
        summary = cluster.jobs.handles.get_handle("by-file").summary
        assert (summary["max_attempts"], summary["max_lost"]) == (2, 4)
        run = _run(cluster, "by-file")
        assert run.labels == {"zone": "a"} and run.pool == "etl"
        assert run.lifecycle == LifecycleOptions(timeout=60.0, retry_delay=9.0)
        assert run.after == (Dependency("upstream"),)
        assert _run(cluster, "by-script").lifecycle == LifecycleOptions(start_timeout=30.0)

        # new code for the job (jobs resume --definition) keeps every option it was given
        current = cluster.jobs.recover("by-file", lock=False).state
        new = client.file_definition(f"{laptop / 'etl.py'}:run", None, current=current)
        assert new.run_options() == current.run_options()
        assert new.run == current.run and new.run.pool == "etl"
