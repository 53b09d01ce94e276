"""The machine's speed, as every figure about the suite's time is stated beside: the seconds this
Python takes for a fixed CPU loop (the sum of the squares of 0..10^7-1), which on this 2-core
machine is about 0.7 s on a normal day and moves with the load others put on it. A suite time
means little without it: the suite header prints it when the run starts and its summary when it
ends (:mod:`tests.conftest`), and ``.ci/run`` before and after its phases.

    python3.11 -m tests.machine_speed     # machine speed: a loop of 10^7 squares took 0.71 s ...
"""

from __future__ import annotations

import time

#: How many squares the loop sums.
SQUARES = 10**7


def loop_seconds() -> float:
    """The wall seconds of one loop, in this process (single-threaded: a busy machine shows)."""
    started = time.perf_counter()
    sum(i * i for i in range(SQUARES))
    return time.perf_counter() - started


def describe(*seconds: float) -> str:
    """``machine speed: a loop of 10^7 squares took 0.71 s (...)``; given two times, the
    first is the start's and the second the end's."""
    took = " at the start, ".join(f"{s:.2f} s" for s in seconds)
    end = " at the end" if len(seconds) > 1 else ""
    return f"machine speed: a loop of 10^7 squares took {took}{end} (0.7 s on a normal day here)"


if __name__ == "__main__":
    print(describe(loop_seconds()))
