"""The test suite's lowered product minimums (``ZKSTORE_TEST_MINIMUMS``, docs/testing.md): read
once with the configuration, refused unless every ZooKeeper server is on loopback, carried to
the driver with the rest of the configuration, and never shown in ``--help``. What they lower
is a floor: no default changes, a test may only ask for less than the product allows."""

from __future__ import annotations

from dataclasses import replace

import click
import pytest

from recovery.cli.base import UsageFailure
from recovery.cli.lifecycle_options import lifecycle_summary
from recovery.cli.main import cli
from recovery.driver.heartbeat import HeartbeatGate
from zkstore.config import TEST_MINIMUMS_ENV, LoweredMinimums, StoreConfig, loopback_only
from zkstore.errors import ConfigError
from zkstore.lifecycle.attempt_limits import (
    MIN_HEARTBEAT_INTERVAL,
    MIN_PROGRESS_TIMEOUT,
    Limits,
    least_heartbeat_interval,
    least_limits,
)
from zkstore.lifecycle.options import Lifecycle

pytestmark = pytest.mark.unit

LOWERED = "progress_timeout=2,heartbeat_interval=0.5"


def env(hosts: str, lowered: str = LOWERED) -> dict[str, str]:
    return {"ZKSTORE_ZK": hosts, TEST_MINIMUMS_ENV: lowered}


def test_read_with_the_configuration_and_carried_to_the_driver() -> None:
    config = StoreConfig.from_env(env("127.0.0.1:2181"))
    assert config.lowered_minimums == LoweredMinimums(progress_timeout=2, heartbeat_interval=0.5)
    assert StoreConfig.from_json(config.to_json()) == config  # the driver's, through its pipe
    assert StoreConfig.from_env({"ZKSTORE_ZK": "127.0.0.1:2181"}).lowered_minimums is None


@pytest.mark.parametrize(
    "hosts", ["127.0.0.1:2181", "localhost:2181", "[::1]:2181", "127.0.0.1:1,127.0.0.2:2/chroot"]
)
def test_accepted_with_every_server_on_loopback(hosts: str) -> None:
    assert loopback_only(hosts)
    assert StoreConfig.from_env(env(hosts)).lowered_minimums is not None


@pytest.mark.parametrize(
    "hosts", ["zk1:2181", "10.0.0.5:2181", "127.0.0.1:2181,10.0.0.5:2181", "localhost.example:2181"]
)
def test_refused_unless_every_server_is_on_loopback(hosts: str) -> None:
    """A production cluster's ZooKeeper is on other hosts: there the variable is an error, not
    a silent change (a name is never resolved: one that points at loopback is refused too)."""
    with pytest.raises(ConfigError, match=f"{TEST_MINIMUMS_ENV} is for the test suite only"):
        StoreConfig.from_env(env(hosts))
    with pytest.raises(ConfigError):
        StoreConfig(zk_hosts=hosts, lowered_minimums=LoweredMinimums(progress_timeout=2))


@pytest.mark.parametrize(
    "text",
    ["progress_timeout", "speed=2", "progress_timeout=soon", "progress_timeout=0", "cancel=-1"],
)
def test_anything_but_known_positive_minimums_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=TEST_MINIMUMS_ENV):
        StoreConfig.from_env(env("127.0.0.1:2181", text))


def test_the_progress_timeout_floor_is_lowered_only_where_asked() -> None:
    with pytest.raises(ConfigError, match=f"at least {MIN_PROGRESS_TIMEOUT:g} s"):
        Limits(progress_timeout=2)
    lowered = least_limits(LoweredMinimums(progress_timeout=2))
    assert replace(lowered, progress_timeout=2).progress_timeout == 2
    with pytest.raises(ConfigError, match="at least 2 s"):
        replace(lowered, progress_timeout=1)
    assert lowered == Limits(), "the floor is not part of the limits' value"
    # A "lowered" minimum above the product's changes nothing.
    with pytest.raises(ConfigError, match=f"at least {MIN_PROGRESS_TIMEOUT:g} s"):
        replace(least_limits(LoweredMinimums(progress_timeout=60)), progress_timeout=29)


def test_submit_and_resume_check_the_options_against_the_configurations_floor() -> None:
    """What ``zkstore submit`` and ``jobs resume`` do with ``--progress-timeout``; the leader
    reads the summary with the same floor (``recovery.leader.lifecycle_inputs.job_lifecycle``)."""
    given = {"progress_timeout": 2.0}
    with pytest.raises(UsageFailure, match=f"at least {MIN_PROGRESS_TIMEOUT:g} s"):
        lifecycle_summary(given)
    assert lifecycle_summary(given, LoweredMinimums(progress_timeout=2)) == given
    kept = Lifecycle(limits=least_limits(LoweredMinimums(progress_timeout=2)))
    limits = kept.with_options(timeout=60).with_options(progress_timeout=2).limits
    assert (limits.timeout, limits.progress_timeout) == (60, 2)


def test_the_heartbeat_floor_follows() -> None:
    assert least_heartbeat_interval(None) == MIN_HEARTBEAT_INTERVAL
    lowered = least_heartbeat_interval(LoweredMinimums(heartbeat_interval=0.5))
    assert HeartbeatGate(2.0, least_interval=lowered).interval == 0.5
    assert HeartbeatGate(2.0).interval == MIN_HEARTBEAT_INTERVAL
    assert HeartbeatGate(30.0, least_interval=lowered).interval == 7.5, "no default changes"


def test_no_help_names_it() -> None:
    """Not a user-visible option: no command's ``--help`` mentions it."""

    def helps(command: click.Command, ctx: click.Context) -> list[str]:
        found = [command.get_help(ctx)]
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                found += helps(sub, click.Context(sub, info_name=name, parent=ctx))
        return found

    texts = helps(cli, click.Context(cli, info_name="zkstore"))
    assert len(texts) > 40
    assert not [t for t in texts if "MINIMUMS" in t.upper() or "lowered" in t]
