"""A throttled copy you can change while it runs: lines from an input file to output files, at a
rate set with ``zkstore control``, checkpointed so that a new attempt resumes.

Submit it (a daemon must be running)::

    python examples/throttle.py generate /tmp/throttle/input.txt 40000
    zkstore submit examples/throttle.py:run --job-id copy \
                   -- /tmp/throttle/input.txt /tmp/throttle/out
    zkstore control set copy rate=2000 --wait        # lines per second, applied at once
    zkstore control set copy rate=-5 --wait          # rejected by the job, with its reason
    zkstore control set copy batch=500 --wait        # needs a restart: the next attempt takes it
    zkstore control pause copy --wait                # blocks after its next batch
    zkstore control resume copy
    zkstore control get copy

It declares its keys (``rate`` float, ``batch`` int, ``upper`` bool), so ``control set`` refuses
anything else before it is stored. ``out/summary.json`` says how many lines were copied and under
which control versions; ``cat out/part-*.txt`` is the input, each line once.

Why each line once, whatever fails: the output is keyed by checkpointed offsets, not by batches.
Lines go to ``part-<offset>.txt``, one file per checkpoint interval, named by the offset of the
checkpoint it starts from; the file is synced and closed before the next checkpoint is taken. A
new attempt resumes at the latest checkpoint's offset and rewrites that interval's file from the
start, so whatever an attempt wrote after its last checkpoint is overwritten, never added to,
even when the batch size changed in between (``batch`` needs a restart: the old attempt's batches
and the new one's do not line up).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_RATE = 500.0
DEFAULT_BATCH = 200
CHECKPOINT_EVERY = 10  # batches; and whenever a checkpoint is requested


def generate(path: str, lines: int) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(f"line {i:07d} of the input\n" for i in range(lines)))


def check(change: Any) -> None:
    """Decide on each change before it takes effect (runs on the driver's control thread)."""
    rate = change.new.get("rate")
    if "rate" in change.keys and rate is not None and not 0 < rate <= 100_000:
        change.reject("rate", f"{rate} is not a rate: lines per second, in (0, 100000]")


def run(ctx: Any, source: str, target: str) -> None:
    ctx.declare_config({"rate": float, "batch": int, "upper": bool}, needs_restart=["batch"])
    ctx.on_config_change(check)
    lines = Path(source).read_text().splitlines(keepends=True)
    checkpoint = ctx.latest_checkpoint() or {"lines": 0, "versions": []}
    done, versions = checkpoint["lines"], checkpoint["versions"]
    if checkpoint["lines"]:
        ctx.log.info(
            "resuming at line %d; checkpoint taken under control version %s, now %s",
            done,
            ctx.checkpoint_config_version,
            ctx.config_version,
        )
    batch = ctx.config.get("batch") or DEFAULT_BATCH  # read once: a change needs a restart
    Path(target).mkdir(parents=True, exist_ok=True)
    part = Part(Path(target), done)
    batches = 0
    while done < len(lines):
        chunk = "".join(lines[done : done + batch])
        if ctx.config.get("upper"):
            chunk = chunk.upper()
        part.write(chunk)
        time.sleep(min(batch, len(lines) - done) / (ctx.config.get("rate") or DEFAULT_RATE))
        done = min(done + batch, len(lines))
        batches += 1
        if ctx.config_version not in versions:
            versions.append(ctx.config_version)
        if batches % CHECKPOINT_EVERY == 0 or ctx.checkpoint_requested:
            part.close()  # on disk before the checkpoint says it is done
            ctx.checkpoint({"lines": done, "versions": versions})  # pauses here when paused
            part = Part(Path(target), done)
        else:
            ctx.pause_point()
    part.close()
    summary = {"lines": done, "control_versions": versions}
    (Path(target) / "summary.json").write_text(json.dumps(summary))


class Part:
    """The output of one checkpoint interval, ``part-<offset>.txt``: opened (truncated) at its
    first write, so that an attempt resuming at ``offset`` replaces what an earlier one wrote."""

    def __init__(self, target: Path, offset: int) -> None:
        self.path = target / f"part-{offset:09d}.txt"
        self.file: Any = None

    def write(self, text: str) -> None:
        if self.file is None:
            self.file = open(self.path, "w")  # noqa: SIM115 - closed at the checkpoint
        self.file.write(text)

    def close(self) -> None:
        if self.file is not None:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            self.file = None


if __name__ == "__main__":
    if sys.argv[1:2] == ["generate"]:
        generate(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
