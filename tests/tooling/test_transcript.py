"""The docs' sessions (zkstore_dev.transcript): what a page marks and what a session shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkstore_dev.transcript import MARK, _commands, main, stale

pytestmark = pytest.mark.unit

PAGE = """Before.

<!-- transcript: docs/sessions/x.sh -->
```console
$ old
old output
```
<!-- /transcript -->

After.
"""


def test_a_marked_block_is_found_with_its_session() -> None:
    found = MARK.search(PAGE)
    assert found is not None
    assert found.group("script") == "docs/sessions/x.sh"
    assert found.group("body") == "$ old\nold output\n"
    again = MARK.sub(lambda m: m.group(1) + "$ new\n" + m.group(4), PAGE)
    assert "$ new\n```\n<!-- /transcript -->\n\nAfter." in again and "old" not in again


def test_comments_are_left_out_and_hidden_lines_run() -> None:
    script = "# what it shows\n#: export X=1\n\nzkstore jobs list\n  # indented note\n"
    assert _commands(script) == ["#: export X=1", "zkstore jobs list"]


def test_every_pages_blocks_show_their_sessions_commands_as_they_are_now() -> None:
    """A session changed and its page not regenerated (``make transcripts``) fails here; the
    docs' sessions are marked where the pages promise real transcripts."""
    repo = Path(__file__).resolve().parents[2]
    pages = [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    marked = {p.name for p in pages if MARK.search(p.read_text())}
    assert {"schedules.md", "using.md"} <= marked, marked
    assert [problem for page in pages for problem in stale(page, repo)] == []


def test_a_block_whose_commands_differ_from_its_session_is_stale(tmp_path: Path) -> None:
    (tmp_path / "docs" / "sessions").mkdir(parents=True)
    (tmp_path / "docs" / "sessions" / "x.sh").write_text("#: hidden\nnew\n")
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert (
        len(stale(page, tmp_path)) == 1 and "does not show its commands" in stale(page, tmp_path)[0]
    )
    (tmp_path / "docs" / "sessions" / "x.sh").write_text("# a note\n#: hidden\nold\n")
    assert stale(page, tmp_path) == []
    page.write_text(PAGE.replace("x.sh", "missing.sh"))
    assert stale(page, tmp_path) == [f"{page}: docs/sessions/missing.sh: no such session"]


def test_the_check_reads_the_pages_of_the_checkout_it_runs_from() -> None:
    """``make transcripts-check`` with no page named reads README.md and docs/ of this checkout
    (found from the module's own place: the harness moved to zkstore_dev/ in issue 61)."""
    assert main(["--check"]) == 0
