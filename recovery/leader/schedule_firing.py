"""The leader fires schedules: every window once, at its time, on the leader's loop thread.

On takeover the leader fires every schedule once (the windows that passed while nobody led are
decided there, per the schedule's ``--catchup``); after that, one timer is armed for the
earliest next window over all schedules, and a watch on ``R/schedules`` fires a pass at once
when a schedule is created or deleted, a watch on each schedule's spec when it is changed
(``schedules update``, ``pause``, ``resume``: the timer may be set for a window the change
moved). A pass calls :meth:`~zkstore.schedules.fire.Firer.fire` for each schedule with the
leadership's fence: each window's run, its state and its history entry are one fenced
transaction, so a deposed leader creates nothing and a new leader never makes a second run of a
window (a crash at any line leaves each window decided once or not at all).

A pass fires at most the leadership's budget of windows (``--schedule-fire-budget``, shared by
every schedule, taken in turn from where the last pass stopped) and gives way, after any fire,
once anything else waits on the loop: a schedule's backlog (a ``--catchup all``, a long
outage) is worked off over several passes, a moment apart, with the placements and results of
every other job handled between them (invariant 15). A schedule whose windows are closer than
the cluster's minimum (``--schedule-min-interval``) is not fired at all, and said so at ERROR.

One schedule never blocks the others (invariant 6): each is fired under its own guard. Losing
leadership stops the pass (:class:`~zkstore.errors.NotLeader` is raised); an outage ends the pass
and a retry is timed; a schedule whose records or definition cannot be read is logged (at ERROR,
once a minute at most) and looked at again later; a definition written by another Python is left
to a leader that can read it.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Callable

from recovery.leader.loop import Event
from recovery.leader.role import LeaderRole
from zkstore.conditions import CANNOT_FIRE, SCHEDULE, Condition, ConditionStore
from zkstore.errors import (
    CorruptRecord,
    ForeignPython,
    HandleNotFound,
    NotLeader,
    OutcomeUnknown,
    OutOfBounds,
    PayloadError,
    StoreUnavailable,
    ZkStoreError,
)
from zkstore.protocol import CLUSTER_SETTINGS
from zkstore.records.strict import utc_moment
from zkstore.schedules.fire import Firer, FireReport
from zkstore.schedules.schedule_store import ScheduleStore
from zkstore.zookeeper.throttle import Throttle
from zkstore.zookeeper.watch import NodeWatch

__all__ = ["BACKLOG_PAUSE", "BROKEN_RETRY", "RETRY", "SCHEDULES", "ScheduleFiring"]

logger = logging.getLogger(__name__)

#: the event of a pass; its data is the leadership that scheduled it
SCHEDULES = "schedules"
#: a schedule that could not be fired (an outage, a lost answer) is tried again this soon
RETRY = 1.0
#: a schedule whose records or definition are unreadable is looked at again this often
BROKEN_RETRY = 30.0
#: a pass that left a backlog (its budget spent, or other work waiting) is followed by another
#: this soon: a timer, so that the loop serves every event that came meanwhile first
BACKLOG_PAUSE = 0.05


def _reason(exc: Exception) -> str:
    """The condition's reason for what stops a schedule from firing."""
    if isinstance(exc, OutOfBounds):
        return "UnderMinimumInterval"
    if isinstance(exc, PayloadError):
        return "UnreadableDefinition"
    return "UnreadableRecord"


