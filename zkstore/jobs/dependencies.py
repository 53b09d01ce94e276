"""Dependencies between jobs: ``submit --after JOB[:STATE]``, and schedules' chained runs.

A job with dependencies stays PENDING, its status saying which job it waits for, until every
job it names has ended in the named state; it fails (result FAILED, the reason as its error) as
soon as one of them has ended otherwise. ``STATE`` is SUCCEEDED (the default), FAILED,
CANCELLED or ENDED (any of the three). ``--after`` is repeatable.

The dependencies travel in the job's definition handle, so that the leader decides without
reading a payload: the summary field ``after`` (``"etl-1:SUCCEEDED,load:ENDED"``, at most
:data:`MAX_AFTER_CHARS`). A schedule's run that chains after another schedule
(``--after-schedule``) depends on that schedule's run of the same window, SUCCEEDED; as that
run may be created after this one (the leader fires both at the same moment), its absence means
"wait" until its schedule has decided the window, and "failed" once it has without running it
(:attr:`Dependency.schedule`, built by :func:`zkstore.schedules.runs.chained`).

:func:`decide` is the pure verdict from what the store shows of the named jobs
(:class:`Seen`); the leader calls it for a PENDING job with dependencies before it places the
job (phase B), and records WAITING as the status's reason, FAILED as the job's result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from zkstore.errors import ConfigError, InvalidJobId
from zkstore.layout import validate_job_id
from zkstore.records.job_states import FAILED, OUTCOMES, SUCCEEDED
from zkstore.records.strict import optional_second_text

__all__ = [
    "AFTER",
    "AFTER_STATES",
    "ENDED",
    "MAX_AFTER",
    "MAX_AFTER_CHARS",
    "READY",
    "WAITING",
    "Dependency",
    "Seen",
    "Verdict",
    "check_after",
    "decide",
    "format_after",
    "parse_after",
    "parse_summary",
]

#: Any outcome satisfies it.
ENDED = "ENDED"
AFTER_STATES = (*OUTCOMES, ENDED)
#: The summary field that holds a job's dependencies.
AFTER = "after"
MAX_AFTER = 8
#: The handle is bounded (2 KB, with the longest ids and storage URL): dependencies get this.
MAX_AFTER_CHARS = 300

READY, WAITING = "READY", "WAITING"


@dataclass(frozen=True)
class Dependency:
    """Run only after ``job_id`` has ended in ``state``. ``schedule`` (with ``window``) marks a
    schedule's run the job waits for: absent until its schedule fires ``window``."""

    job_id: str
    state: str = SUCCEEDED
    schedule: str | None = None
    window: datetime | None = None

    def __post_init__(self) -> None:
        validate_job_id(self.job_id)
        if self.state not in AFTER_STATES:
            raise ConfigError(
                f"--after {self.job_id}:{self.state}: the state is one of {', '.join(AFTER_STATES)}"
            )

    def satisfied_by(self, outcome: str) -> bool:
        return self.state in (ENDED, outcome)

    def __str__(self) -> str:
        return f"{self.job_id}:{self.state}"


def parse_after(text: str) -> Dependency:
    """``--after JOB[:STATE]`` (the state in any case; default SUCCEEDED)."""
    job_id, sep, state = str(text).strip().partition(":")
    try:
        return Dependency(job_id, state.strip().upper() if sep else SUCCEEDED)
    except InvalidJobId as exc:
        raise ConfigError(f"--after {text!r}: {exc}") from None


def check_after(job_id: str, dependencies: Sequence[Dependency]) -> tuple[Dependency, ...]:
    """The dependencies of ``job_id`` as they will be stored: no job depends on itself, a job
    named twice is refused, at most :data:`MAX_AFTER` fitting :data:`MAX_AFTER_CHARS`."""
    seen: set[str] = set()
    for dependency in dependencies:
        if dependency.job_id == job_id:
            raise ConfigError(f"--after {dependency.job_id}: a job cannot wait for itself")
        if dependency.job_id in seen:
            raise ConfigError(f"--after {dependency.job_id}: named twice")
        seen.add(dependency.job_id)
    if len(dependencies) > MAX_AFTER:
        raise ConfigError(f"at most {MAX_AFTER} --after per job")
    if len(format_after(dependencies)) > MAX_AFTER_CHARS:
        raise ConfigError(f"the --after options take more than {MAX_AFTER_CHARS} characters")
    return tuple(dependencies)


