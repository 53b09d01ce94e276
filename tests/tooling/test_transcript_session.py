"""The docs' transcript tool on a real session (zkstore_dev.transcript): the page's marked block
is rewritten with what the commands printed against an embedded ZooKeeper, hidden lines run
unseen, variables carry from one line to the next, the session's directory is shown as
/tmp/demo, the caller's ZKSTORE_* settings stay out, and what it left running is ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import alive, wait_for
from zkstore_dev.transcript import regenerate

pytestmark = pytest.mark.integration

SESSION = """\
# a note, left out
#: export GREETING=hello
#: sleep 300 > /dev/null 2>&1 & echo $! > "$OUT/sleeper.pid"
echo "$GREETING from $PWD"
echo "min interval: ${ZKSTORE_SCHEDULE_MIN_INTERVAL:-not set}"
zkstore schedules list; echo "exit $?"
"""
PAGE = """Before.

<!-- transcript: docs/sessions/demo.sh -->
```console
$ typed by hand
```
<!-- /transcript -->

After.
"""


def test_a_marked_block_is_rewritten_from_a_real_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / "docs" / "sessions").mkdir(parents=True)
    (repo / "docs" / "sessions" / "demo.sh").write_text(SESSION)
    page = repo / "docs" / "page.md"
    page.write_text(PAGE)
    monkeypatch.setenv("OUT", str(tmp_path))
    monkeypatch.setenv("ZKSTORE_SCHEDULE_MIN_INTERVAL", "1s")  # as the suite sets it

    written = regenerate(page, repo)

    assert written == (
        "Before.\n\n<!-- transcript: docs/sessions/demo.sh -->\n```console\n"
        '$ echo "$GREETING from $PWD"\n'
        "hello from /tmp/demo\n"
        '$ echo "min interval: ${ZKSTORE_SCHEDULE_MIN_INTERVAL:-not set}"\n'
        "min interval: not set\n"
        '$ zkstore schedules list; echo "exit $?"\n'
        "no schedules\n"
        "exit 0\n"
        "```\n<!-- /transcript -->\n\nAfter.\n"
    )
    sleeper = int((tmp_path / "sleeper.pid").read_text())
    wait_for(lambda: not alive(sleeper), timeout=30, what="what the session left running ended")
