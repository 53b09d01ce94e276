"""``zkstore daemon``'s bounds on what submitters send (invariant 15): the ``--schedule-*``,
``--notify-*`` and ``--http-*`` limits, one stack of options turned into
:class:`~recovery.settings.Bounds` (light: click and the settings only)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from recovery.cli.types import Duration
from recovery.settings import Bounds
from zkstore.errors import ConfigError
from zkstore.lifecycle.destinations import ALLOWED_ENV, Destinations
from zkstore.schedules.schedule_limits import (
    DEFAULT_MIN_INTERVAL,
    MIN_INTERVAL_ENV,
    min_interval_from_env,
)

__all__ = ["bounds_from", "bounds_options"]

F = TypeVar("F", bound=Callable[..., Any])

_DEFAULTS = Bounds()
_OPTIONS: list[Callable[[Any], Any]] = [
    click.option(
        "--schedule-min-interval",
        type=Duration(),
        metavar="DURATION",
        help="the shortest interval between two windows of a schedule: the leader fires no "
        "window of a schedule whose --every or cron is shorter (schedules create refuses it) "
        f"[env {MIN_INTERVAL_ENV}; default {DEFAULT_MIN_INTERVAL}s]",
    ),
    click.option(
        "--schedule-fire-budget",
        type=click.IntRange(1, 1000),
        default=_DEFAULTS.schedule_fire_budget,
        show_default=True,
        help="windows the leader fires in one pass over every schedule: a backlog (--catchup "
        "all, an outage) is fired over several passes, other jobs served between them",
    ),
    click.option(
        "--notify-allowed-hosts",
        multiple=True,
        metavar="NAME|ADDRESS|CIDR,...",
        help="destinations notifications may go to though not global addresses (loopback, "
        "private, link-local... are refused after the name is resolved); 127.0.0.1 for "
        f"development [env {ALLOWED_ENV}; default none]",
    ),
    click.option(
        "--notify-max-per-job",
        type=click.IntRange(1, 10_000),
        default=_DEFAULTS.notify_per_job,
        show_default=True,
        help="a job's undelivered notification events kept at most: later ones are not sent "
        "(said at WARNING, counted in a metric); its outcome always is",
    ),
    click.option(
        "--notify-per-host",
        type=click.IntRange(1, 64),
        default=_DEFAULTS.notify_per_host,
        show_default=True,
        help="notification POSTs at once to one receiver (each receiver has its own queue)",
    ),
    click.option(
        "--http-max-connections",
        type=click.IntRange(1, 100_000),
        default=_DEFAULTS.http_max_connections,
        show_default=True,
        help="open HTTP connections at most: more are answered 503 and closed",
    ),
    click.option(
        "--http-timeout",
        type=Duration(),
        default=f"{_DEFAULTS.http_timeout:g}s",
        show_default=True,
        metavar="DURATION",
        help="the longest an HTTP connection may take to send its request, or to take in a "
        "piece of the answer, before it is closed",
    ),
]


def bounds_options(func: F) -> F:
    """Add the bounds' options to the daemon command."""
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def bounds_from(params: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Bounds:
    """The :class:`Bounds` of the options given (flags win over the environment); a usage
    error (:class:`ConfigError`) names the option."""
    env = os.environ if environ is None else environ
    interval = params.get("schedule_min_interval")
    allowed = params.get("notify_allowed_hosts") or tuple(
        item for item in [env.get(ALLOWED_ENV, "")] if item
    )
    Destinations.parse(allowed)  # refused here: one line, exit 2
    timeout = float(params["http_timeout"])
    if interval is not None and (interval < 1 or interval != int(interval)):
        raise ConfigError("--schedule-min-interval must be whole seconds, at least 1")
    return Bounds(
        schedule_min_interval=int(interval) if interval is not None else min_interval_from_env(env),
        schedule_fire_budget=int(params["schedule_fire_budget"]),
        notify_allowed=tuple(allowed),
        notify_per_job=int(params["notify_max_per_job"]),
        notify_per_host=int(params["notify_per_host"]),
        http_max_connections=int(params["http_max_connections"]),
        http_timeout=timeout,
    )
