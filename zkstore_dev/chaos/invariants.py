"""The design's invariants, checked after a run the way an operator would see them.

1. No job lost: every submitted job ends SUCCEEDED (and its result is cleaned up, CLEAN).
2. At most one live attempt of a job at any moment: no two attempt markers overlap.
3. Every finished job's output is exact.
4. No dangling handle: ``zkstore handles verify`` is clean.
5. Nothing lingers after ``zkstore handles cleanup``: ``handles lingering`` finds nothing.
6. A daemon restart restarts no attempt: after a fault that only restarted daemons (or a cut of
   the network shorter than half a lease), every job ran one attempt (drivers outlive their
   daemon, which adopts them when it comes back).
7. No zombie write, measured in storage: along each job's ledger (the order in which storage
   took the job's own writes, :mod:`.ledger`), no write of an older attempt after a newer
   attempt's first.
8. Nothing quarantined: every fault here is the network's or a process's, never a job's.
9. Nothing deleted that zkstore did not make: every ledger entry a job wrote and every object
   planted beside zkstore's own (:data:`~zkstore_dev.chaos.world.SENTINELS`) is still there
   after ``handles cleanup``.
10. On a world of hosts, every host's processes accounted for (:mod:`.process_accounting`).
11. Every step committed exactly once: the parts the job's output names (``zkstore outputs
    paths``, from its manifest once the job is over) are one per step it ran, each read back
    with its own square (:func:`~zkstore_dev.chaos.job.committed_once`); a step re-run by the
    next attempt appears once, whichever attempt committed it.

The store commands run as the installed ``zkstore`` script, in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import fsspec

from zkstore.errors import ZkStoreError
from zkstore.records.job_states import SUCCEEDED
from zkstore_dev.chaos import job, ledger
from zkstore_dev.chaos import process_accounting as processes
from zkstore_dev.chaos.faults import Fault
from zkstore_dev.chaos.world import RunCluster

#: The installed console script, as an operator runs it.
ZKSTORE = str(Path(sys.executable).with_name("zkstore"))


def check(run: RunCluster, timeout: float, fault: Fault | None = None) -> list[str]:
    """Every violation found, one line each (empty: the run kept every invariant)."""
    violations = _outcomes(run, timeout)
    for job_id, (out, steps) in run.jobs.items():
        attempts = job.attempts(out)
        if fault is not None and fault.restarts_nothing and [a.attempt for a in attempts] != [1]:
            violations.append(
                f"{job_id}: restarted by a fault that restarts nothing (attempts "
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
        violations += [f"{job_id}: {line}" for line in ledger.zombie_writes(_entries(run, job_id))]
    violations += _quarantined(run)
    if violations:
        return violations
    violations = _committed_once(run)
    violations += _store_checks(run)
    for job_id, (out, _) in run.jobs.items():
        gone = ledger.missing(run.ledger(job_id), out / ledger.LOG)
        if gone:
            violations.append(f"{job_id}: ledger entries {gone} deleted (not zkstore's)")
    violations += [f"deleted, not zkstore's: {url}" for url in run.missing_sentinels()]
    return violations + processes.account(run, timeout=2 * run.config.session_timeout + 10)


def _entries(run: RunCluster, job_id: str) -> list[ledger.Entry]:
    return run.ledger(job_id).entries()


def ledger_counts(run: RunCluster) -> str:
    """How much the zombie-write check looked at: the jobs' writes and attempts in storage."""
    writes = attempts = 0
    for job_id in run.jobs:
        entries = _entries(run, job_id)
        writes += len(entries)
        attempts += len({e.attempt for e in entries})
    return f"ledger: {writes} writes in storage by {attempts} attempts of {len(run.jobs)} jobs"


def _committed_once(run: RunCluster) -> list[str]:
    """Invariant 11, as a reader of the outputs sees them once every job is over; what it read
    is left in ``run.outputs_read`` (the run's table prints it)."""
    violations = []
    parts_read, attempts = 0, 0
    for job_id, (out, steps) in run.jobs.items():
        result = job.output(out)
        ran = steps if steps is not None else (result or {}).get("steps", 0)
        shown = _zkstore(run, "outputs", "show", job_id, job.STEPS, "--format", "json")
        if shown.returncode != 0:
            violations.append(f"{job_id}: outputs show failed: {shown.stderr.strip()}")
            continue
        manifest = json.loads(shown.stdout)
        parts = []
        for path in manifest["paths"]:
            fs, root = fsspec.core.url_to_fs(path, **run.config.storage_options)
            parts.append((path, fs.cat_file(root)))
        violations += [f"{job_id}: {line}" for line in job.committed_once(parts, ran)]
        parts_read += len(parts)
        attempts += len({c["attempt"] for c in manifest["commits"]})
    run.outputs_read = (
        f"outputs: {parts_read} committed parts read, committed by {attempts} attempts of "
        f"{len(run.jobs)} jobs"
    )
    return violations


def _quarantined(run: RunCluster) -> list[str]:
    listed = _zkstore(run, "quarantine", "list", "--format", "json")
    if listed.returncode != 0:
        return [f"quarantine list failed: {listed.stderr.strip()}"]
    found = json.loads(listed.stdout)
    return [f"quarantined for a fault that was not the job's: {found}"] if found else []


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
