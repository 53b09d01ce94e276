"""The schedule scenario of every chaos run: a schedule firing every few seconds beside the jobs.

Each run creates ``tick`` (``--every 3s --catchup all``, its job the marker job
:func:`~zkstore_dev.chaos.schedule_checker.scheduled_run`) before its fault, so that every fault
(leader SIGKILLed or restarted, ZooKeeper leader killed, daemons restarted, ...) hits a leader that
fires windows. After the fault and the heal, :meth:`ScheduleProbe.check` waits until the leader
has decided every window up to a grace before now and their runs have started, then applies the
checker (:func:`~zkstore_dev.chaos.schedule_checker.check`, missed windows counted as violations
since nothing is ever too late to catch up with ``all``): every window in the span has exactly one
run, none ran twice, none before its time. After a fault that only restarted daemons, a window may
also be late by at most the session timeout and a second, and the longest time a restarted daemon
was gone, more than the run's quickest window (what starting a run costs on this machine now):
:meth:`~zkstore_dev.chaos.faults.Fault.window_bound`.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from recovery.client.api import Client
from zkstore.errors import ZkStoreError
from zkstore.jobs.definition import JobDefinition
from zkstore.records.strict import utc_moment
from zkstore.schedules.runs import run_id
from zkstore.schedules.schedule_records import ALL, ScheduleSpec
from zkstore.schedules.schedule_store import Schedule, ScheduleStore
from zkstore_dev.chaos.schedule_checker import (
    Verdict,
    check,
    expected_windows,
    read_runs,
    recorded,
    scheduled_run,
)

__all__ = ["EVERY", "NAME", "ScheduleProbe"]

NAME = "tick"
EVERY = 3


class ScheduleProbe:
    """The chaos run's schedule: created at the start, checked at the end."""

    def __init__(self, client: Client, out: Path, every: int = EVERY) -> None:
        self.client = client
        self.out = out
        self.every = every
        self.store = ScheduleStore.for_config(client.cluster.config, client.cluster.zk)
        self.created: datetime | None = None

    def start(self) -> None:
        definition = JobDefinition.for_function(
            NAME, scheduled_run, args=(str(self.out), 0.0), max_attempts=50
        )
        spec = ScheduleSpec(
            version=None, name=NAME, created=utc_moment(), every=self.every, catchup=ALL
        )
        schedule = self.store.create(spec, definition)
        self.created = schedule.spec.created

    def check(self, timeout: float, bound: float | None = None) -> tuple[list[str], Verdict]:
        """The violations, and the checker's counts. ``bound``: how much later than the
        quickest window any window's run may start (None: lateness is only counted)."""
        assert self.created is not None
        end = datetime.now(UTC) - timedelta(seconds=self.every)
        deadline = time.monotonic() + timeout
        schedule = self._read()
        while schedule is None or schedule.state.last is None or (schedule.state.last < end):
            if time.monotonic() > deadline:
                return [
                    f"schedule: windows up to {end} not decided within {timeout:g} s"
                ], Verdict()
            time.sleep(0.5)
            schedule = self._read()
        windows = expected_windows(schedule.spec.timing(), self.created, end)
        wanted = {run_id(NAME, window) for window in windows}
        while not wanted <= {run.job_id for run in read_runs(self.out, NAME)}:
            if time.monotonic() > deadline:
                break  # the checker names the windows without a run
            time.sleep(0.5)
        verdict = check(
            windows,
            read_runs(self.out, NAME),
            recorded(schedule.state.history, windows),
            bound=bound,
            missed_ok=False,
        )
        return [f"schedule: {v}" for v in verdict.violations], verdict

    def next_window(self) -> float:
        """When the schedule's next window comes (epoch seconds)."""
        schedule = self._read()
        assert schedule is not None, "the schedule is there while the run lasts"
        window = schedule.spec.timing().next_after(datetime.now(UTC))
        assert window is not None, "an --every schedule always has a next window"
        return window.timestamp()

    def stop(self) -> None:
        """Delete the schedule: a fire in flight fails its transaction (the spec is gone) and
        discards its payload; no fire follows."""
        self.store.delete(NAME)

    def _read(self) -> Schedule | None:
        try:
            return self.store.get(NAME)
        except ZkStoreError:
            return None
