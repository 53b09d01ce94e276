"""The upgrade test's phases, its checks and its table: ``python -m recovery.dev.upgrade``.

1. The previous release (:mod:`.previous`), built once in a virtual environment of its own.
2. A fleet of it (:mod:`.mixed`): an embedded ZooKeeper, local storage, three daemons; the
   workload submitted with its command line (:mod:`.workload`): checkpointing jobs that run
   until the end, a Spark job, a schedule every few seconds, a job stopped, a job waiting
   ``--after`` a running one; and one job submitted by this code's command line, which a
   daemon of the previous release runs.
3. A rolling upgrade to this code, one daemon at a time, the leader last; the same backwards;
   again forwards, then ``zkstore fleet finalize``. After each restart every job is looked at
   (by this code and by the previous release's ``jobs list``): none quarantined, none needing
   a newer daemon, none restarted; while a daemon of the previous release lives, every
   command of a newer feature (:mod:`.features`) and ``fleet finalize`` are refused (exit 9).
4. The end: the stopped job resumed by this code's command line, the others stopped, every
   job's evidence checked (:mod:`.checks`, the chaos checkers): one attempt each, exact
   outputs, the ``--after`` job after its dependency, each schedule window once and none
   early, no dangling or lingering handle; then no process of the fleet left behind.

Every violation is printed; the exit code is 1 if there was any.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from recovery.client.client import Client
from recovery.dev.chaos import job as chaos_job
from recovery.dev.chaos.probe import NAME, ScheduleProbe
from recovery.dev.chaos.schedules import read_runs
from recovery.dev.upgrade import checks, features, workload
from recovery.dev.upgrade.checks import Job
from recovery.dev.upgrade.features import FallsBack, Refused, Targets
from recovery.dev.upgrade.mixed import (
    START_DEADLINE,
    STOP_DEADLINE,
    MixedFleet,
    Restart,
    Side,
    new_side,
    wait_until,
)
from recovery.dev.upgrade.previous import Build, build, find_previous, release_at
from zkstore import __version__, protocol
from zkstore.errors import ZkStoreError
from zkstore.jobs.states import NEEDS_UPGRADE, QUARANTINED, STOPPED, SUCCEEDED
from zkstore.strict import parse_time

logger = logging.getLogger(__name__)

WORKLOAD = Path(workload.__file__).resolve()
#: The schedule's interval, seconds.
EVERY = 5
#: The pace of the jobs: a checkpoint per step.
STEP_DELAY = 0.5
SPARK_DELAY = 1.0
STOPPED_ID, AFTER_ID, DEPENDENCY_ID, NEW_CLI_ID = "stopped", "after", "long-1", "new-cli"
#: The stopped job's steps: it is stopped after a few, resumed after the upgrade.
STOPPED_STEPS = 30
#: The jobs' results, once told to finish: the stopped job's remaining steps, the --after job,
#: each a driver's start (an interpreter on a loaded machine, a Spark step).
RESULTS_DEADLINE = STOPPED_STEPS * STEP_DELAY + 2 * START_DEADLINE
BAD_STATES = (QUARANTINED, NEEDS_UPGRADE)


@dataclass
class Phase:
    name: str
    seconds: float
    notes: list[str] = field(default_factory=list)


class UpgradeTest:
    """One run of the upgrade test; :meth:`run` returns True if nothing was violated."""

    def __init__(
        self, repo: Path, cache: Path, work: Path, python: str, against: str | None = None
    ) -> None:
        self.repo, self.cache, self.work, self.python = repo, cache, work, python
        self.against = against
        self.phases: list[Phase] = []
        self.violations: list[str] = []
        self.fleet: MixedFleet | None = None
        self.client: Client | None = None
        self.probe: ScheduleProbe | None = None
        self.built: Build | None = None
        self.jobs: dict[str, Job] = {}
        self.new = new_side()
        self.began = time.monotonic()
        #: the commands refused (exit 9) while a daemon of the previous release lived
        self.refused: list[str] = []

    # -- output ----------------------------------------------------------------------------------

    def say(self, line: str) -> None:
        print(f"[{time.monotonic() - self.began:6.1f}s] {line}", flush=True)

    def violation(self, line: str) -> None:
        self.violations.append(line)
        self.say(f"VIOLATION: {line}")

    @contextmanager
    def phase(self, name: str) -> Iterator[list[str]]:
        self.say(f"== {name}")
        began = time.monotonic()
        notes: list[str] = []
        try:
            yield notes
        finally:
            self.phases.append(Phase(name, time.monotonic() - began, notes))
            self.say(f"== {name}: {time.monotonic() - began:.1f} s")

    def table(self) -> str:
        rows = [(p.name, f"{p.seconds:.1f} s", "; ".join(p.notes)) for p in self.phases]
        rows.append(("total", f"{time.monotonic() - self.began:.1f} s", ""))
        width = [max(len(r[i]) for r in rows) for i in range(2)]
        return "\n".join(
            f"{r[0].ljust(width[0])}  {r[1].rjust(width[1])}  {r[2]}".rstrip() for r in rows
        )

    # -- the run ---------------------------------------------------------------------------------

    def run(self) -> bool:
        finished = False
        try:
            self._run()
            finished = True
        except Exception as exc:  # a harness failure is reported as a violation
            logger.exception("the upgrade test broke")
            self.violation(f"harness: {type(exc).__name__}: {exc}")
        finally:
            self._teardown(count=finished)
        return not self.violations

    def _run(self) -> None:
        with self.phase("previous release") as notes:
            if self.against is None:
                release = find_previous(self.repo, __version__)
            else:
                release = release_at(self.repo, self.against)
            notes.append(f"{release.version} at {release.short} ({release.found_by})")
            self.say(f"this code: {__version__}; the release before it: {notes[-1]}")
        with self.phase("build") as notes:
            self.built = build(self.repo, release, self.cache, python=self.python, say=self.say)
            notes.append(
                f"{'reused' if self.built.reused else 'built'} in {self.built.root}: "
                f"{self.built.says}"
            )
            self.say(notes[-1])
        old = Side("old", release.version, self.built.python, self.built.zkstore)
        self.fleet = MixedFleet(self.work, old, self.new, say=self.say)
        with self.phase(f"fleet of {old.version}") as notes:
            config = self.fleet.start_servers()
            self.fleet.start_fleet(old)
            # Opened only now: the old daemons made the cluster (at their protocol); this
            # code's client would make a new one at this code's.
            self.client = Client(config)
            notes.append(self._fleet_line())
        with self.phase("workload") as notes:
            self._submit_workload(notes)
            self._check_refusals("a fleet of the previous release")
            notes.append(self._refusals())
        for name, side in (
            (f"upgrade to {self.new.version}", self.new),
            (f"downgrade to {old.version}", old),
            (f"upgrade to {self.new.version} again", self.new),
        ):
            with self.phase(name) as notes:
                notes.append(self._restarts(self.fleet.roll(side, self._after_restart)))
                notes.append(self._refusals())
        with self.phase("finalize") as notes:
            self._finalize(notes)
        with self.phase("finish") as notes:
            self._finish(notes)
        with self.phase("checks") as notes:
            self._check_evidence(notes)

    @property
    def old(self) -> Side:
        assert self.fleet is not None
        return self.fleet.old

    def _fleet(self) -> MixedFleet:
        assert self.fleet is not None
        return self.fleet

    def _client(self) -> Client:
        assert self.client is not None
        return self.client

    def _fleet_line(self) -> str:
        status = self._fleet().fleet_status()
        daemons = ", ".join(
            f"{d['daemon_id']} {d['release']} (protocol {d['protocol']})"
            for d in status["daemons"]  # type: ignore[attr-defined]
        )
        return f"fleet protocol {status['protocol']}: {daemons}"

    def _refusals(self) -> str:
        """What was refused since the last call, for the table (and said why if nothing)."""
        done, self.refused = self.refused, []
        if done:
            counted = {command: done.count(command) for command in done}
            return "refused: " + ", ".join(f"{c} x{n}" for c, n in counted.items())
        assert self.built is not None
        return (
            f"nothing to refuse: no feature of this code is newer than {self.old.version}'s "
            f"protocol {self.built.protocol}"
        )

    def _restarts(self, done: list[Restart]) -> str:
        return ", ".join(
            f"{r.daemon_id}{' (leader)' if r.was_leader else ''} {r.seconds:.0f} s" for r in done
        )

    # -- the workload ----------------------------------------------------------------------------

    def _submit(
        self, side: Side, item: Job, function: str, args: Sequence[str], *options: str
    ) -> None:
        ran = self._fleet().run(
            side,
            "submit",
            f"{WORKLOAD}:{function}",
            "--job-id",
            item.job_id,
            "--max-attempts",
            "3",
            *options,
            "--",
            *args,
        )
        if ran.returncode != 0:
            raise RuntimeError(f"{side.version}'s submit of {item.job_id}: {ran.line()}")
        self.jobs[item.job_id] = item

    def _submit_workload(self, notes: list[str]) -> None:
        fleet, old, new, out = self._fleet(), self.old, self.new, self.work / "out"
        forever = workload.UNTIL_STOPPED
        for n in (1, 2, 3):
            item = Job(f"long-{n}", out / f"long-{n}", old.name)
            self._submit(old, item, "squares", [str(item.out), forever, str(STEP_DELAY)])
        spark = Job("spark", out / "spark", old.name, total=workload.spark_total)
        spark_conf = (
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=1",
        )
        self._submit(old, spark, "spark_actions", [str(spark.out), str(SPARK_DELAY)], *spark_conf)
        stopped = Job(STOPPED_ID, out / STOPPED_ID, old.name, STOPPED_STEPS, spans_upgrade=False)
        self._submit(old, stopped, "squares", [str(stopped.out), str(STOPPED_STEPS), "0.5"])
        after = Job(AFTER_ID, out / AFTER_ID, old.name, 5, spans_upgrade=False)
        self._submit(old, after, "squares", [str(after.out), "5", "0.1"], "--after", DEPENDENCY_ID)
        created = fleet.run(
            old,
            "schedules",
            "create",
            NAME,
            f"{WORKLOAD}:tick",
            "--every",
            f"{EVERY}s",
            "--catchup",
            "all",
            "--max-attempts",
            "3",
            "--",
            str(out / "schedule"),
            "0",
        )
        if created.returncode != 0:
            raise RuntimeError(f"schedules create: {created.line()}")
        self.probe = ScheduleProbe(self._client(), out / "schedule", every=EVERY)
        self.probe.created = parse_time(self.probe.store.get(NAME).spec.created)
        notes.append(f"{len(self.jobs)} jobs and schedule {NAME} by {old.version}'s command line")
        # This code's command line in a fleet of the previous release: what it writes, the
        # old daemons read (it runs on one of them: they are all old).
        mine = Job(NEW_CLI_ID, out / NEW_CLI_ID, new.name)
        self._submit(new, mine, "squares", [str(mine.out), forever, str(STEP_DELAY)])
        placed = self._running_on(NEW_CLI_ID)
        member = fleet.member(placed)
        release = member.release if member is not None else None
        notes.append(f"{NEW_CLI_ID} by {new.version}'s command line runs on {placed} ({release})")
        self.say(notes[-1])
        if release != old.version:
            self.violation(
                f"{NEW_CLI_ID} runs on {placed}, a daemon of {release}, not {old.version}"
            )
        self._wait_steps(stopped, 3)
        ran = fleet.run(old, "jobs", "stop", STOPPED_ID, "--reason", "the upgrade test")
        if ran.returncode != 0 or self._client().status(STOPPED_ID).state != STOPPED:
            raise RuntimeError(f"{old.version}'s jobs stop {STOPPED_ID}: {ran.line()}")
        notes.append(f"{STOPPED_ID} stopped by {old.version}'s jobs stop")
        for item in self.jobs.values():
            if item.spans_upgrade:
                self._wait_steps(item, 2)
        self.say("every job runs, the stopped one is STOPPED, the --after one waits")
        self._observe("the workload submitted")

    def _running_on(self, job_id: str) -> str:
        found: list[str] = []

        def running() -> bool:
            snapshot = self._client().status(job_id)
            if snapshot.running is None or snapshot.status is None:
                return False
            found.append(snapshot.status.daemon_id or "?")
            return True

        wait_until(running, START_DEADLINE, f"{job_id} running")
        return found[-1]

    def _wait_steps(self, item: Job, steps: int) -> None:
        def progressed() -> bool:
            try:
                lines = (item.out / "progress.log").read_text().splitlines()
            except FileNotFoundError:
                return False
            return len(lines) >= steps

        wait_until(progressed, START_DEADLINE, f"{item.job_id} at step {steps}")

    # -- during the upgrade ----------------------------------------------------------------------

    def _after_restart(self, restart: Restart) -> None:
        self._observe(f"after {restart.daemon_id}'s restart on {restart.to}")
        if any(self._fleet().side_of(d) == self.old for d in self._fleet().started):
            self._check_refusals(f"after {restart.daemon_id}'s restart")

    def _observe(self, when: str) -> None:
        """Every job as this code and the previous release's command line see it."""
        client = self._client()
        for item in self.jobs.values():
            snapshot = client.status(item.job_id)
            if snapshot.state in BAD_STATES:
                self.violation(f"{when}: {item.job_id} is {snapshot.state}")
            if item.spans_upgrade and snapshot.attempt not in (None, 1):
                self.violation(f"{when}: {item.job_id} is on attempt {snapshot.attempt}")
            if item.job_id == STOPPED_ID and snapshot.state != STOPPED:
                self.violation(f"{when}: {STOPPED_ID} is {snapshot.state}, not {STOPPED}")
        listed = self._fleet().run(self.old, "jobs", "list", "--format", "json")
        if listed.returncode != 0:
            self.violation(f"{when}: {self.old.version}'s jobs list: {listed.line()}")
            return
        for shown in json.loads(listed.stdout):
            if shown["state"] in BAD_STATES:
                self.violation(
                    f"{when}: {self.old.version}'s jobs list shows {shown['job_id']} "
                    f"{shown['state']}: {shown.get('error')}"
                )

    def _check_refusals(self, when: str) -> None:
        """While a daemon of the previous release lives: every command of a newer feature,
        and ``fleet finalize``, refused with exit 9 and its reason."""
        fleet, old = self._fleet(), self.old
        assert self.built is not None
        targets = Targets(
            running_job=DEPENDENCY_ID,
            stopped_job=STOPPED_ID,
            workload=WORKLOAD,
            out=self.work / "out" / "refused",
        )
        for feature, entry in features.newer_than(self.built.protocol):
            if isinstance(entry, FallsBack):
                continue  # nothing refused: the new command line's job proves the fallback
            assert isinstance(entry, Refused)
            ran = fleet.run(self.new, *entry.command(targets))
            problem = features.refusal_problem(feature, ran.returncode, ran.stderr)
            if problem is not None:
                self.violation(f"{when}: {' '.join(ran.argv[1:])}: {problem}")
            else:
                self.refused.append(" ".join(ran.argv[1:3]))
        if self.built.protocol < protocol.PROTOCOL:
            ran = fleet.run(self.new, "fleet", "finalize", "--yes")
            if ran.returncode != 9 or "cannot finalize" not in ran.line():
                self.violation(
                    f"{when}: fleet finalize with a daemon of {old.version} in the fleet: "
                    f"exit {ran.returncode} ({ran.line()}), not refused with exit 9"
                )
            else:
                self.refused.append("fleet finalize")

    # -- the end ---------------------------------------------------------------------------------

    def _finalize(self, notes: list[str]) -> None:
        fleet, old = self._fleet(), self.old
        assert self.built is not None
        ran = fleet.run(self.new, "fleet", "finalize", "--yes")
        notes.append(f"fleet finalize --yes: exit {ran.returncode}: {ran.line()}")
        self.say(notes[-1])
        if ran.returncode != 0:
            self.violation(f"fleet finalize with every daemon upgraded: {ran.line()}")
        at = fleet.fleet_status()["protocol"]
        if at != protocol.PROTOCOL:
            self.violation(f"the fleet is at protocol {at} after finalize, not {protocol.PROTOCOL}")
        if self.built.protocol >= protocol.PROTOCOL:
            notes.append(
                f"an old daemon's refusal skipped: this code speaks protocol {protocol.PROTOCOL}, "
                f"as {old.version} does (nothing newer to finalize, so {old.version} may still "
                "join)"
            )
            self.say(notes[-1])
            return
        command = fleet.cluster.daemon_command("late", python=old.python)
        late = fleet.run_process(command)
        lines = late.stderr.strip().splitlines()
        wanted = f"finalized at protocol {protocol.PROTOCOL}"
        if late.returncode != 9 or not lines or "FleetVersionError" not in lines[-1]:
            self.violation(
                f"a daemon of {old.version} after the finalization: exit {late.returncode}, "
                f"not 9 ({lines[-1] if lines else 'no message'})"
            )
        elif wanted not in lines[-1]:
            self.violation(f"a daemon of {old.version} refused, without saying {wanted!r}")
        else:
            notes.append(f"a daemon of {old.version} refused: exit 9: {lines[-1]}")
            self.say(notes[-1])
        wait_until(lambda: fleet.member("late") is None, STOP_DEADLINE, "late's record gone")

    def _finish(self, notes: list[str]) -> None:
        fleet, client = self._fleet(), self._client()
        resumed = fleet.run(self.new, "jobs", "resume", STOPPED_ID)
        if resumed.returncode != 0:
            self.violation(f"{self.new.version}'s jobs resume {STOPPED_ID}: {resumed.line()}")
        else:
            notes.append(f"{STOPPED_ID} resumed by {self.new.version}'s jobs resume")
        for item in self.jobs.values():
            if item.steps is None:
                item.out.mkdir(parents=True, exist_ok=True)
                (item.out / "stop").touch()
        end = time.monotonic() + RESULTS_DEADLINE
        for item in self.jobs.values():
            try:
                result = client.wait(item.job_id, timeout=max(1.0, end - time.monotonic()))
            except ZkStoreError as exc:
                self.violation(f"{item.job_id}: no result: {type(exc).__name__}: {exc}")
                continue
            if result.outcome != SUCCEEDED:
                self.violation(
                    f"{item.job_id}: {result.outcome} after {result.attempts} attempt(s)"
                )
        try:
            wait_until(
                lambda: all(client.status(j).state == SUCCEEDED for j in self.jobs),
                STOP_DEADLINE,
                "every job cleaned up (CLEAN)",
            )
        except TimeoutError as exc:
            self.violation(str(exc))
        notes.append(f"{len(self.jobs)} jobs SUCCEEDED")
        assert self.probe is not None
        found, counts = self.probe.check(RESULTS_DEADLINE)
        for problem in found:
            self.violation(problem)
        self.probe.stop()
        notes.append(f"schedule: {counts}")
        self.say(f"schedule {NAME}: {counts}")

    def _check_evidence(self, notes: list[str]) -> None:
        fleet = self._fleet()
        found: list[str] = []
        for item in self.jobs.values():
            wanted = [1, 2] if item.job_id == STOPPED_ID else [1]
            found += checks.attempts_kept(item, wanted)
            found += checks.steps_once(item)
            found += checks.output_exact(item)
        found += checks.ran_after(self.jobs[AFTER_ID], self.jobs[DEPENDENCY_ID])
        runs = read_runs(self.work / "out" / "schedule", NAME)
        found += checks.runs_once(runs)
        verify = fleet.run(self.new, "handles", "verify", "--format", "json")
        if verify.returncode != 0 or json.loads(verify.stdout)["problems"]:
            found.append(f"handles verify: {verify.stdout.strip()} {verify.line()}")
        cleanup = fleet.run(self.new, "handles", "cleanup", "--min-age", "0", "--yes")
        if cleanup.returncode != 0:
            found.append(f"handles cleanup: {cleanup.line()}")
        lingering = fleet.run(
            self.new, "handles", "lingering", "--min-age", "0", "--format", "json"
        )
        left = json.loads(lingering.stdout)["findings"] if lingering.returncode == 0 else None
        if left != []:
            found.append(f"lingering after cleanup: {left if left else lingering.line()}")
        quarantined = fleet.run(self.new, "quarantine", "list", "--format", "json")
        if quarantined.returncode != 0 or json.loads(quarantined.stdout):
            found.append(f"quarantine list: {quarantined.stdout.strip()} {quarantined.line()}")
        for problem in found:
            self.violation(problem)
        outputs = [
            f"{item.job_id} {len(chaos_job.attempts(item.out))} attempt(s)"
            for item in self.jobs.values()
        ]
        notes.append(f"{len(found)} problem(s); {', '.join(outputs)}; {len(runs)} schedule runs")

    def _teardown(self, count: bool) -> None:
        with self.phase("teardown") as notes:
            fleet = self.fleet
            if self.client is not None:
                self.client.close()
            if fleet is None:
                return
            if count and fleet.local is not None:
                slow = fleet.stop_daemons()
                if slow:
                    self.violation(
                        f"daemons still running {STOP_DEADLINE:g} s after SIGTERM: {slow}"
                    )
                try:
                    wait_until(
                        lambda: not any(fleet.processes().values()),
                        STOP_DEADLINE,
                        "every process of the fleet gone",
                    )
                except TimeoutError:
                    self.violation(f"processes left behind: {fleet.processes()}")
                left = fleet.processes()
                notes.append(
                    f"left behind: {len(left['daemons'])} daemons, {len(left['drivers'])} "
                    f"drivers, {len(left['others'])} other processes"
                )
                self.say(notes[-1])
            fleet.close()


