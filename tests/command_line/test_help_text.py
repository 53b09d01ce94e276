"""Issue 58: every ``--help`` reads as prose: no stray runs of spaces inside a paragraph that
click rewraps (a help assembled from an indented docstring and another text kept the
docstring's indentation inside the lines: "pause point by     zkstore control pause"), nor inside
an option's help. Pure: the real click group, in this process."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from typing import Any

import click
import pytest

from recovery.cli.base import DevCommand
from recovery.cli.main import cli

pytestmark = pytest.mark.unit

#: a run of two or more spaces between words
RUN = re.compile(r"\S {2,}\S")


def _commands() -> Iterator[tuple[str, click.Command]]:
    def walk(command: click.Command, path: str, ctx: click.Context) -> Iterator[Any]:
        if isinstance(command, DevCommand):
            command = command.load()
        yield path, command
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, name
                yield from walk(sub, f"{path} {name}", click.Context(sub, info_name=name))

    yield from walk(cli, "zkstore", click.Context(cli, info_name="zkstore"))


def _preformatted(help_text: str) -> set[str]:
    """The lines of the help's ``\\b`` paragraphs (click prints them as they are: tables)."""
    kept: set[str] = set()
    for paragraph in inspect.cleandoc(help_text).split("\n\n"):
        lines = paragraph.strip("\n").splitlines()
        if lines and lines[0].strip() == "\b":
            kept.update(line.strip() for line in lines[1:])
    return kept


def test_no_help_has_stray_runs_of_spaces() -> None:
    found = []
    for path, command in _commands():
        ctx = click.Context(command, info_name=path)
        rendered = command.get_help(ctx)
        exempt = _preformatted(command.help or "")
        for line in rendered.split("\nOptions:")[0].splitlines()[1:]:
            text = line.strip()
            if text not in exempt and RUN.search(text):
                found.append(f"{path}: {text!r}")
        for param in command.params:
            text = getattr(param, "help", None) or ""
            if RUN.search(text):
                found.append(f"{path} {param.name}: {text!r}")
    assert found == []


def test_jobs_list_help_says_its_states_in_one_paragraph() -> None:
    jobs = cli.get_command(click.Context(cli), "jobs")
    assert isinstance(jobs, click.Group)
    listing = jobs.get_command(click.Context(jobs), "list")
    assert listing is not None
    rendered = " ".join(listing.get_help(click.Context(listing, info_name="list")).split())
    assert "PAUSED (blocked at a pause point by zkstore control pause)" in rendered
