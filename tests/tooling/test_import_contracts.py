"""Issue 24: the import graph keeps its layers and has no cycle, and the production command
line imports no dev code (processes: the linter, a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contracts_hold() -> None:
    """zkstore never imports recovery, only dev code imports dev code, the layers of zkstore
    and recovery have no upward edge, no cycle anywhere, the HTTP side and the command line
    apart (setup.cfg [importlinter]); on 6110130 three module cycles broke it."""
    linter = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


def test_the_production_command_line_imports_no_dev_code() -> None:
    """``zkstore demo`` and ``zkstore zookeeper`` are loaded by name when they run."""
    code = (
        "import sys, recovery.cli.main; dev = ('recovery.dev', 'zkstore.dev', 'zkstore_dev'); "
        "print([m for m in sys.modules if m.startswith(dev)])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
