"""What the upgrade test does to the fleet and checks of it: the workload, the looks after each
restart, the refusals, the finalization, the end (:mod:`.run` runs them as its phases).

The workload (:mod:`.workload`) is submitted by the previous release's command line: three
chaos jobs that run until the end, a Spark job, a schedule, a job stopped with ``jobs stop``, a
job waiting ``--after`` a running one; and one job by this code's command line, which a daemon
of the previous release runs. After each restart every job is read by this code and by the
previous release's ``jobs list``; while a daemon of the previous release lives, each command of
a newer feature (:mod:`.features`) and ``fleet finalize`` must be refused. At the end the
evidence is checked (:mod:`.checks`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from recovery.client.api import Client
from zkstore import protocol
from zkstore.errors import ZkStoreError
from zkstore.records.job_states import NEEDS_UPGRADE, QUARANTINED, STOPPED, SUCCEEDED
from zkstore_dev.chaos import job as chaos_job
from zkstore_dev.chaos.probe import NAME, ScheduleProbe
from zkstore_dev.chaos.schedule_checker import read_runs
from zkstore_dev.upgrade import checks, features, workload
from zkstore_dev.upgrade.checks import Job
from zkstore_dev.upgrade.features import FallsBack, Refused, Targets
from zkstore_dev.upgrade.mixed import (
    START_DEADLINE,
    STOP_DEADLINE,
    MixedFleet,
    Restart,
    Side,
    wait_until,
)
from zkstore_dev.upgrade.previous import Build

__all__ = [
    "AFTER_ID",
    "BAD_STATES",
    "DEPENDENCY_ID",
    "EVERY",
    "NEW_CLI_ID",
    "RESULTS_DEADLINE",
    "SPARK_DELAY",
    "STEP_DELAY",
    "STOPPED_ID",
    "TYPED_ID",
    "WORKLOAD",
    "Scenario",
]

WORKLOAD = Path(workload.__file__).resolve()
#: The schedule's interval, seconds.
EVERY = 5
#: The pace of the jobs: a checkpoint per step.
STEP_DELAY = 0.5
SPARK_DELAY = 1.0
STOPPED_ID, AFTER_ID, DEPENDENCY_ID, NEW_CLI_ID = "stopped", "after", "long-1", "new-cli"
#: A job this code's command line submits once the fleet is finalized, with run options: its
#: handle keeps them typed (feature run-spec), which the previous release must refuse to read.
TYPED_ID = "typed"
#: The jobs' results, once told to finish: their last steps, then the --after job's start and
#: its five short steps (a driver's start: an interpreter on a loaded machine).
RESULTS_DEADLINE = 2 * START_DEADLINE
BAD_STATES = (QUARANTINED, NEEDS_UPGRADE)


class Scenario:
    """The workload of one upgrade test and what is checked of it; violations go to
    ``violation`` as they are found."""

    def __init__(
        self,
        fleet: MixedFleet,
        client: Client,
        built: Build,
        work: Path,
        say: Callable[[str], None],
        violation: Callable[[str], None],
    ) -> None:
        self.fleet, self.client, self.built, self.work = fleet, client, built, work
        self.say, self.violation = say, violation
        self.jobs: dict[str, Job] = {}
        self.probe: ScheduleProbe | None = None
        #: the commands refused (exit 9) while a daemon of the previous release lived
        self.refused: list[str] = []
        #: what each job was seen doing wrong already (said once, at the first restart seen)
        self.seen: set[tuple[str, str]] = set()

    @property
    def old(self) -> Side:
        return self.fleet.old

    @property
    def new(self) -> Side:
        return self.fleet.new

    def refusals(self) -> str:
        """What was refused since the last call, for the table (and said why if nothing)."""
        done, self.refused = self.refused, []
        if done:
            counted = {command: done.count(command) for command in done}
            return "refused: " + ", ".join(f"{c} x{n}" for c, n in counted.items())
        return (
            f"nothing to refuse: no feature of this code is newer than {self.old.version}'s "
            f"protocol {self.built.protocol}"
        )

    def _submit(
        self, side: Side, item: Job, function: str, args: Sequence[str], *options: str
    ) -> None:
        ran = self.fleet.run(
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

    def submit_workload(self, notes: list[str]) -> None:
        fleet, old, new, out = self.fleet, self.old, self.new, self.work / "out"
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
        # Stopped after a few steps, resumed after the upgrade: it runs until told to finish,
        # so that no pace of this machine can make it finish before its stop.
        stopped = Job(STOPPED_ID, out / STOPPED_ID, old.name, spans_upgrade=False)
        self._submit(old, stopped, "squares", [str(stopped.out), forever, str(STEP_DELAY)])
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
        self.probe = ScheduleProbe(self.client, out / "schedule", every=EVERY)
        self.probe.created = self.probe.store.get(NAME).spec.created
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
        # Its own wait (the checkpoint timeout, 5 min, and a margin) bounds it, not ours.
        ran = fleet.run(
            old, "jobs", "stop", STOPPED_ID, "--reason", "the upgrade test", deadline=600
        )
        if ran.returncode != 0 or self.client.status(STOPPED_ID).state != STOPPED:
            raise RuntimeError(f"{old.version}'s jobs stop {STOPPED_ID}: {ran.line()}")
        notes.append(f"{STOPPED_ID} stopped by {old.version}'s jobs stop")
        for item in self.jobs.values():
            if item.spans_upgrade:
                self._wait_steps(item, 2)
        self.say("every job runs, the stopped one is STOPPED, the --after one waits")
        self.observe("the workload submitted")

    def _running_on(self, job_id: str) -> str:
        found: list[str] = []

        def running() -> bool:
            snapshot = self.client.status(job_id)
            if snapshot.running is None or snapshot.status is None:
                return False
            found.append(snapshot.status.daemon_id or "?")
            return True

        wait_until(running, START_DEADLINE, f"{job_id} running")
        return found[-1]

    def _wait_steps(self, item: Job, steps: int, attempt: int | None = None) -> None:
        """Until the job logged ``steps`` steps (of ``attempt``, if given)."""

        def progressed() -> bool:
            try:
                lines = (item.out / "progress.log").read_text().splitlines()
            except FileNotFoundError:
                return False
            return (
                len([x for x in lines if attempt is None or x.split()[0] == str(attempt)]) >= steps
            )

        what = (
            f"{item.job_id} at {steps} steps{'' if attempt is None else f' of attempt {attempt}'}"
        )
        wait_until(progressed, START_DEADLINE, what)

    # -- during the upgrade ----------------------------------------------------------------------

    def after_restart(self, restart: Restart) -> None:
        self.observe(f"after {restart.daemon_id}'s restart on {restart.to}")
        if any(self.fleet.side_of(d) == self.old for d in self.fleet.started):
            self.check_refusals(f"after {restart.daemon_id}'s restart")

    def observe(self, when: str) -> None:
        """Every job as this code and the previous release's command line see it."""
        client = self.client
        for item in self.jobs.values():
            snapshot = client.status(item.job_id)
            if snapshot.state in BAD_STATES:
                self._once(item.job_id, "state", f"{when}: {item.job_id} is {snapshot.state}")
            if item.spans_upgrade and snapshot.attempt not in (None, 1):
                self._once(
                    item.job_id,
                    "attempt",
                    f"{when}: {item.job_id} is on attempt {snapshot.attempt}",
                )
            if item.job_id == STOPPED_ID and snapshot.state != STOPPED:
                self._once(
                    item.job_id,
                    "stopped",
                    f"{when}: {STOPPED_ID} is {snapshot.state}, not {STOPPED}",
                )
        listed = self.fleet.run(self.old, "jobs", "list", "--format", "json")
        if listed.returncode != 0:
            self.violation(f"{when}: {self.old.version}'s jobs list: {listed.line()}")
            return
        for shown in json.loads(listed.stdout):
            if shown["state"] in BAD_STATES:
                self._once(
                    shown["job_id"],
                    "old reader",
                    f"{when}: {self.old.version}'s jobs list shows {shown['job_id']} "
                    f"{shown['state']}: {shown.get('error')}",
                )

    def _once(self, job_id: str, kind: str, line: str) -> None:
        """A violation of a job's, said the first time it is seen (not at every restart)."""
        if (job_id, kind) not in self.seen:
            self.seen.add((job_id, kind))
            self.violation(line)

    def check_refusals(self, when: str) -> None:
        """While a daemon of the previous release lives: every command of a newer feature,
        and ``fleet finalize``, refused with exit 9 and its reason."""
        fleet, old = self.fleet, self.old
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

    def finalize(self, notes: list[str]) -> None:
        fleet, old = self.fleet, self.old
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
        if late.returncode != 9 or not lines:  # a release before 0.3 named the class first
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
        self.check_old_reader(notes)

    def check_old_reader(self, notes: list[str]) -> None:
        """A job submitted once the fleet is finalized keeps its run options typed in its
        handle: the previous release's command line refuses to read it (the job shown as
        needing a newer zkstore, naming the protocol), never shows it without them."""
        fleet, old, new = self.fleet, self.old, self.new
        # It runs until told to finish (as the long jobs do): its handle is there while both
        # command lines look, however fast this machine is (a finished job's is gone).
        typed = Job(TYPED_ID, self.work / "out" / TYPED_ID, new.name, spans_upgrade=False)
        forever = workload.UNTIL_STOPPED
        self._submit(
            new,
            typed,
            "squares",
            [str(typed.out), forever, str(STEP_DELAY)],
            "--conf",
            "spark.ui.enabled=false",
        )
        # the protocol of the feature the handle uses, which may be older than this code's
        wanted = f"fleet protocol {protocol.FEATURES[protocol.RUN_SPEC].protocol}"
        for command in (("jobs", "show", TYPED_ID), ("jobs", "list")):
            ran = fleet.run(old, *command, "--format", "json")
            said = " ".join(command)
            if ran.returncode != 0:
                self.violation(f"{old.version}'s {said}: exit {ran.returncode}: {ran.line()}")
                continue
            shown = json.loads(ran.stdout)
            found = [shown] if isinstance(shown, dict) else shown
            job = next((j for j in found if j.get("job_id") == TYPED_ID), None)
            if job is None:
                self.violation(f"{old.version}'s {said} does not show {TYPED_ID}")
            elif job.get("state") != NEEDS_UPGRADE or wanted not in str(job.get("error")):
                self.violation(
                    f"{old.version}'s {said} reads {TYPED_ID} (typed run options) as "
                    f"{job.get('state')}: {job.get('error')}, not {NEEDS_UPGRADE} naming {wanted}"
                )
            else:
                notes.append(f"{old.version}'s {said}: {TYPED_ID} {NEEDS_UPGRADE}")
                self.say(notes[-1])

    def finish(self, notes: list[str]) -> None:
        fleet, client = self.fleet, self.client
        resumed = fleet.run(self.new, "jobs", "resume", STOPPED_ID)
        if resumed.returncode != 0:
            self.violation(f"{self.new.version}'s jobs resume {STOPPED_ID}: {resumed.line()}")
        else:
            self._wait_steps(self.jobs[STOPPED_ID], 2, attempt=2)
            notes.append(
                f"{STOPPED_ID} resumed by {self.new.version}'s jobs resume (attempt 2 runs)"
            )
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
        notes.append(f"schedule: {counts.counts()}")
        self.say(f"schedule {NAME}: {counts.counts()}")

    def check_evidence(self, notes: list[str]) -> None:
        fleet = self.fleet
        found: list[str] = []
        for item in self.jobs.values():
            wanted = [1, 2] if item.job_id == STOPPED_ID else [1]
            found += checks.attempts_kept(item, wanted)
            found += checks.steps_once(item)
            found += checks.output_exact(item)
        found += checks.ran_after(self.jobs[AFTER_ID], self.jobs[DEPENDENCY_ID])
        runs = read_runs(self.work / "out" / "schedule", NAME)
        found += checks.runs_once(runs)
        replaced = checks.replaced(runs)
        if replaced:
            notes.append(f"re-placed before they ran (their daemon stopped): {', '.join(replaced)}")
            self.say(notes[-1])
        verify = fleet.run(self.new, "handles", "verify", "--format", "json")
        if verify.returncode != 0 or json.loads(verify.stdout)["problems"]:
            found.append(f"handles verify: {verify.stdout.strip()} {verify.line()}")
        cleanup = fleet.run(
            self.new, "handles", "cleanup", "--min-age", "0", "--writers-stopped", "--yes"
        )
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