class ScheduleFiring:
    """The schedule passes of one leadership."""

    def __init__(self, leader: LeaderRole, on_fired: Callable[[str], None]) -> None:
        self.leader = leader
        self._on_fired = on_fired
        cluster = leader.cluster
        bounds = leader.settings.bounds
        self.store = ScheduleStore.for_config(
            cluster.config, cluster.zk, instance_id=cluster.instance_id, on_step=cluster.step
        )
        self.firer = Firer.for_cluster(
            cluster, self.store, min_interval=bounds.schedule_min_interval
        )
        #: windows one pass fires at most, over every schedule
        self.budget = bounds.schedule_fire_budget
        #: the schedule the last pass stopped after: the next pass begins with the one after it
        self._cursor = ""
        self._watch: NodeWatch | None = None
        #: a data watch on each schedule's spec (made by the passes, on the loop thread)
        self._specs: dict[str, NodeWatch] = {}
        self._throttle = Throttle(logger)
        #: the monotonic time the pending timer is set for (None: none pending)
        self._timer: float | None = None
        self.conditions = ConditionStore(cluster.zk, cluster.layout)
        #: the schedules whose conditions this leadership has looked at, and those it said
        #: cannot fire
        self._conditions_seen: set[str] = set()
        self._held: set[str] = set()

    def start(self) -> None:
        """Watch the schedules: the watch's first report is a pass on the loop, which fires
        every schedule's windows due at the takeover (``--catchup`` decides the late ones)."""
        zk = self.leader.cluster.zk
        self._watch = NodeWatch(zk, self.store.layout.schedules, self._changed, children=True)

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()
        for watch in self._specs.values():
            watch.stop()
        self._specs.clear()

    def _watch_specs(self, names: list[str]) -> None:
        """A watch on each schedule's spec, whose changes post a pass (loop thread; not its
        first read: this pass reads the spec anyway). A watch that cannot be set now is set
        by a later pass."""
        for gone in set(self._specs) - set(names):
            self._specs.pop(gone).stop()
        for name in names:
            if name in self._specs:
                continue
            try:
                self._specs[name] = NodeWatch(
                    self.leader.cluster.zk,
                    self.store.layout.schedule(name),
                    self._changed,
                    report_first=False,
                )
            except StoreUnavailable:
                return

    def _changed(self, _: object) -> None:
        """Kazoo's thread: a schedule was created, changed or deleted; a pass on the loop."""
        self.leader.loop.post(Event(SCHEDULES, data=self.leader))

    def run_pass(self) -> None:
        """Fire the schedules' due windows within the pass's budget (loop thread), then arm the
        timer: for the next window, or at once (a timer, after the events waiting) for a
        backlog left."""
        if not self.leader.active:
            return
        self._timer = None
        soonest: float | None = None
        budget, backlog = self.budget, False
        names = self.store.names()
        self._watch_specs(names)
        for name in self._in_turn(names):
            if not self.leader.active:
                return
            if budget <= 0 or (budget < self.budget and self.leader.loop.has_events()):
                backlog = True  # the others' turn comes first in the next pass
                break
            self._cursor = name
            wait, report = self._fire(name, budget)
            if report is not None:
                budget -= len(report.fired)
                backlog = backlog or report.more
            if wait is not None:
                soonest = wait if soonest is None else min(soonest, wait)
        if backlog:
            soonest = BACKLOG_PAUSE
        if soonest is not None:
            self._arm(time.monotonic() + soonest)

    def _in_turn(self, names: list[str]) -> list[str]:
        """The schedules from the one after where the last pass stopped, round the circle."""
        ordered = sorted(names)
        cut = bisect.bisect_right(ordered, self._cursor)
        return ordered[cut:] + ordered[:cut]

    def _fire(self, name: str, budget: int) -> tuple[float | None, FireReport | None]:
        """Fire one schedule under its guard, at most ``budget`` windows due by ZooKeeper's
        time (a host's clock off is no window off); seconds until it needs a pass again (None:
        never, it has no next window), and what it did."""
        try:
            now = self.leader.clock.now()
            report = self.firer.fire(
                name,
                self.leader.fence,
                now=now,
                limit=budget,
                give_way=self.leader.loop.has_events,
            )
        except NotLeader:
            raise
        except StoreUnavailable:
            self._arm(time.monotonic() + RETRY)
            raise
        except OutcomeUnknown as exc:
            logger.warning(
                "schedule %s: a fire's outcome is unknown (%s); again in %g s", name, exc, RETRY
            )
            return RETRY, None
        except HandleNotFound:
            return None, None  # deleted meanwhile
        except ForeignPython as exc:
            self._throttle.log(
                name,
                logging.ERROR,
                "schedule %s: its definition was written by another Python (%s); a leader "
                "that can read it will fire its windows",
                name,
                exc,
            )
            self._cannot_fire(name, "ForeignPython", f"its definition was written by {exc}")
            return BROKEN_RETRY, None
        except (CorruptRecord, PayloadError, OutOfBounds) as exc:
            self._throttle.log(name, logging.ERROR, "schedule %s: cannot fire: %s", name, exc)
            self._cannot_fire(name, _reason(exc), str(exc))
            return BROKEN_RETRY, None
        # The guard of invariant 6: anything unforeseen is this schedule's problem only.
        except Exception:
            logger.exception("schedule %s: firing failed", name)
            return BROKEN_RETRY, None
        self._throttle.clear(name)
        self._fires_again(name)
        self._started(report)
        if report.next is None:
            return None, report
        return max(0.0, (report.next - now).total_seconds()), report

    def _cannot_fire(self, name: str, reason: str, message: str) -> None:
        """Say on the schedule why the leader fires none of its windows (a condition, fenced);
        only once the fleet reads conditions."""
        if not self.leader.protocol.allows(CLUSTER_SETTINGS):
            return
        condition = Condition(CANNOT_FIRE, reason, f"cannot fire: {message}", utc_moment())
        self._conditions_seen.add(name)
        if self._guarded_conditions(
            name, lambda: self.conditions.hold(SCHEDULE, name, condition, fence=self.leader.fence)
        ):
            self.leader.conditions.raised[CANNOT_FIRE] += 1
        self._held.add(name)

    def _fires_again(self, name: str) -> None:
        """The schedule fires: a condition that said it did not is cleared (read once per
        leadership for a schedule this leadership has not seen yet)."""
        if name in self._conditions_seen and name not in self._held:
            return
        if not self.leader.protocol.allows(CLUSTER_SETTINGS):
            return
        self._conditions_seen.add(name)
        self._held.discard(name)
        self._guarded_conditions(
            name,
            lambda: self.conditions.clear(SCHEDULE, name, [CANNOT_FIRE], fence=self.leader.fence),
        )

    def _guarded_conditions(self, name: str, change: Callable[[], bool]) -> bool:
        """Write a schedule's condition; an outage or a lost leadership raises, anything else
        is logged (the condition is looked at again at the schedule's next pass)."""
        try:
            return change()
        except (NotLeader, StoreUnavailable):
            raise
        except ZkStoreError as exc:
            logger.warning("schedule %s: its conditions are not written (%s)", name, exc)
            return False

    def _started(self, report: FireReport) -> None:
        """Look at the new runs (and the jobs chained after them) at once, not only when the
        watch on currentJobs says so."""
        for _, job in report.fired:
            self._on_fired(job)

    def _arm(self, when: float) -> None:
        """One timer at a time: keep the earlier of the pending one and ``when``."""
        if self._timer is not None and self._timer <= when:
            return
        self._timer = when
        self.leader.loop.post_at(when, Event(SCHEDULES, data=self.leader))