def repository() -> Path:
    """The checkout this code runs from (its ``CHANGELOG.md`` and git history)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "CHANGELOG.md").is_file():
        raise SystemExit(f"no CHANGELOG.md in {root}: run the upgrade test from a checkout")
    return root


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recovery.dev.upgrade", description=__doc__)
    parser.add_argument("--cache", type=Path, help="where builds are kept [.upgrade/]")
    parser.add_argument("--work-dir", type=Path, help="the fleet's files [a temporary directory]")
    parser.add_argument("--keep", action="store_true", help="keep the fleet's files")
    parser.add_argument("--python", default="python3.11", help="makes the release's venv")
    parser.add_argument(
        "--against",
        metavar="COMMIT",
        help="run a commit's code as the older release instead of the previous release (to "
        "try the paths of a newer protocol before a release raises it)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    repo = repository()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="zkstore-upgrade-"))
    cache = args.cache or repo / ".upgrade"
    test = UpgradeTest(repo, cache, work.resolve(), args.python, args.against)
    test.say(f"upgrade test of zkstore {__version__} ({protocol.describe()}); files in {work}")
    passed = test.run()
    print()
    print(test.table())
    if passed:
        print(f"verdict: PASS: no violation ({len(test.phases)} phases)")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    print(f"verdict: FAIL: {len(test.violations)} violation(s); the fleet's files are in {work}")
    for line in test.violations:
        print(f"  {line}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
