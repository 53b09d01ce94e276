"""Chaos runs and their table: ``python -m zkstore_dev.chaos --runs 20 [--seed N]``.

One run: a fresh cluster (its own cluster id and storage prefix) with three daemons on the
shared ensemble and S3 server; a mix of checkpointing jobs and a schedule firing every 3 s
(:mod:`.probe`); one scenario's fault injected while they run; then every invariant checked
(:mod:`.invariants`, and the schedule's: every window exactly one run, none early); then the
daemons stopped and the Spark JVMs of the run counted (one daemon keeps a warm driver JVM:
none may be left, whatever the fault did to its daemon), and the servers healed for the next
run. The seed is printed first: ``--seed`` replays the same
scenarios, targets and durations.

Time to recover is the longest stall of any job's progress across the fault (jobs step every
0.2 s when healthy): for a driver killed, from its last step before the fault to the next
attempt's first. After a partition, a job whose attempt was stopped recovered at its next
attempt's first step, counted from the cut (a driver cut off from ZooKeeper steps on until its
lease ends, so its last step says nothing of when it was cut).

As root (where network namespaces can be made), every process runs on a host of its own
(:mod:`zkstore_dev.hosts`, :class:`~zkstore_dev.chaos.world.World`) and the partition
scenarios (:mod:`.partitions`) run beside the process faults, a partition first and then a
process fault in turn; elsewhere they are skipped, saying why in one line. ``--smoke`` shortens
the flap; ``--storage file`` runs on local disk instead of the S3 server (no storage host to cut
off, nothing to freeze); ``--loopback`` keeps everything on this machine's loopback.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zkstore_dev import hosts
from zkstore_dev.chaos import invariants, job, partitions
from zkstore_dev.chaos.faults import LOADS, SCENARIOS, Fault, Load, Scenario
from zkstore_dev.chaos.probe import ScheduleProbe
from zkstore_dev.chaos.schedule_checker import Verdict
from zkstore_dev.chaos.world import FILE, HOSTS, S3, RunCluster, World

__all__ = [
    "STEP_DELAY",
    "Options",
    "RunReport",
    "main",
    "one_run",
    "plan",
    "recovered",
    "run_all",
    "scenarios_of",
    "table",
]

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
    schedule: Verdict = field(default_factory=Verdict)
    #: what the zombie-write check read (the jobs' writes in storage)
    ledger: str = ""
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
    #: the partition scenarios to run beside :attr:`scenarios` (they need a world of hosts)
    partitions: Sequence[str] = ()
    smoke: bool = False
    storage: str = S3
    #: every process on this machine's loopback, even where hosts could be made
    loopback: bool = False


def plan(options: Options) -> list[str]:
    """The scenario of each run: every scenario in turn, in a seeded order; with partitions, a
    partition scenario and a process fault alternately (a partition first), so that a short
    campaign has both."""
    rng = random.Random(options.seed)
    order: list[str] = []
    if not options.scenarios and not options.partitions:
        return order
    while len(order) < options.runs:
        batch = list(options.scenarios)
        rng.shuffle(batch)
        cuts = list(options.partitions)
        rng.shuffle(cuts)
        for n in range(max(len(batch), len(cuts))):
            order += cuts[n : n + 1] + batch[n : n + 1]
    return order[: options.runs]


def scenarios_of(options: Options) -> dict[str, Scenario]:
    return {**SCENARIOS, **partitions.scenarios(smoke=options.smoke)}


def one_run(world: World, index: int, scenario: str, options: Options) -> RunReport:
    rng = random.Random(f"{options.seed}-{index}")
    began = time.monotonic()
    run = RunCluster(world, f"run{index:03d}", session_timeout=options.session_timeout)
    fault: Fault | None = None
    violations: list[str] = []
    schedule = Verdict()
    evidence = ""
    recovery = float("nan")
    try:
        run.start()
        assert run.client is not None
        probe = ScheduleProbe(run.client, run.work_dir / "out" / "schedule")
        probe.start()
        run.probe = probe
        load = {**LOADS, **partitions.LOADS}.get(scenario, Load(options.jobs, options.steps))
        for _ in range(max(options.jobs, load.jobs)):
            steps = max(options.steps, load.steps)
            run.submit(rng.randint(steps // 2, steps), STEP_DELAY)
        _wait_progress(run, steps=3, timeout=120)
        time.sleep(rng.uniform(0.0, 2.0))
        fault = scenarios_of(options)[scenario](run, rng)
        world.heal()
        # The schedule first, then stopped: the invariants' cleanup (minimum age 0) must not
        # meet the payload of a fire in flight (written, its transaction not yet committed).
        found, schedule = probe.check(
            options.job_timeout, fault.window_bound(run.config.session_timeout)
        )
        probe.stop()
        violations = invariants.check(run, options.job_timeout, fault) + found
        evidence = "; ".join(filter(None, [invariants.ledger_counts(run), run.outputs_read]))
        recovery = max(recovered(out, fault) for out, _ in run.jobs.values())
    except Exception as exc:  # a harness failure is reported as a violation
        logger.exception("run %d (%s) broke", index, scenario)
        violations.append(f"harness: {type(exc).__name__}: {exc}")
    finally:
        if world.network is not None:
            world.network.heal()  # before the daemons stop: they hand over through ZooKeeper
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
        evidence,
        len(run.jvms_left),
    )


def recovered(out: Path, fault: Fault) -> float:
    """How long the job took to recover from the fault (see :class:`Fault`)."""
    steps = job.progress(out)
    if fault.from_start:
        back = job.back_after(steps, fault.start)
        if back is not None:
            return back
    return job.longest_stall([at for _, at in steps], fault.start, fault.end)


def _wait_progress(run: RunCluster, steps: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if all(len(job.progress_times(out)) >= steps for out, _ in run.jobs.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"jobs made no progress within {timeout:g} s")


def table(reports: Sequence[RunReport]) -> str:
    """scenario, runs, violations, time to recover (median, max), the schedule's windows'
    delay (median, max)."""
    rows = [
        (
            "scenario",
            "runs",
            "violations",
            "recover median s",
            "recover max s",
            "window delay median s",
            "window delay max s",
        )
    ]
    for scenario in dict.fromkeys(r.scenario for r in reports):
        mine = [r for r in reports if r.scenario == scenario]
        times = [r.recovery for r in mine if r.recovery == r.recovery]
        delays = [d for r in mine for d in r.schedule.delays]
        rows.append(
            (
                scenario,
                str(len(mine)),
                str(sum(len(r.violations) for r in mine)),
                f"{statistics.median(times):.1f}" if times else "-",
                f"{max(times):.1f}" if times else "-",
                f"{statistics.median(delays):.1f}" if delays else "-",
                f"{max(delays):.1f}" if delays else "-",
            )
        )
    total = sum(len(r.violations) for r in reports)
    rows.append(("all", str(len(reports)), str(total), "", "", "", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def run_all(options: Options) -> list[RunReport]:
    work = (options.work_dir or Path(tempfile.mkdtemp(prefix="zkstore-chaos-"))).resolve()
    made = None if options.work_dir else work  # this run's to remove
    print(f"chaos: seed {options.seed} (replay with --seed {options.seed}), work in {work}")
    reports: list[RunReport] = []
    ended = False
    try:
        _run_in(work, options, reports)
        ended = True
    finally:  # a run that broke off keeps what it left, as one that found a violation does
        held = ended and bool(reports) and not any(r.violations for r in reports)
        print(finish_work(made, held=held))
    print()
    print(table(reports))
    return reports


def finish_work(made: Path | None, *, held: bool) -> str:
    """What becomes of the work directory, said in a line: one this run made (``made``) is
    removed when every run ended and held (it holds the ensemble's data, the daemons' and
    drivers' logs and the ledger, some megabytes a run), and kept for inspection otherwise, as
    is one the user named with ``--work-dir`` (never removed)."""
    if made is None:
        return "chaos: work kept where --work-dir said"
    if not held:
        return f"chaos: work kept for inspection in {made}"
    shutil.rmtree(made)  # made by this run (mkdtemp); rmtree follows no link inside it
    return f"chaos: work in {made} removed (no violation)"


def _run_in(work: Path, options: Options, reports: list[RunReport]) -> None:
    """The runs of ``options`` in ``work``, each one's report appended to ``reports``."""
    with contextlib.ExitStack() as stack:
        network = None
        why = "--loopback" if options.loopback else hosts.unavailable()
        if why is None and options.partitions:
            network = stack.enter_context(hosts.Network(HOSTS).start())
            print(f"chaos: hosts on {network.subnet}: {', '.join(HOSTS)}")
        elif options.partitions:
            print(f"chaos: partition scenarios skipped: {why}")
            options.partitions = ()
        options.partitions = [
            name
            for name in options.partitions
            if options.storage == S3 or name not in partitions.NEEDS_S3
        ]
        if options.storage != S3:
            options.scenarios = [name for name in options.scenarios if name != "s3-pause"]
        # On hosts, ZooKeeper ticks every second: a lost session expires within a second of
        # its timeout (tickTime rounds expiry up), as the failover figures assume.
        tick = 1000 if network is not None else 2000
        world = stack.enter_context(
            World(work, tick_time_ms=tick, network=network, storage=options.storage).start()
        )
        for index, scenario in enumerate(plan(options), start=1):
            report = one_run(world, index, scenario, options)
            reports.append(report)
            status = "ok" if not report.violations else f"{len(report.violations)} VIOLATION(S)"
            what = report.fault.description if report.fault else "no fault injected"
            print(
                f"run {index:3d} {scenario:18s} {status:14s} recover {report.recovery:5.1f} s"
                f"  ({report.seconds:.0f} s, JVMs left {report.jvms_left})  {what}",
                flush=True,
            )
            if report.schedule.windows:
                print(f"    schedule: {report.schedule.counts()}", flush=True)
            if report.ledger:
                print(f"    {report.ledger}", flush=True)
            for violation in report.violations:
                print(f"    violation: {violation}", flush=True)
            if report.violations and not options.keep_going:
                break


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zkstore_dev.chaos", description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int)
    every = scenarios_of(Options())
    parser.add_argument("--scenario", action="append", choices=sorted(every))
    parser.add_argument("--jobs", type=int, default=4, help="jobs per run")
    parser.add_argument("--session-timeout", type=float, default=6.0)
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--stop-on-violation", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a shorter flap (8 s, not 30 s)")
    parser.add_argument("--storage", choices=(S3, FILE), default=S3)
    parser.add_argument(
        "--loopback", action="store_true", help="no hosts: process faults only, on loopback"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    chosen = args.scenario or list(every)
    options = Options(
        runs=args.runs,
        scenarios=[name for name in chosen if name in SCENARIOS],
        partitions=[name for name in chosen if name not in SCENARIOS],
        smoke=args.smoke,
        storage=args.storage,
        loopback=args.loopback,
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
