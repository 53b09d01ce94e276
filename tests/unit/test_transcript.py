"""The docs' sessions (recovery.dev.transcript): what a page marks and what a session shows."""

from __future__ import annotations

from recovery.dev.transcript import MARK, _commands

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
