"""The upgrade test's jobs run on a driver of either release (issue 61): the chaos job's modules
travel by value with them, since each release names its harnesses in its own package
(``zkstore_dev.chaos`` now, ``recovery.dev.chaos`` in 0.2.0)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cloudpickle
import pytest

from recovery.shared.pickling import pickled_by_value
from zkstore_dev.upgrade import workload

pytestmark = pytest.mark.integration

#: A driver of a release without this code's harnesses: ``zkstore_dev`` cannot be imported.
WITHOUT_HARNESSES = """\
import pickle, sys, types
sys.modules["zkstore_dev"] = None  # import zkstore_dev... raises ModuleNotFoundError
function = pickle.loads(sys.stdin.buffer.read())
ctx = types.SimpleNamespace(job_id="upgrade-tick", attempt=1)
function(ctx, sys.argv[1], "0")
print(function.__name__)
"""


def test_a_workload_job_runs_where_this_code_s_harnesses_are_not_installed(
    tmp_path: Path,
) -> None:
    with pickled_by_value(sys.modules[workload.__name__]):  # as the client pickles a job
        code = cloudpickle.dumps(workload.tick)
    ran = subprocess.run(
        [sys.executable, "-c", WITHOUT_HARNESSES, str(tmp_path)],
        input=code,
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr.decode()
    assert ran.stdout.decode().strip() == "tick"
    markers = list(tmp_path.glob("*upgrade-tick-attempt-1-*.json"))
    assert len(markers) == 1, sorted(p.name for p in tmp_path.iterdir())
    assert json.loads(markers[0].read_text())["job"] == "upgrade-tick"


def test_the_previous_release_s_name_of_the_chaos_job_is_the_fallback() -> None:
    assert [names[-1].startswith("recovery.dev.chaos.") for names in workload.HOMES.values()] == [
        True
    ] * len(workload.HOMES)
    assert workload.sum_of_squares.__module__ == "zkstore_dev.chaos.job"
