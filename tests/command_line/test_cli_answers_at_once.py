"""Issue 27: the command line imports what a command needs and nothing more, seen from a fresh
interpreter running the console script's entry point (``python -X importtime`` in
benchmarks/bench_cli.py gives the times; this holds the modules, which do not vary with load).

Before (01c8155): ``zkstore --version`` imported 367 modules, kazoo, fsspec, cloudpickle and
the runtime's client among them; ``jobs list`` built a storage (fsspec) it never used.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli import connection
from zkstore.config import StoreConfig

pytestmark = pytest.mark.integration

HEAVY = ("kazoo.client", "fsspec", "cloudpickle", "recovery.client.api", "zkstore.cluster")

PROBE = """
import atexit, json, sys
def report():
    heavy = [m for m in {heavy!r} if m in sys.modules]
    sys.__stderr__.write("MODULES " + json.dumps(heavy) + "\\n")
atexit.register(report)
sys.argv = ["zkstore", *{argv!r}]
from recovery.cli.main import main
main()
"""


def imported(*argv: str) -> tuple[int, list[str], str]:
    """Exit code, the heavy modules imported, and stderr of ``zkstore ARGV`` in a fresh
    interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY, argv=list(argv))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    return done.returncode, json.loads(line.removeprefix("MODULES ")), done.stderr


def test_version_and_help_import_no_client() -> None:
    for argv in (["--version"], ["--help"], ["jobs", "--help"], ["submit", "--help"]):
        code, heavy, _ = imported(*argv)
        assert (code, heavy) == (0, []), argv


def test_a_usage_error_says_so_before_importing_the_runtime() -> None:
    for argv in (["jobs", "show"], ["submit"], ["jobs", "wait"], ["nosuch"]):
        code, heavy, err = imported(*argv)
        assert (code, heavy) == (2, []), (argv, err)


def test_jobs_list_reads_zookeeper_without_building_a_storage(config: StoreConfig) -> None:
    code, heavy, err = imported("jobs", "list", *connection(config))
    assert code == 0, err
    assert "fsspec" not in heavy and "zkstore.cluster" not in heavy
    assert "kazoo.client" in heavy
