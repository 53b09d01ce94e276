"""``zkstore demo`` waits for its daemon's warm JVM by the line the pool logs: the two must
agree, whether the JVM started with the class-data archive or before it was made (the demo
waited 180 s and failed once the pool's line gained its archive note)."""

from __future__ import annotations

import pytest

from recovery.dev.demo import WARM_READY
from recovery.member.warm_jvms.pool import READY_LINE

pytestmark = pytest.mark.unit


def test_the_demo_reads_the_pools_ready_line_with_or_without_the_archive() -> None:
    for note in ("", ", without the class-data archive"):
        line = "2026-11-29 INFO recovery.member.warm_jvms.pool: " + READY_LINE % (
            "w-1",
            4242,
            24.47,
            note,
        )
        found = WARM_READY.search(line)
        assert found is not None, line
        assert found.group(1) == "24.5"
