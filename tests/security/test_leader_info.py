"""``R/leader/info`` is read strictly by everybody: garbage in it never ends a command with an
internal error (it was read with plain ``json.loads``: ``b"[" * 200000`` raised RecursionError).

Run through the installed ``zkstore`` script, as a user meets it; no daemon runs, so the planted
node stays as it was planted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import start
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import EXIT_TIMEOUT
from zkstore.jobs.definition import JobDefinition

pytestmark = pytest.mark.e2e

ZKSTORE = str(Path(sys.executable).parent / "zkstore")

GARBAGE = {
    "deep": b"[" * 200000,
    "deep-object": b'{"id":' * 100000,
    "not-json": b"\xff\xfe",
    "huge-pid": b'{"id":"d1","host":"h","pid":1'
    + b"0" * 4000
    + b',"since":"2026-01-01T00:00:00Z"}',
    "nan": b'{"id":"d1","host":"h","pid":NaN,"since":"2026-01-01T00:00:00Z"}',
    "control-chars": json.dumps(
        {"id": "d1\x1b[2J", "host": "h", "pid": 1, "since": "2026-01-01T00:00:00Z"}
    ).encode(),
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_leader_info_never_breaks_daemons_list_jobs_wait_or_submit_wait(
    config: StoreConfig, tmp_path: Path, kind: str
) -> None:
    with Cluster.open(config) as cluster:
        cluster.jobs.submit(JobDefinition.for_script("waiting", "pass", filename="job.py"))
        # the raw client: zkstore's own refuses writes over 64 KB, a hostile writer does not
        cluster.zk.kazoo.create(cluster.layout.leader_info, GARBAGE[kind], makepath=True)

    script = tmp_path / "job.py"
    script.write_text("print('hello')\n")
    started = {  # at once: each is a Python process starting, a second of CPU
        "daemons list": start(config, "daemons list"),
        "daemons list json": start(config, "daemons list", "--format", "json"),
        "jobs wait": start(config, "jobs wait", "waiting", "--wait-timeout", "1s"),
        "submit --wait": start(config, "submit", str(script), "--wait", "--wait-timeout", "1s"),
    }
    done = {}
    for what, process in started.items():
        stdout, stderr = process.communicate(timeout=120)
        done[what] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    broken = {
        what: (run.returncode, (run.stdout + run.stderr)[-300:])
        for what, run in done.items()
        if "internal error" in run.stdout + run.stderr or "Traceback" in run.stdout + run.stderr
    }
    assert not broken
    assert done["daemons list"].returncode == 0
    assert json.loads(done["daemons list json"].stdout) == []
    assert done["jobs wait"].returncode == EXIT_TIMEOUT, done["jobs wait"].stderr
    assert done["submit --wait"].returncode == EXIT_TIMEOUT, done["submit --wait"].stderr
