"""The chaos job and the evidence it leaves: attempt markers and an exact output.

Every step is also appended to ``progress.log`` (attempt, step, time): the longest stall of a
job's progress across a fault is the time it took the cluster to recover from it.

Each attempt writes ``attempt-<n>.json`` under the job's output directory: its pid, when it
started, and ``last``, refreshed at every step (so a SIGKILLed attempt is known to have been
alive until at least then). Two attempts of one job whose ``[start, last]`` intervals overlap were
alive at the same moment: a violation of "at most one live attempt".

The job adds ``step * step`` for steps 1..N, carrying the running sum in its checkpoints, and
writes the total to ``output.json`` at the end: a lost, repeated or stale checkpoint shows as a
wrong total. With ``steps=None`` it runs until a ``stop`` file appears in its directory.

With ``checkpoint_every`` N > 1 it checkpoints every N steps only and says it makes progress
(``ctx.heartbeat()``) at every step: submitted with a progress timeout, its driver writes
heartbeats between the checkpoints, from the thread that also watches its session.

With a ``ledger`` (an fsspec URL and its storage options), each attempt also writes to storage
as it works, from a thread ZooKeeper never blocks, for as long as it lives
(:mod:`~zkstore_dev.chaos.ledger`): the evidence of a zombie write, in storage's own order.

With ``outputs``, each step also stages a part (``step-<n>.json``: the step and its square) in
the output :data:`STEPS` and commits the parts staged since the last checkpoint with the next
one (``ctx.checkpoint(state, commit=...)``): the checker reads the output's manifest and wants
every step committed exactly once (:func:`committed_once`), whatever the faults did.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zkstore_dev.chaos.ledger import LOG as LEDGER_LOG
from zkstore_dev.chaos.ledger import Ledger, LedgerWriter

__all__ = [
    "OUTPUT",
    "PROGRESS",
    "STEPS",
    "STOP",
    "Attempt",
    "attempts",
    "back_after",
    "committed_once",
    "expected_total",
    "longest_stall",
    "output",
    "overlaps",
    "progress",
    "progress_times",
    "sum_of_squares",
]

OUTPUT = "output.json"
PROGRESS = "progress.log"
STOP = "stop"
#: The output the chaos job commits a part per step to (with ``outputs``).
STEPS = "steps"


def expected_total(steps: int) -> int:
    return sum(step * step for step in range(1, steps + 1))


def _write(path: Path, data: dict[str, Any]) -> None:
    """Atomically (temp file + rename): the checker may read at any moment."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps(data))
    temporary.replace(path)