def format_after(dependencies: Sequence[Dependency]) -> str:
    """The summary field ``after`` of ``dependencies`` (schedules' runs are not in it)."""
    return ",".join(str(d) for d in dependencies if d.schedule is None)


def parse_summary(text: object) -> tuple[Dependency, ...]:
    """The dependencies in a summary's ``after`` field; :class:`ValueError` for garbage (the
    caller quarantines the job: its definition handle is not what a writer writes)."""
    if text is None or text == "":
        return ()
    if not isinstance(text, str) or len(text) > MAX_AFTER_CHARS:
        raise ValueError("'after' is not a list of dependencies")
    found = []
    for item in text.split(","):
        job_id, sep, state = item.partition(":")
        if not sep:
            raise ValueError(f"'after' item {item!r:.60} has no state")
        try:
            found.append(Dependency(job_id, state))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    return tuple(found)


@dataclass(frozen=True)
class Seen:
    """What the store shows of a job a dependency names: ``outcome`` once it has a result;
    else ``present`` while it has not ended (current or quarantined, ``quarantined`` saying
    which). For a schedule's run that is absent: ``window_decided`` once its schedule has decided
    the window (fired, skipped or missed it), ``schedule_gone`` if the schedule is deleted."""

    present: bool = False
    outcome: str | None = None
    quarantined: bool = False
    window_decided: bool = False
    schedule_gone: bool = False
    #: what the schedule's history says of the window, once decided (``skipped: <why>``,
    #: ``missed``; None: no entry, the window is not one of the schedule's, or too old)
    window_fate: str | None = None
    #: the schedule, as its spec says now, has no window at that time: its run is never made
    no_such_window: bool = False


@dataclass(frozen=True)
class Verdict:
    """READY, WAITING (``reason``: for the status) or FAILED (``reason``: the job's error)."""

    state: str
    reason: str | None = None


def decide(dependencies: Sequence[Dependency], seen: Mapping[str, Seen]) -> Verdict:
    """The verdict on a job's ``dependencies`` from what ``seen`` shows of each named job (a job
    missing from ``seen`` is absent from the store). A failure wins over a wait: the job fails
    as soon as one dependency can no longer be met."""
    waits: list[str] = []
    for dependency in dependencies:
        found = seen.get(dependency.job_id, Seen())
        name = f"job {dependency.job_id}"
        wanted = "end" if dependency.state == ENDED else f"end {dependency.state}"
        if found.outcome is not None:
            if not dependency.satisfied_by(found.outcome):
                required = (
                    "succeeded" if dependency.state == SUCCEEDED else f"ended {dependency.state}"
                )
                return Verdict(
                    FAILED, f"{name} ended {found.outcome}; this job runs only after it {required}"
                )
        elif found.quarantined:
            waits.append(
                f"waiting for {name} to {wanted}: it is in quarantine (zkstore quarantine "
                f"release {dependency.job_id} runs it again; zkstore quarantine purge "
                f"{dependency.job_id} --yes ends it FAILED, and this job with it unless it "
                "waits for any end)"
            )
        elif found.present:
            waits.append(f"waiting for {name} to {wanted}")
        elif dependency.schedule is not None:
            schedule = f"schedule {dependency.schedule}"
            window = optional_second_text(dependency.window)
            if found.schedule_gone:
                return Verdict(FAILED, f"{schedule} was deleted before its run {name} was made")
            if found.no_such_window:
                return Verdict(
                    FAILED,
                    f"{schedule} has no window at {window}: its run {name} is never "
                    f"made (zkstore schedules show {dependency.schedule} says when it fires)",
                )
            if found.window_decided:
                if found.window_fate is not None:
                    return Verdict(
                        FAILED,
                        f"{schedule} did not run its window {window} ({found.window_fate})",
                    )
                return Verdict(
                    FAILED,
                    f"{schedule} has no window at {window} in its history: its "
                    "windows fall at other times (two --every schedules chained with "
                    "--after-schedule need windows at the same times: the same --start-at, or "
                    "a --cron for both)",
                )
            waits.append(f"waiting for {schedule} to fire its window {window}")
        else:
            return Verdict(
                FAILED,
                f"no {name} (never submitted, or its result was deleted after its retention): "
                "whether it ended as required is unknown",
            )
    if waits:
        more = f" (and {len(waits) - 1} more)" if len(waits) > 1 else ""
        return Verdict(WAITING, waits[0] + more)
    return Verdict(READY)
