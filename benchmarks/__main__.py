"""Run every benchmark (or the ones named): ``python -m benchmarks [store ...]``."""

from __future__ import annotations

import importlib
import sys

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
]


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("-")] or SUITES
    unknown = sorted(set(names) - set(SUITES))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(SUITES)}")
        return 2
    results = []
    for name in names:
        print(f"== {name}")
        results += importlib.import_module(f"benchmarks.bench_{name}").main([])
    missed = [r.name for r in results if not r.met()]
    print(f"{len(results) - len(missed)} of {len(results)} benchmarks meet their goal")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
