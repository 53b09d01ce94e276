"""Issue 58.5: what the docs state that can be checked is checked (as ``make transcripts-check``
does for the recorded sessions): every ``zkstore ...`` command line quoted in docs/*.md and the
README names commands that exist and options they take, parsed by the real click group; and
docs/operating.md "Upgrading" sends the reader to the changelog's upgrade notes instead of
restating them (it said "(none so far)" while the next release had notes that need action).
Pure: files and the click group, in this process."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from recovery import proctitle
from recovery.cli.base import DevCommand
from recovery.cli.main import cli

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
#: the shell around a command: a pipe, a list, a redirection, the end of a command
SHELL = re.compile(r"\s*(?:\||&&|;|>|2>|<)(?:\s|$)|;$")
#: what ``ps`` shows of zkstore's processes: titles, not commands
TITLES = (
    *(
        title("ID")[0].strip()
        for title in (
            proctitle.shipper_title,
            proctitle.fork_server_title,
            proctitle.warm_driver_title,
            proctitle.warm_up_title,
        )
    ),
    proctitle.driver_title("JOB", 1)[0].strip(),
)


def substitutions(line: str) -> tuple[str, list[str]]:
    """``line`` with each ``$(...)`` (balanced parentheses) replaced by a word, and what they
    held (a command inside another's arguments)."""
    inner, out, at = [], [], 0
    while (start := line.find("$(", at)) >= 0:
        depth, end = 0, start + 1
        while end < len(line):
            depth += {"(": 1, ")": -1}.get(line[end], 0)
            if depth == 0:
                break
            end += 1
        inner.append(line[start + 2 : end])
        out.append(line[at:start] + "X")
        at = end + 1
    return "".join(out) + line[at:], inner


def quoted_commands(text: str) -> list[tuple[str, bool]]:
    """The ``zkstore ...`` lines of ``text``'s code blocks (a ``$`` prompt and ``\\``
    continuations allowed) and its inline code spans, each with whether it is a span (a span
    may name an option without its value: "`zkstore daemon --driver-user`")."""
    found: list[tuple[str, bool]] = []
    for block in FENCE.findall(text):
        body = block.split("\n", 1)[1].rsplit("```", 1)[0].replace("\\\n", " ")
        found += [(line.strip().removeprefix("$ "), False) for line in body.splitlines()]
    prose = FENCE.sub("", text)
    found += [(span, True) for span in re.findall(r"`([^`\n]+)`", prose)]
    commands = []
    for quoted, span in found:
        line, inner = substitutions(quoted)  # "$(zkstore ...)" inside another's arguments
        for each in [line, *inner]:
            if re.match(r"zkstore [a-z-]", each) and not each.startswith(TITLES):
                commands.append((SHELL.split(each)[0], span))
    return commands


def problem(line: str, span: bool) -> str | None:
    """What is wrong with the command line ``line`` for the real click group, or None."""
    try:
        words = shlex.split(line, comments=True)[1:]
    except ValueError as exc:
        return f"not a shell line ({exc})"
    command: click.Command = cli
    ctx = click.Context(cli, info_name="zkstore")
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        name, words = words[0], words[1:]
        # "control pause|resume JOB": each of the alternatives must be a command
        subs = [command.get_command(ctx, alternative) for alternative in name.split("|")]
        if any(sub is None for sub in subs):
            return f"no command {name!r} in {ctx.command_path}"
        sub = subs[0]
        assert sub is not None
        command = sub.load() if isinstance(sub, DevCommand) else sub
        ctx = click.Context(command, info_name=name, parent=ctx)
    try:
        command.make_parser(ctx).parse_args(list(words))
    except click.BadOptionUsage as exc:
        if not (span and "requires an argument" in exc.format_message()):
            return f"{ctx.command_path}: {exc.format_message()}"
    except click.UsageError as exc:
        return f"{ctx.command_path}: {exc.format_message()}"
    return None


def test_every_quoted_command_line_parses_with_the_real_commands() -> None:
    found = [
        f"{doc.relative_to(REPO)}: {line!r}: {why}"
        for doc in DOCS
        for line, span in quoted_commands(doc.read_text())
        if (why := problem(line, span)) is not None
    ]
    assert found == []


def test_the_docs_quote_many_command_lines() -> None:
    """The check reads what it should: the README's tour and the docs quote nearly 200."""
    assert len([c for doc in DOCS for c in quoted_commands(doc.read_text())]) > 150


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("zkstore jobs lsit", "no command 'lsit' in zkstore jobs"),
        ("zkstore jobs list --colour", "No such option"),
        ("zkstore control pause|resum JOB", "no command 'pause|resum'"),
        ("zkstore submit job.py --job-id", "requires an argument"),
    ],
)
def test_a_wrong_command_line_is_caught(line: str, why: str) -> None:
    found = problem(line, span=False)
    assert found is not None and why in found, found


def section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_upgrading_refers_to_the_changelogs_upgrade_notes_without_restating_them() -> None:
    upgrading = section((REPO / "docs" / "operating.md").read_text(), "Upgrading")
    assert "CHANGELOG.md" in upgrading and "Upgrade notes" in upgrading
    assert "none so far" not in upgrading
    changelog = (REPO / "CHANGELOG.md").read_text()
    unreleased = section(changelog, "Unreleased")
    assert "\n### Upgrade notes\n" in unreleased, "the heading the docs send readers to"
