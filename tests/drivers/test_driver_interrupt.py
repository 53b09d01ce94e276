"""A cancel reaches a job whose main thread blocks in a wait without a timeout."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

#: A job's main thread that blocks forever; the monitor's thread interrupts it after 0.2 s.
BLOCKED = """
import signal, sys, threading, time
from recovery.driver.driver import interrupt_main_thread
if sys.argv[1] != "python":
    signal.signal(signal.SIGINT, getattr(signal, sys.argv[1]))
threading.Timer(0.2, interrupt_main_thread).start()
started = time.monotonic()
try:
    threading.Event().wait({wait})
except KeyboardInterrupt:
    print("interrupted", round(time.monotonic() - started, 1))
else:
    print("waited", round(time.monotonic() - started, 1))
"""


def run(handler: str, wait: float | None) -> str:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED.format(wait=wait), handler],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[0]


def test_a_main_thread_blocked_in_a_wait_without_timeout_is_interrupted() -> None:
    # Under _thread.interrupt_main alone this wait never ended: the cancel waited out its grace.
    assert run("python", None) == "interrupted"


@pytest.mark.parametrize("handler", ["SIG_IGN", "SIG_DFL"])
def test_a_job_that_gave_up_python_s_sigint_handler_is_neither_killed_nor_interrupted(
    handler: str,
) -> None:
    """A real SIGINT would kill a job with SIG_DFL (no outcome reported) and do nothing with
    SIG_IGN: only the simulated interrupt is sent, and the grace ends such a job."""
    assert run(handler, 1.0) == "waited"
