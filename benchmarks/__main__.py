"""Run every benchmark (or the ones named): ``python -m benchmarks [--smoke] [store ...]``, or
one with its own arguments: ``python -m benchmarks spark_resume --runs 5`` (what follows the
name from its first option on is the benchmark's).

``--smoke`` runs each at a tiny size (seconds each): it proves that every benchmark still runs
from end to end and prints its figures (CI runs it), not that the figures are any good; a smoke
run's ratios mean nothing and its missed goals do not fail it.
"""

from __future__ import annotations

import importlib
import sys
import time

SUITES = [
    "store",
    "runtime",
    "operator",
    "backlog",
    "fleet",
    "resources",
    "observe",
    "control",
    "retention",
    "outage",
    "cost",
    "session",
    "cli",
    "imports",
    "lifecycle",
    "schedules",
    "spark_resume",
    "warm_ready",
    "bounded",
    "outputs",
    "sweep",
    "soak",
    "pools",
]

#: The arguments of each benchmark's tiny run.
SMOKE = {
    "store": ["--adds", "10", "--entries", "50", "--rounds", "1"],
    "runtime": ["--jobs", "3", "--session-timeout", "3", "--rounds", "1"],
    "operator": ["--handles", "50", "--rounds", "1"],
    "backlog": ["--jobs", "4", "--pending", "20"],
    "fleet": ["--jobs", "3", "--session-timeout", "3", "--placements", "20"],
    "resources": ["--rows", "2000", "--rounds", "1"],
    "observe": ["--jobs", "20", "--lines", "500", "--rounds", "1", "--ship-rounds", "1"],
    "control": ["--changes", "5"],
    "retention": ["--results", "200"],
    "outage": ["--smoke"],
    "cost": ["--jobs", "3", "--runs", "1", "--idle", "1"],
    "session": ["--jobs", "4", "--seconds", "20", "--long-jobs", "2", "--trickle", "2"],
    "cli": ["--rounds", "1", "--jobs", "5"],
    "imports": ["--rounds", "1", "--daemon-rounds", "1"],
    "outputs": ["--steps", "3", "--rounds", "1"],
    "lifecycle": ["--rounds", "20", "--events", "20", "--backlog", "50", "--deliveries", "3"],
    "schedules": ["--fires", "5", "--latency-fires", "5"],
    "spark_resume": ["--runs", "1"],
    "warm_ready": ["--jobs", "1"],
    "bounded": ["--jobs", "2", "--windows", "40", "--connections", "20"],
    "sweep": ["--rounds", "2", "--files", "10"],
    "soak": ["--jobs", "20", "--every", "0.25", "--sample", "1"],
    "pools": [
        "--windows",
        "2",
        "--every",
        "3",
        "--backlog",
        "10",
        "--hold",
        "1",
        "--placements",
        "30",
        "--rounds",
        "1",
    ],
}
#: Benchmarks only run when named (minutes each, quoted by the README, not goals).
BY_NAME_ONLY = {"outage", "session", "soak"}


def parse(argv: list[str]) -> tuple[bool, list[str], list[str]]:
    """``--smoke``, the benchmarks named (the words before the first other option) and the
    arguments for the one named (from that option on). Raises ValueError for arguments with
    no benchmark, or more than one, to take them."""
    smoke = "--smoke" in argv
    words = [a for a in argv if a != "--smoke"]
    first = next((i for i, a in enumerate(words) if a.startswith("-")), len(words))
    names, own = words[:first], words[first:]
    if own and len(names) != 1:
        raise ValueError(f"{' '.join(own)}: name the one benchmark they are for, before them")
    return smoke, names, own


def main(argv: list[str]) -> int:
    try:
        smoke, names, own = parse(argv)
    except ValueError as exc:
        print(exc)
        return 2
    names = names or [s for s in SUITES if smoke or s not in BY_NAME_ONLY]
    unknown = sorted(set(names) - set(SUITES))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(SUITES)}")
        return 2
    results = []
    for name in names:
        print(f"== {name}{' (smoke)' if smoke else ''}", flush=True)
        began = time.monotonic()
        module = importlib.import_module(f"benchmarks.bench_{name}")
        results += module.main([*(SMOKE[name] if smoke else []), *own])
        print(f"== {name}: {time.monotonic() - began:.1f} s", flush=True)
    missed = [r.name for r in results if not r.met()]
    print(f"{len(results) - len(missed)} of {len(results)} benchmarks meet their goal")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
