"""The suite's daemons start as users start theirs: the installed ``zkstore`` script."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster, installed_script
from tests.helpers import BIN
from zkstore.config import StoreConfig

pytestmark = pytest.mark.unit


def test_a_local_daemon_runs_the_zkstore_script_installed_beside_its_python(
    tmp_path: Path,
) -> None:
    config = StoreConfig(zk_hosts="127.0.0.1:1", root="/t", storage_url=f"file://{tmp_path}")
    command = LocalCluster(config, tmp_path).daemon_command("d1", port=None)
    assert command[0] == str(BIN / "zkstore")
    assert command[command.index("daemon") + 1 : command.index("daemon") + 3] == ["--id", "d1"]
    assert "-m" not in command and "recovery.cli.main" not in command


def test_another_installation_runs_its_own_script(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    python = tmp_path / "bin" / "python"
    script = tmp_path / "bin" / "zkstore"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert installed_script(str(python)) == [str(script)]


def test_an_interpreter_without_the_script_beside_it_runs_the_module(tmp_path: Path) -> None:
    python = str(tmp_path / "python")
    assert installed_script(python) == [python, "-m", "recovery.cli.main"]
    assert installed_script(sys.executable) == [str(BIN / "zkstore")]
