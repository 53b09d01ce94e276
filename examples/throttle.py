"""A throttled copy you can change while it runs: lines from an input file to numbered batch files,
at a rate set with ``zkstore control``, checkpointed so that a new attempt resumes.

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
anything else before it is stored. Each batch is written to its own file, overwritten if redone,
so a batch repeated after a failover leaves no duplicate; ``out/summary.json`` says how many lines
were copied and under which control versions.
"""

from __future__ import annotations

import json
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
    batches = 0
    while done < len(lines):
        chunk = "".join(lines[done : done + batch])
        if ctx.config.get("upper"):
            chunk = chunk.upper()
        (Path(target) / f"batch-{done:09d}.txt").write_text(chunk)
        time.sleep(min(batch, len(lines) - done) / (ctx.config.get("rate") or DEFAULT_RATE))
        done = min(done + batch, len(lines))
        batches += 1
        if ctx.config_version not in versions:
            versions.append(ctx.config_version)
        if batches % CHECKPOINT_EVERY == 0 or ctx.checkpoint_requested:
            ctx.checkpoint({"lines": done, "versions": versions})  # pauses here when paused
        else:
            ctx.pause_point()
    summary = {"lines": done, "control_versions": versions}
    (Path(target) / "summary.json").write_text(json.dumps(summary))


if __name__ == "__main__":
    if sys.argv[1:2] == ["generate"]:
        generate(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
