"""The command line answers at once (issue 27): whole processes, side by side, median of rounds.

- ``zkstore --version`` against a process that imports kazoo, click and fsspec and exits (what
  any command of ours needs at least; goal <= 1.2x).
- A usage error (``zkstore jobs show`` without its JOB: exit 2) against the same baseline
  (goal <= 1.2x): a mistyped command must not pay for the whole runtime before it says so.
- ``zkstore jobs list`` on 100 jobs against a raw kazoo client in a process of its own:
  connect, list the same four parents, read the same nodes of every job with pipelined
  ``get_async`` calls, print one line per job, close (goal <= 1.5x).

Each round runs ours and the baseline one after the other (interleaved, so that a noisy moment
hurts both); printed: the median wall time of each, and their CPU (user + system, from the
kernel's accounting of the child), since CPU is steadier than wall time on a shared machine.
``--importtime`` also prints the heaviest imports of ``zkstore --version`` (``python -X
importtime``, cumulative microseconds), the list phase B works down.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Result, file_config, per_run, show_all, zookeeper
from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster

BASELINE_IMPORTS = "import kazoo.client, click, fsspec"

RAW_LIST = """
import sys
from kazoo.client import KazooClient
hosts, base = sys.argv[1], sys.argv[2]
client = KazooClient(hosts=hosts, timeout=10)
client.start(timeout=30)
parents = [f"{base}/{p}" for p in ("currentJobs", "jobs", "quarantine", "cleanup")]
listed = [client.get_children_async(p) for p in parents]
current, dirs = (set(r.get(timeout=30)) for r in listed[:2])
for r in listed[2:]:
    r.get(timeout=30)
jobs = sorted(current | dirs)
per_job = [
    [f"{base}/currentJobs/{j}"]
    + [f"{base}/jobs/{j}/{n}" for n in ("status", "running", "outcome", "cancel")]
    for j in jobs
]
pending = [[client.get_async(p) for p in paths] for paths in per_job]
out = []
for job, results in zip(jobs, pending):
    found = []
    for r in results:
        try:
            found.append(r.get(timeout=30)[0])
        except Exception:
            found.append(None)
    out.append(f"{job} {sum(f is not None for f in found)}")
sys.stdout.write("\\n".join(out) + "\\n")
client.stop()
client.close()
"""


def noop(ctx: object) -> None:
    """A job that does nothing (it never runs here: no daemon)."""


def run(argv: list[str], env: dict[str, str] | None = None, code: int = 0) -> tuple[float, float]:
    """Wall and CPU seconds of one whole process; its exit code must be ``code``."""
    start = time.perf_counter()
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != code:
        raise RuntimeError(f"{argv} exited with {process.returncode}, expected {code}")
    return wall, usage.ru_utime + usage.ru_stime


def side_by_side(
    name: str,
    ours: list[str],
    baseline: list[str],
    rounds: int,
    goal: str,
    *,
    env: dict[str, str] | None = None,
    code: int = 0,
) -> Result:
    run(ours, env, code)  # the page cache warm for both
    run(baseline, env)
    timings = [(run(ours, env, code), run(baseline, env)) for _ in range(rounds)]
    cpu = statistics.median(t[0][1] for t in timings)
    base_cpu = statistics.median(t[1][1] for t in timings)
    cpu_ratio = statistics.median(per_run([t[0][1] for t in timings], [t[1][1] for t in timings]))
    return Result.of_runs(
        name,
        [t[0][0] for t in timings],
        [t[1][0] for t in timings],
        goal,
        detail=f"CPU {cpu:.3f} s vs {base_cpu:.3f} s (ratio {cpu_ratio:.2f}, median of the "
        f"runs'); medians of {rounds}, interleaved; load {os.getloadavg()[0]:.2f}",
    )


def zkstore() -> str:
    return str(Path(sys.executable).parent / "zkstore")


def bench_start(rounds: int) -> list[Result]:
    baseline = [sys.executable, "-c", BASELINE_IMPORTS]
    return [
        side_by_side(
            "zkstore --version (vs importing kazoo, click and fsspec)",
            [zkstore(), "--version"],
            baseline,
            rounds,
            "<= 1.2",
        ),
        side_by_side(
            "a usage error: zkstore jobs show without JOB, exit 2 (vs the same imports)",
            [zkstore(), "jobs", "show"],
            baseline,
            rounds,
            "<= 1.2",
            code=2,
        ),
    ]


def bench_list(hosts: str, jobs: int, rounds: int) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        config = file_config(hosts, tmp)
        with Client(config) as client:
            for i in range(jobs):
                client.submit_function(noop, job_id=f"list-{i:04d}")
        env = LocalCluster(config, Path(tmp)).environment()
        raw = [sys.executable, "-c", RAW_LIST, hosts, config.base_path]
        return side_by_side(
            f"zkstore jobs list on {jobs} jobs (vs a raw kazoo client reading the same nodes)",
            [zkstore(), "jobs", "list"],
            raw,
            rounds,
            "<= 1.5",
            env=env,
        )


def importtime(top: int) -> None:
    """The heaviest imports of ``zkstore --version`` (cumulative), as ``-X importtime`` says."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", zkstore(), "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    rows = []
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), int(parts[0].split(":")[1]), parts[2].rstrip()))
    total = sum(own for _, own, _ in rows)
    print(f"  zkstore --version imports {len(rows)} modules, {total / 1000:.0f} ms in all")
    print(f"  the {top} heaviest (cumulative ms, own ms, module as nested):")
    for cumulative, own, name in sorted(rows, reverse=True)[:top]:
        print(f"    {cumulative / 1000:7.1f} {own / 1000:6.1f}  {name}")


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--importtime", type=int, default=0, metavar="N", help="top N imports")
    args = parser.parse_args(argv)
    results = bench_start(args.rounds)
    with zookeeper() as hosts:
        results.append(bench_list(hosts, args.jobs, args.rounds))
    shown = show_all(results)
    if args.importtime:
        importtime(args.importtime)
    return shown


if __name__ == "__main__":
    main()
