"""A daemon's log shipper runs nicer than its daemon, whatever the daemon's own niceness.

The shipper started as a new process was set to an absolute niceness of 10, the one forked by
the fork server to 10 more than its own: a daemon run at niceness 15 (under ``nice``) gave the
first a higher priority than its own drivers, and a test that knew the shipper by "niceness 10"
failed when the suite itself ran under ``nice``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

PROBE = """
import os, sys
os.nice(int(sys.argv[1]))
from recovery.member.log_shipping import shipper_niceness
print(os.getpriority(os.PRIO_PROCESS, 0), shipper_niceness())
"""


@pytest.mark.parametrize(("daemon", "shipper"), [(0, 10), (5, 15), (15, 19)])
def test_the_shipper_is_ten_nicer_than_its_daemon_at_most_19(daemon: int, shipper: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(daemon)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    own, found = map(int, done.stdout.split())
    assert found == min(19, own + 10), (own, found)
    if own == daemon:  # the suite itself at niceness 0
        assert found == shipper
