"""The upgrade test's phases, its checks and its table: ``python -m zkstore_dev.upgrade``.

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
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from recovery.client.api import Client
from zkstore import __version__, protocol
from zkstore_dev.upgrade.mixed import (
    STOP_DEADLINE,
    MixedFleet,
    Restart,
    Side,
    new_side,
    wait_until,
)
from zkstore_dev.upgrade.previous import Build, build, find_previous, release_at
from zkstore_dev.upgrade.scenario import Scenario

__all__ = ["Phase", "UpgradeTest", "main", "repository"]

logger = logging.getLogger(__name__)


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
        self.built: Build | None = None
        self.new = new_side()
        self.began = time.monotonic()

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
        width = [max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)]
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
        scenario = Scenario(
            self.fleet, self.client, self.built, self.work, self.say, self.violation
        )
        with self.phase("workload") as notes:
            scenario.submit_workload(notes)
            scenario.check_refusals("a fleet of the previous release")
            notes.append(scenario.refusals())
        for name, side in (
            (f"upgrade to {self.new.version}", self.new),
            (f"downgrade to {old.version}", old),
            (f"upgrade to {self.new.version} again", self.new),
        ):
            with self.phase(name) as notes:
                notes.append(self._restarts(self.fleet.roll(side, scenario.after_restart)))
                if scenario.refused:
                    notes.append(scenario.refusals())
        with self.phase("finalize") as notes:
            scenario.finalize(notes)
        with self.phase("finish") as notes:
            scenario.finish(notes)
        with self.phase("checks") as notes:
            scenario.check_evidence(notes)

    def _fleet_line(self) -> str:
        assert self.fleet is not None
        status = self.fleet.fleet_status()
        daemons = ", ".join(
            f"{d['daemon_id']} {d['release']} (protocol {d['protocol']})"
            for d in status["daemons"]  # type: ignore[attr-defined]
        )
        return f"fleet protocol {status['protocol']}: {daemons}"

    def _restarts(self, done: list[Restart]) -> str:
        return ", ".join(
            f"{r.daemon_id}{' (leader)' if r.was_leader else ''} {r.seconds:.0f} s" for r in done
        )

    # -- the workload ----------------------------------------------------------------------------

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
    root = Path(__file__).resolve().parents[2]
    if not (root / "CHANGELOG.md").is_file():
        raise SystemExit(f"no CHANGELOG.md in {root}: run the upgrade test from a checkout")
    return root


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zkstore_dev.upgrade", description=__doc__)
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
