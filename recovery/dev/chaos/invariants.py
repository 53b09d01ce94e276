"""The design's invariants, checked after a run the way an operator would see them.

1. No job lost: every submitted job ends SUCCEEDED (and its result is cleaned up, CLEAN).
2. At most one live attempt of a job at any moment: no two attempt markers overlap.
3. Every finished job's output is exact.
4. No dangling handle: ``zkstore handles verify`` is clean.
5. Nothing lingers after ``zkstore handles cleanup``: ``handles lingering`` finds nothing.
6. A daemon restart restarts no attempt: after a fault that only restarted daemons, every job
   ran one attempt (drivers outlive their daemon, which adopts them when it comes back).

The store commands run as the installed ``zkstore`` script, in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from recovery.dev.chaos import job
from recovery.dev.chaos.faults import Fault
from recovery.dev.chaos.world import RunCluster
from zkstore.errors import ZkStoreError
from zkstore.jobs.states import SUCCEEDED

#: The installed console script, as an operator runs it.
ZKSTORE = str(Path(sys.executable).with_name("zkstore"))


def check(run: RunCluster, timeout: float, fault: Fault | None = None) -> list[str]:
    """Every violation found, one line each (empty: the run kept every invariant)."""
    violations = _outcomes(run, timeout)
    for job_id, (out, steps) in run.jobs.items():
        attempts = job.attempts(out)
        if fault is not None and fault.restarts_nothing and [a.attempt for a in attempts] != [1]:
            violations.append(
                f"{job_id}: a daemon restart restarted it (attempts "
                f"{', '.join(str(a.attempt) for a in attempts) or 'none'})"
            )
        for first, second in job.overlaps(attempts):
            violations.append(
                f"{job_id}: attempts {first.attempt} (pid {first.pid}) and {second.attempt} "
                f"(pid {second.pid}) were alive at the same time"
            )
        result = job.output(out)
        if steps is not None and (result is None or result["total"] != job.expected_total(steps)):
            violations.append(f"{job_id}: output {result} is not the exact total")
    if violations:
        return violations
    return _store_checks(run)


def _outcomes(run: RunCluster, timeout: float) -> list[str]:
    violations = []
    try:
        results = run.wait_all(timeout)
    except ZkStoreError as exc:
        return [f"not every job finished within {timeout:g} s: {exc}"]
    for job_id, result in results.items():
        if result.outcome != SUCCEEDED:
            violations.append(f"{job_id}: {result.outcome} after {result.attempts} attempt(s)")
    assert run.client is not None
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if all(run.client.status(j).state == SUCCEEDED for j in run.jobs):
            break  # the results are CLEAN: everything a job owned has been released
        time.sleep(0.2)
    else:
        violations.append("finished jobs not cleaned up within 60 s")
    return violations


def _store_checks(run: RunCluster) -> list[str]:
    violations = []
    verify = _zkstore(run, "handles", "verify", "--format", "json")
    if verify.returncode != 0 or json.loads(verify.stdout)["problems"]:
        violations.append(f"handles verify: {verify.stdout.strip()} {verify.stderr.strip()}")
    cleanup = _zkstore(
        run,
        "handles",
        "cleanup",
        "--min-age",
        "0",
        "--writers-stopped",
        "--yes",
        "--format",
        "json",
    )
    if cleanup.returncode != 0:
        violations.append(f"handles cleanup failed: {cleanup.stderr.strip()}")
    lingering = _zkstore(run, "handles", "lingering", "--min-age", "0", "--format", "json")
    findings: list[Any] = json.loads(lingering.stdout)["findings"] if lingering.stdout else []
    if lingering.returncode != 0 or findings:
        violations.append(f"lingering after cleanup: {findings or lingering.stderr.strip()}")
    return violations


def _zkstore(run: RunCluster, *args: str) -> subprocess.CompletedProcess[str]:
    command = [ZKSTORE, *args, *run.local.storage_option_args()]
    return subprocess.run(
        command, env=run.local.environment(), capture_output=True, text=True, timeout=300
    )
