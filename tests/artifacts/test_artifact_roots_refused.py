"""The daemon and handles cleanup refuse an artifact root around the storage root, as a user
meets it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import connection
from zkstore.config import StoreConfig

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent


def test_the_daemon_and_handles_cleanup_refuse_a_root_around_the_storage_root(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    storage = tmp_path / "d" / "storage"
    storage.mkdir(parents=True)
    config = runtime_config.with_changes(storage_url=f"file://{storage}")
    base = [*connection(config, roots=True), "--artifact-root", f"file://{tmp_path / 'd'}"]
    daemon = subprocess.run(
        [str(BIN / "zkstore"), "daemon", "--id", "d1", *base],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert daemon.returncode == 2, daemon.stderr
    lines = daemon.stderr.strip().splitlines()
    assert len(lines) == 1 and "contains the storage root" in lines[0], lines
    cleanup = subprocess.run(
        [str(BIN / "zkstore"), "handles", "cleanup", "--yes", *base],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cleanup.returncode == 2, cleanup.stderr
    assert "contains the storage root" in cleanup.stderr
