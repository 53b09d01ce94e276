"""What the upgrade test checks from the evidence the jobs left (pure, but for reading it).

Each check returns its violations, one line each (none: it held). The jobs' markers are the
chaos job's (:mod:`zkstore_dev.chaos.job`): an ``attempt-<n>.json`` per attempt, a
``progress.log`` line per step, ``output.json`` with the steps and the total at the end.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zkstore_dev.chaos import job
from zkstore_dev.chaos.schedule_checker import Run

__all__ = [
    "Job",
    "attempts_kept",
    "output_exact",
    "ran_after",
    "replaced",
    "runs_once",
    "steps_once",
]


@dataclass(frozen=True)
class Job:
    """A job of the workload: where its evidence is and what it must show."""

    job_id: str
    out: Path
    #: the release whose command line submitted it
    by: str
    #: its steps, or None: it runs until its ``stop`` file appears
    steps: int | None = None
    #: runs across the whole upgrade: must stay on its first attempt
    spans_upgrade: bool = True
    #: the total of ``n`` steps (the chaos job's, or the Spark job's)
    total: Callable[[int], int] = job.expected_total


def attempts_kept(item: Job, wanted: list[int]) -> list[str]:
    """The job ran exactly the attempts ``wanted``, none two at a time."""
    found = job.attempts(item.out)
    problems = []
    numbers = [a.attempt for a in found]
    if numbers != wanted:
        problems.append(
            f"{item.job_id}: attempts {numbers or 'none'}, not {wanted}"
            + (" (an upgrade restarted it)" if wanted == [1] and len(numbers) > 1 else "")
        )
    for first, second in job.overlaps(found):
        problems.append(
            f"{item.job_id}: attempts {first.attempt} (pid {first.pid}) and {second.attempt} "
            f"(pid {second.pid}) were alive at the same time"
        )
    return problems


def steps_once(item: Job) -> list[str]:
    """No step was done twice (a resumed attempt starts after its newest checkpoint)."""
    seen: dict[int, int] = {}
    problems = []
    for attempt, step in _progress(item.out):
        if step in seen:
            problems.append(
                f"{item.job_id}: step {step} done by attempt {seen[step]} and again by {attempt}"
            )
        seen[step] = attempt
    return problems


def output_exact(item: Job) -> list[str]:
    """``output.json`` holds the exact total of its steps (of ``item.steps`` if fixed), and
    no step the job logged is past them."""
    result = job.output(item.out)
    if result is None:
        return [f"{item.job_id}: no output"]
    steps, total = int(result["steps"]), int(result["total"])
    problems = []
    if item.steps is not None and steps != item.steps:
        problems.append(f"{item.job_id}: ran {steps} steps, not {item.steps}")
    if total != item.total(steps):
        problems.append(f"{item.job_id}: total {total} is not {item.total(steps)} ({steps} steps)")
    logged = max((step for _, step in _progress(item.out)), default=0)
    if logged > steps:
        problems.append(f"{item.job_id}: logged step {logged} past its output's {steps}")
    return problems


def ran_after(item: Job, dependency: Job) -> list[str]:
    """``item``'s first attempt started after ``dependency``'s last attempt ended."""
    mine, theirs = job.attempts(item.out), _ends(dependency.out)
    if not mine or not theirs:
        return [f"{item.job_id}: cannot tell whether it ran after {dependency.job_id}"]
    if mine[0].start <= max(theirs):
        return [
            f"{item.job_id} started {max(theirs) - mine[0].start:.1f} s before "
            f"{dependency.job_id} ended"
        ]
    return []


def runs_once(runs: list[Run]) -> list[str]:
    """Every run of the schedule ran its code once: a run with two attempts' markers was
    restarted. (One marker of a later attempt is not a restart: that run's first attempt was
    placed on a daemon that stopped before its driver ran anything, and was re-placed, counted
    lost; :func:`replaced` lists them.)"""
    return [
        f"schedule run {run.job_id}: ran as attempts {[a.attempt for a in run.attempts]}"
        for run in runs
        if len(run.attempts) > 1
    ]


def replaced(runs: list[Run]) -> list[str]:
    """The runs whose code ran once, on a later attempt than the first."""
    return [
        f"{run.job_id} (attempt {run.attempts[0].attempt})"
        for run in runs
        if len(run.attempts) == 1 and run.attempts[0].attempt != 1
    ]


def _progress(out: Path) -> list[tuple[int, int]]:
    try:
        lines = (out / job.PROGRESS).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [(int(f[0]), int(f[1])) for f in (line.split() for line in lines) if len(f) == 3]


def _ends(out: Path) -> list[float]:
    """When each finished attempt of the job in ``out`` ended (its marker's ``end``)."""
    ends = []
    for path in out.glob("attempt-*.json"):
        data = json.loads(path.read_text())
        if "end" in data:
            ends.append(float(data["end"]))
    return ends
