"""How a member ends a driver the leader ended: SIGTERM, a grace period, SIGKILL of its group.

A pure state machine; the member runs it for each ``end`` request of an attempt it launched or
adopted, calling :func:`step` whenever it looks (on the request, on the driver's exit, and at
the time the last step asked for) and doing what it returns:

1. :class:`SendTerm`: SIGTERM to the driver process alone, so that it can stop its Spark
   application and exit cleanly (its job is interrupted as by a cancel);
2. :class:`WaitUntil`: the grace period runs (from the leader's request, so a member restarted
   midway does not grant a second grace; at least :data:`MIN_GRACE` after its own SIGTERM);
3. :class:`KillGroup`: SIGKILL to the driver's whole process group (it is the leader of its own
   session, so the group is its Spark JVM and Python workers too), repeated every
   :data:`KILL_REPEAT` while anything of it lives; also at once when the driver is gone but its
   group is not (an orphaned JVM);
4. :class:`KnownDead`: neither the driver nor anything of its group is alive: record the exit
   (the assignment's ``exited``), after which the leader moves the job on (dagster #15325: a run
   marked failed but never killed). Never returned while anything lives.
5. :class:`Unkillable`: still alive :data:`UNKILLABLE_AFTER` seconds after the first SIGKILL
   (a process in uninterruptible sleep): log at ERROR once; the job does not move on.

The member carries it out (:mod:`recovery.member.ender`): it signals the group by the driver's
pid, which stays the group's id (and cannot be handed to a new group) while any process of the
group lives, the driver's zombie included.

Times are seconds on the wall clock (the request's time comes from the leader's clock); a
request time in the future counts as now.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "KILL_REPEAT",
    "MIN_GRACE",
    "UNKILLABLE_AFTER",
    "Action",
    "Ending",
    "KillGroup",
    "KnownDead",
    "SendTerm",
    "Unkillable",
    "WaitUntil",
    "kill_due",
    "start",
    "step",
]

#: The least time between our SIGTERM and SIGKILL, even when the leader's grace has passed
#: already (a member restarted long after the request): a moment to exit cleanly.
MIN_GRACE = 1.0
#: SIGKILL again this often while anything of the group lives (it may have forked meanwhile).
KILL_REPEAT = 1.0
#: Alive this long after the first SIGKILL: something no signal reaches (reported once).
UNKILLABLE_AFTER = 30.0


@dataclass(frozen=True)
class Ending:
    """The member's progress in ending ``attempt``'s driver: when the end was requested, the
    grace, and what it has sent."""

    attempt: int
    requested: float
    grace: float
    term_sent: float | None = None
    first_kill: float | None = None
    last_kill: float | None = None
    reported: bool = False


@dataclass(frozen=True)
class SendTerm:
    """Send SIGTERM to the driver process (not its group)."""


@dataclass(frozen=True)
class KillGroup:
    """Send SIGKILL to the driver's process group."""


@dataclass(frozen=True)
class WaitUntil:
    """Look again at ``at`` (or at the driver's exit, whichever comes first)."""

    at: float


@dataclass(frozen=True)
class KnownDead:
    """Nothing of the driver lives: record its exit."""


@dataclass(frozen=True)
class Unkillable:
    """Still alive long after SIGKILL: say so once, at ERROR, and keep waiting."""

    since: float


Action = SendTerm | KillGroup | WaitUntil | KnownDead | Unkillable


def start(attempt: int, requested: float, grace: float, now: float) -> Ending:
    """A new ending for an ``end`` request made at ``requested`` (clamped to ``now``)."""
    return Ending(attempt=attempt, requested=min(requested, now), grace=max(0.0, grace))


def kill_due(ending: Ending) -> float | None:
    """When SIGKILL is due (None until SIGTERM was sent)."""
    if ending.term_sent is None:
        return None
    return max(ending.requested + ending.grace, ending.term_sent + MIN_GRACE)


def step(
    ending: Ending, now: float, *, driver_alive: bool, group_alive: bool
) -> tuple[Ending, list[Action]]:
    """What to do now, and the ending with it done. ``group_alive``: any process of the
    driver's group lives (the driver included, if it does)."""
    if not driver_alive and not group_alive:
        return ending, [KnownDead()]
    actions: list[Action] = []
    if driver_alive and ending.term_sent is None:
        ending = replace(ending, term_sent=now)
        actions.append(SendTerm())
    due = kill_due(ending)
    if driver_alive and due is not None and now < due:
        return ending, [*actions, WaitUntil(due)]
    # Grace over, or the driver is gone and something of its group is left: SIGKILL the group.
    first, last = ending.first_kill, ending.last_kill
    if first is None or last is None or now - last >= KILL_REPEAT:
        first, last = (now if first is None else first), now
        ending = replace(ending, first_kill=first, last_kill=last)
        actions.append(KillGroup())
    if not ending.reported and now - first >= UNKILLABLE_AFTER:
        ending = replace(ending, reported=True)
        actions.append(Unkillable(since=first))
    actions.append(WaitUntil(last + KILL_REPEAT))
    return ending, actions
