"""The CPU a test is charged (tests/durations.py): its process's and that of the processes it
waited for, as the suite's summary adds them up (issue 57: the suite is CPU-bound)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.durations import cpu_seconds

pytestmark = pytest.mark.integration

BUSY = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"


def test_a_child_waited_for_is_charged_with_its_cpu() -> None:
    (before, own_before) = cpu_seconds()
    subprocess.run([sys.executable, "-c", BUSY], check=True)
    (after, own_after) = cpu_seconds()
    assert after - before >= 0.3
    assert own_after - own_before < 0.3, "the child's is not this process's own"
