"""Issue 27: the command line imports what a command needs and nothing more, seen from a fresh
interpreter running the console script's entry point (``python -X importtime`` in
benchmarks/bench_cli.py gives the times; this holds the modules, which do not vary with load).

Before (01c8155): ``zkstore --version`` imported 367 modules, kazoo, fsspec, cloudpickle and
the runtime's client among them; ``jobs list`` built a storage (fsspec) it never used.

Issue 57 (what each zkstore process imports): before 0767f2d's successor, the ``--help`` of
``schedules``, ``daemons``, ``acl``, ``cluster``, ``control``, ``daemon``, ``fleet``,
``handles``, ``pools`` and ``quarantine`` imported kazoo and every store (a noun's module
imported :class:`~zkstore.cluster.Cluster` at its top); ``schedules list``, ``schedules show``
and ``daemons list`` built a storage (fsspec, ``importlib.metadata`` with it) to read records
only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recovery.cli.main import COMMANDS
from tests.cli import connection, run
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


def imported(*argv: str, heavy: tuple[str, ...] = HEAVY) -> tuple[int, list[str], str]:
    """Exit code, which of the ``heavy`` modules were imported, and stderr of ``zkstore ARGV``
    in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=heavy, argv=list(argv))],
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


#: What no ``--help`` needs: a ZooKeeper client, a storage, the cluster's stores.
CLIENTS = ("kazoo.client", "fsspec", "zkstore.cluster.connection")


def test_no_command_s_help_imports_a_client_or_a_storage() -> None:
    """Every noun's ``--help`` (and a verb's) loads its module and click only: whatever a
    module needs to run a command is imported inside that command."""
    helps = [[name, "--help"] for name, _, _ in COMMANDS]
    helps += [["schedules", "list", "--help"], ["jobs", "list", "--help"]]
    for argv in helps:
        code, clients, err = imported(*argv, heavy=CLIENTS)
        assert (code, clients) == (0, []), (argv, err[-2000:])


JOB = "def run(ctx):\n    pass\n"


def test_listings_of_records_build_no_storage(config: StoreConfig, tmp_path: Path) -> None:
    """``schedules list``, ``schedules show`` and ``daemons list`` read ZooKeeper only: they
    build no storage (fsspec is not imported), as ``jobs list`` does not."""
    (tmp_path / "job.py").write_text(JOB)
    job = str(tmp_path / "job.py")
    made = run(config, "schedules", "create", "nightly", f"{job}:run", "--every", "1h")
    assert made.returncode == 0, made.stderr
    for argv in (["schedules", "list"], ["schedules", "show", "nightly"], ["daemons", "list"]):
        code, heavy, err = imported(*argv, *connection(config))
        assert code == 0, (argv, err)
        assert "kazoo.client" in heavy and "fsspec" not in heavy, (argv, heavy)


def test_commands_that_read_no_payload_import_no_fsspec(
    config: StoreConfig, tmp_path: Path
) -> None:
    """On local storage, a command that reads records only builds its storage without
    fsspec (it is imported when a payload is first touched): ``jobs show`` of a job without
    artifacts, ``control get``, ``checkpoints list``, ``quarantine list``, ``fleet status``."""
    (tmp_path / "job.py").write_text(JOB)
    made = run(config, "submit", f"{tmp_path / 'job.py'}:run", "--job-id", "quiet")
    assert made.returncode == 0, made.stderr
    for argv in (
        ["jobs", "show", "quiet"],
        ["control", "get", "quiet"],
        ["checkpoints", "list", "quiet"],
        ["quarantine", "list"],
        ["fleet", "status"],
    ):
        code, heavy, err = imported(*argv, *connection(config))
        assert code == 0, (argv, err)
        assert "kazoo.client" in heavy and "fsspec" not in heavy, (argv, heavy)