def sum_of_squares(
    ctx: Any,
    out: str,
    steps: int | None,
    delay: float,
    ledger: tuple[str, dict[str, Any]] | None = None,
    checkpoint_every: int = 1,
    outputs: bool = False,
) -> None:
    """The chaos job: resumable from its latest checkpoint; see the module docstring."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    writer = None
    if ledger is not None:
        url, options = ledger
        writer = LedgerWriter(
            Ledger(url, options), ctx.attempt, max(delay, 0.25), folder / LEDGER_LOG
        ).start()
    try:
        _steps(ctx, folder, steps, delay, checkpoint_every, outputs)
    finally:
        if writer is not None:
            writer.stop()


def _steps(
    ctx: Any, folder: Path, steps: int | None, delay: float, checkpoint_every: int, outputs: bool
) -> None:
    checkpoint = ctx.latest_checkpoint() or {"step": 0, "total": 0}
    staging = ctx.outputs.stage(STEPS) if outputs else None
    staged: list[str] = []  # the parts staged since the last checkpoint
    step, total = int(checkpoint["step"]), int(checkpoint["total"])
    marker = folder / f"attempt-{ctx.attempt}.json"
    record = {"attempt": ctx.attempt, "pid": os.getpid(), "start": time.time(), "from": step}
    record["last"] = record["start"]
    _write(marker, record)
    while (step < steps) if steps is not None else not (folder / STOP).exists():
        time.sleep(delay)
        step += 1
        total += step * step
        if staging is not None:
            staged.append(_stage(ctx, staging, step))
        if step % checkpoint_every == 0 or step == steps:
            _checkpoint(ctx, {"step": step, "total": total}, staged)
        else:
            ctx.heartbeat()
        record["last"] = time.time()
        record["step"] = step
        _write(marker, record)
        with open(folder / PROGRESS, "a") as log:  # one short line per write: appends stay whole
            log.write(f"{ctx.attempt} {step} {record['last']:.3f}\n")
    if staged:  # stopped between checkpoints: its last steps are committed too
        _checkpoint(ctx, {"step": step, "total": total}, staged)
    _write(folder / OUTPUT, {"steps": step, "total": total, "attempt": ctx.attempt})
    record["end"] = record["last"] = time.time()
    _write(marker, record)


def _stage(ctx: Any, staging: str, step: int) -> str:
    part = f"{staging}/step-{step}.json"
    with ctx.outputs.open(part) as file:
        file.write(json.dumps({"step": step, "square": step * step}).encode())
    return part


def _checkpoint(ctx: Any, state: dict[str, int], staged: list[str]) -> None:
    if staged:
        ctx.checkpoint(state, commit={STEPS: list(staged)})
        staged.clear()
    else:
        ctx.checkpoint(state)


def committed_once(parts: Sequence[tuple[str, bytes]], steps: int) -> list[str]:
    """What is wrong with an output of the chaos job that ran ``steps`` steps, given its
    committed parts ((path, content), in the manifest's order): each of the steps
    ``1..steps`` committed exactly once, holding its own square; nothing else."""
    problems = []
    found: dict[int, list[str]] = {}
    for path, content in parts:
        name = path.rsplit("/", 1)[-1]
        try:
            step = int(name.removeprefix("step-").removesuffix(".json"))
            data = json.loads(content)
        except ValueError:
            problems.append(f"committed part {path} is not a step's")
            continue
        if data != {"step": step, "square": step * step}:
            problems.append(f"committed part {path} holds {data}, not step {step}'s")
        found.setdefault(step, []).append(path)
    twice = {step: paths for step, paths in found.items() if len(paths) > 1}
    for step, paths in sorted(twice.items()):
        problems.append(f"step {step} committed {len(paths)} times: {', '.join(paths)}")
    missing = sorted(set(range(1, steps + 1)) - set(found))
    if missing:
        problems.append(f"steps {missing[:20]} never committed (of 1..{steps})")
    extra = sorted(set(found) - set(range(1, steps + 1)))
    if extra:
        problems.append(f"steps {extra[:20]} committed, beyond the {steps} the job ran")
    return problems


@dataclass(frozen=True)
class Attempt:
    """What one attempt's marker says."""

    attempt: int
    pid: int
    start: float
    last: float
    step: int

    @classmethod
    def read(cls, path: Path) -> Attempt:
        data = json.loads(path.read_text())
        return cls(data["attempt"], data["pid"], data["start"], data["last"], data.get("step", 0))


def attempts(out: str | Path) -> list[Attempt]:
    return sorted(
        (Attempt.read(p) for p in Path(out).glob("attempt-*.json")), key=lambda a: a.attempt
    )


def overlaps(found: list[Attempt]) -> list[tuple[Attempt, Attempt]]:
    """Pairs of attempts that were both alive at some moment."""
    return [
        (a, b)
        for i, a in enumerate(found)
        for b in found[i + 1 :]
        if a.start < b.last and b.start < a.last
    ]


def output(out: str | Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((Path(out) / OUTPUT).read_text())
    except FileNotFoundError:
        return None
    return data


def progress_times(out: str | Path) -> list[float]:
    """When the job made each of its steps, in order (every attempt)."""
    try:
        lines = (Path(out) / PROGRESS).read_text().splitlines()
    except FileNotFoundError:
        return []
    return sorted(float(line.split()[2]) for line in lines if len(line.split()) == 3)


def progress(out: str | Path) -> list[tuple[int, float]]:
    """(attempt, time) of each step the job made, in the order of time."""
    try:
        lines = (Path(out) / PROGRESS).read_text().splitlines()
    except FileNotFoundError:
        return []
    found = [(int(w[0]), float(w[2])) for w in (line.split() for line in lines) if len(w) == 3]
    return sorted(found, key=lambda step: step[1])


def back_after(steps: list[tuple[int, float]], start: float) -> float | None:
    """Seconds from ``start`` to the first step of an attempt newer than every attempt that
    stepped before it (the job running again after a fault that stopped its attempt), or
    None if no newer attempt stepped."""
    before = max((attempt for attempt, at in steps if at < start), default=0)
    after = [at for attempt, at in steps if attempt > before and at >= start]
    return min(after) - start if after else None


def longest_stall(times: list[float], start: float, end: float) -> float:
    """The longest time without progress that overlaps the window ``[start, end]``."""
    gaps = [
        later - earlier
        for earlier, later in itertools.pairwise(times)
        if later >= start and earlier <= end
    ]
    return max(gaps, default=0.0)
