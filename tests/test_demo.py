"""The front door: ``zkstore demo`` tells the failover story and ends with "output matches"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BIN = Path(sys.executable).parent


def test_demo_tells_the_failover_story_and_checks_its_output() -> None:
    done = subprocess.run(
        [str(BIN / "zkstore"), "demo", "--days", "7"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    story = [
        "is the leader",
        "SIGKILL the leader daemon",
        "became the leader",
        "adopted the running driver",
        "SIGKILL the driver",
        "driver of attempt 2 is running",
        "SUCCEEDED after 2 attempt(s)",
        "outputs kept (listed in the job's result): days, summary",
        "staging directories left: 0",
        "output matches",
        "no handle or payload left behind",
    ]
    positions = [out.find(line) for line in story]
    assert all(p >= 0 for p in positions), out
    assert positions == sorted(positions), "told in order"
