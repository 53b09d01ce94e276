"""Chaos runs and their table: ``python -m recovery.dev.chaos --runs 20 [--seed N]``.

One run: a fresh cluster (its own cluster id and storage prefix) with three daemons on the
shared ensemble and S3 server; a mix of checkpointing jobs and a schedule firing every 3 s
(:mod:`.probe`); one scenario's fault injected while they run; then every invariant checked
(:mod:`.invariants`, and the schedule's: every window exactly one run, none early); then the
daemons stopped and the Spark JVMs of the run counted (one daemon keeps a warm driver JVM:
none may be left, whatever the fault did to its daemon), and the servers healed for the next
run. The seed is printed first: ``--seed`` replays the same
scenarios, targets and durations.

Time to recover is the longest stall of any job's progress across the fault (jobs step every
0.2 s when healthy).
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from recovery.dev.chaos import invariants, job
from recovery.dev.chaos.faults import LOADS, SCENARIOS, Fault, Load
from recovery.dev.chaos.probe import ScheduleProbe
from recovery.dev.chaos.world import RunCluster, World

logger = logging.getLogger(__name__)

STEP_DELAY = 0.2


@dataclass
class RunReport:
    scenario: str
    fault: Fault | None
    violations: list[str]
    recovery: float
    seconds: float
    #: what the schedule's checker counted (windows, runs, delays)
    schedule: str = ""
    #: Spark JVMs left behind once the run's daemons stopped (a violation unless 0)
    jvms_left: int = 0


@dataclass
class Options:
    runs: int = 20
    seed: int = field(default_factory=lambda: random.SystemRandom().randrange(10**6))
    scenarios: Sequence[str] = tuple(SCENARIOS)
    jobs: int = 4
    steps: int = 60
    session_timeout: float = 6.0
    job_timeout: float = 300.0
    work_dir: Path | None = None
    keep_going: bool = True


def plan(options: Options) -> list[str]:
    """The scenario of each run: every scenario in turn, in a seeded order."""
    rng = random.Random(options.seed)
    order: list[str] = []
    while len(order) < options.runs:
        batch = list(options.scenarios)
        rng.shuffle(batch)
        order += batch
    return order[: options.runs]


def one_run(world: World, index: int, scenario: str, options: Options) -> RunReport:
    rng = random.Random(f"{options.seed}-{index}")
    began = time.monotonic()
    run = RunCluster(world, f"run{index:03d}", session_timeout=options.session_timeout)
    fault: Fault | None = None
    violations: list[str] = []
    schedule = ""
    recovery = float("nan")
    try:
        run.start()
        assert run.client is not None
        probe = ScheduleProbe(run.client, run.work_dir / "out" / "schedule")
        probe.start()
        load = LOADS.get(scenario, Load(options.jobs, options.steps))
        for _ in range(max(options.jobs, load.jobs)):
            steps = max(options.steps, load.steps)
            run.submit(rng.randint(steps // 2, steps), STEP_DELAY)
        _wait_progress(run, steps=3, timeout=120)
        time.sleep(rng.uniform(0.0, 2.0))
        fault = SCENARIOS[scenario](run, rng)
        world.heal()
        # The schedule first, then stopped: the invariants' cleanup (minimum age 0) must not
        # meet the payload of a fire in flight (written, its transaction not yet committed).
        found, schedule = probe.check(options.job_timeout)
        probe.stop()
        violations = invariants.check(run, options.job_timeout, fault) + found
        recovery = max(
            job.longest_stall(job.progress_times(out), fault.start, fault.end)
            for out, _ in run.jobs.values()
        )
    except Exception as exc:  # a harness failure is reported as a violation
        logger.exception("run %d (%s) broke", index, scenario)
        violations.append(f"harness: {type(exc).__name__}: {exc}")
    finally:
        run.close()
        if run.jvms_left:
            violations.append(
                f"{len(run.jvms_left)} Spark JVM(s) of the run left behind after its daemons "
                f"stopped: pids {', '.join(map(str, run.jvms_left))}"
            )
        if violations:
            (run.work_dir / "logs.txt").write_text(run.logs())
        world.heal()
    return RunReport(
        scenario,
        fault,
        violations,
        recovery,
        time.monotonic() - began,
        schedule,
        len(run.jvms_left),
    )


def _wait_progress(run: RunCluster, steps: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if all(len(job.progress_times(out)) >= steps for out, _ in run.jobs.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"jobs made no progress within {timeout:g} s")


def table(reports: Sequence[RunReport]) -> str:
    """scenario, runs, violations, time to recover (median, max)."""
    rows = [("scenario", "runs", "violations", "recover median s", "recover max s")]
    for scenario in dict.fromkeys(r.scenario for r in reports):
        mine = [r for r in reports if r.scenario == scenario]
        times = [r.recovery for r in mine if r.recovery == r.recovery]
        rows.append(
            (
                scenario,
                str(len(mine)),
                str(sum(len(r.violations) for r in mine)),
                f"{statistics.median(times):.1f}" if times else "-",
                f"{max(times):.1f}" if times else "-",
            )
        )
    total = sum(len(r.violations) for r in reports)
    rows.append(("all", str(len(reports)), str(total), "", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def run_all(options: Options) -> list[RunReport]:
    work = options.work_dir or Path(tempfile.mkdtemp(prefix="zkstore-chaos-"))
    print(f"chaos: seed {options.seed} (replay with --seed {options.seed}), work in {work}")
    reports = []
    with World(work).start() as world:
        for index, scenario in enumerate(plan(options), start=1):
            report = one_run(world, index, scenario, options)
            reports.append(report)
            status = "ok" if not report.violations else f"{len(report.violations)} VIOLATION(S)"
            what = report.fault.description if report.fault else "no fault injected"
            print(
                f"run {index:3d} {scenario:17s} {status:14s} recover {report.recovery:5.1f} s"
                f"  ({report.seconds:.0f} s, JVMs left {report.jvms_left})  {what}",
                flush=True,
            )
            if report.schedule:
                print(f"    schedule: {report.schedule}", flush=True)
            for violation in report.violations:
                print(f"    violation: {violation}", flush=True)
            if report.violations and not options.keep_going:
                break
    print()
    print(table(reports))
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recovery.dev.chaos", description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--jobs", type=int, default=4, help="jobs per run")
    parser.add_argument("--session-timeout", type=float, default=6.0)
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--stop-on-violation", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    options = Options(
        runs=args.runs,
        scenarios=tuple(args.scenario or SCENARIOS),
        jobs=args.jobs,
        session_timeout=args.session_timeout,
        work_dir=args.work_dir,
        keep_going=not args.stop_on_violation,
    )
    if args.seed is not None:
        options.seed = args.seed
    reports = run_all(options)
    return 1 if any(r.violations for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
