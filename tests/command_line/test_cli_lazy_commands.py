"""Issue 27: the root group names each command with the module that defines it and loads it on
first use; what ``--help`` says of a command before loading it is what the command says of
itself once loaded (pure: in this process, no cluster)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

import zkstore
from recovery.cli import joboptions
from recovery.cli.base import LazyGroup
from recovery.cli.main import cli
from zkstore import protocol
from zkstore.jobs.definition import DEFAULT_MAX_LOST_ATTEMPTS
from zkstore.records.job_states import JobState

pytestmark = pytest.mark.unit


def test_every_named_command_loads_and_says_what_the_table_says() -> None:
    assert isinstance(cli, LazyGroup)
    ctx = click.Context(cli)
    assert cli.lazy, "the root group names its commands"
    for name, (_module, short_help) in cli.lazy.items():
        command = cli.get_command(ctx, name)
        assert command is not None, name
        assert command.help is not None, name
        first = command.get_short_help_str(1000)
        assert first == short_help, (name, first, short_help)


def test_jobs_holds_the_store_and_the_runtime_subcommands() -> None:
    """``jobs`` is one package (:mod:`recovery.cli.jobs`): list, show, cancel, forget, logs, wait,
    stop and resume are all there however the group is reached."""
    jobs = cli.get_command(click.Context(cli), "jobs")
    assert isinstance(jobs, click.Group)
    assert {"list", "show", "cancel", "forget", "logs", "wait", "stop", "resume"} <= set(
        jobs.commands
    )


def test_help_lists_every_command_once() -> None:
    result = CliRunner().invoke(cli, ["--help"], prog_name="zkstore")
    assert result.exit_code == 0
    listed = result.stdout.split("Commands:")[1]
    names = [
        line.split()[0] for line in listed.splitlines() if line.startswith("  ") and line[2] != " "
    ]
    assert names == sorted(set(cli.lazy) | {"demo", "zookeeper"})


def test_the_version_is_the_package_literal_with_the_fleet_protocol() -> None:
    result = CliRunner().invoke(cli, ["--version"], prog_name="zkstore")
    assert result.exit_code == 0
    assert result.stdout == f"zkstore {zkstore.__version__} ({protocol.describe()})\n"
    assert f"fleet protocol {protocol.PROTOCOL}" in result.stdout


def test_submit_shows_the_definitions_default_of_lost_attempts() -> None:
    """The option's default is a literal (no cloudpickle for a usage error): it agrees."""
    assert joboptions.DEFAULT_MAX_LOST_ATTEMPTS == DEFAULT_MAX_LOST_ATTEMPTS


def test_jobs_list_help_names_every_state_a_job_shows() -> None:
    """What ``jobs list`` may print in its STATE column, its help explains: every job state but
    the kinds of an attempt's end (TIMED_OUT, STUCK) and a driver's BROKEN report, which no
    job shows (its job is quarantined)."""
    ctx = click.Context(cli)
    jobs = cli.get_command(ctx, "jobs")
    assert isinstance(jobs, click.Group)
    listing = jobs.get_command(ctx, "list")
    assert listing is not None and listing.help is not None
    words = set(listing.help.replace(",", " ").replace("(", " ").split())
    shown = set(JobState) - {JobState.TIMED_OUT, JobState.STUCK, JobState.BROKEN}
    assert sorted(shown - words) == []
