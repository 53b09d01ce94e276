"""The command-line options of the run's lifecycle, for ``submit``, ``jobs resume`` and
``daemon``.

Durations are parsed by the CLI's one duration type (:class:`recovery.cli.handle_commands.Duration`:
``90s``, ``10m``, ``2h``, ``1d`` or plain seconds), so ``--timeout 2h`` reads as
``--min-age 2h`` does; a limit also takes ``off`` (to remove it at ``jobs resume``) and
``--retry-reset-after`` takes ``never``. Every option defaults to None ("not given"): ``submit``
applies the defaults, ``jobs resume`` keeps what the job had.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import click

from recovery.cli.base import UsageFailure
from recovery.cli.types import Duration
from zkstore.errors import ConfigError

if TYPE_CHECKING:  # the records import the ZooKeeper client: loaded when an option is used
    from zkstore.config import LoweredMinimums
    from zkstore.lifecycle.options import Lifecycle

__all__ = [
    "DEFAULT_CHECKPOINT_TIMEOUT",
    "OFF_WORDS",
    "Limit",
    "NotifyUrl",
    "attempt_options",
    "daemon_notify_option",
    "lifecycle_from",
    "lifecycle_options",
    "lifecycle_summary",
    "stop_options",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The words that turn a limit (or the reset, or a URL) off.
OFF_WORDS = frozenset({"off", "none", "never", "no"})


class Limit(Duration):
    """A :class:`Duration`, or ``off`` (0: no limit)."""

    name = "duration|off"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, str) and value.strip().lower() in OFF_WORDS:
            return 0.0
        return super().convert(value, param, ctx)


class NotifyUrl(click.ParamType):  # type: ignore[type-arg]
    """An http(s) URL for notifications, or ``off`` (""); with ``check_destination``, one
    whose address (after resolving its name) notifications may go to, as this process's
    ``ZKSTORE_NOTIFY_ALLOWED_HOSTS`` says (:mod:`zkstore.lifecycle.destinations`: a refused
    one is a usage error in one line). Commands that make or change a job or a schedule do
    not check here: they check, once connected, against the cluster's published settings
    (:class:`zkstore.policy.ClusterPolicy`)."""

    name = "url|off"

    def __init__(self, *, check_destination: bool = False) -> None:
        self.check_destination = check_destination

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).strip()
        if text.lower() in OFF_WORDS:
            return ""
        from zkstore.lifecycle.lifecycle_records import url_problem

        problem = url_problem(text)
        if problem is not None:
            self.fail(problem, param, ctx)
        if self.check_destination:
            from zkstore.lifecycle.destinations import Destinations

            Destinations.from_env().check_url(text)
        return text


_LIMITS = (
    (
        "--timeout",
        "the longest an attempt may run (a timed-out attempt is ended: SIGTERM, then "
        "SIGKILL; it counts as a failure). Default: none.",
    ),
    (
        "--start-timeout",
        "the longest an attempt may be placed and not running (counts as a "
        "failure). Default: the daemon's launch deadline (counts as lost).",
    ),
    (
        "--progress-timeout",
        "end and restart (from the checkpoint) an attempt that neither "
        "checkpointed nor called ctx.heartbeat() for this long; at least 30s. Default: off.",
    ),
)
_RETRY = (
    (
        "--retry-delay",
        Duration(),
        "DURATION",
        "wait before retrying a failed attempt, doubling per failure in a row. Default: the "
        "daemon's --restart-backoff (1s).",
    ),
    (
        "--retry-max-delay",
        Duration(),
        "DURATION",
        "the longest wait between attempts. Default: 1m (or the --retry-delay, if longer).",
    ),
    (
        "--retry-jitter",
        click.FloatRange(0.0, 1.0, max_open=True),
        "FRACTION",
        "shorten each wait by up to this fraction, to spread retries. Default: 0.2.",
    ),
    (
        "--retry-reset-after",
        Limit(),
        "DURATION|never",
        "an attempt that ran this long resets the waits to the first. Default: 10m.",
    ),
    (
        "--lost-retry-delay",
        Duration(),
        "DURATION",
        "wait before retrying a lost attempt (the first is retried at once). Default: the "
        "daemon's --restart-backoff (1s).",
    ),
    (
        "--lost-retry-max-delay",
        Duration(),
        "DURATION",
        "the longest wait after lost attempts. Default: 1m.",
    ),
)


def lifecycle_options(func: F) -> F:
    """``--timeout``, ``--start-timeout``, ``--progress-timeout``, the ``--retry-*`` options and
    ``--notify URL``, each defaulting to None (not given)."""
    func = click.option(
        "--notify",
        type=NotifyUrl(),
        default=None,
        metavar="URL|off",
        help="POST a JSON event to URL on each state change of the job that a user cares about "
        "(failed, lost, timed out, quarantined, stopped, finished), besides the daemon's --notify; "
        "refused unless its address is global or among the leader's --notify-allowed-hosts "
        "(zkstore cluster settings).",
    )(func)
    for flag, kind, metavar, text in reversed(_RETRY):
        func = click.option(flag, type=kind, default=None, metavar=metavar, help=text)(func)
    for flag, text in reversed(_LIMITS):
        func = click.option(flag, type=Limit(), default=None, metavar="DURATION|off", help=text)(
            func
        )
    return func


def lifecycle_from(params: Mapping[str, Any], base: Lifecycle | None = None) -> Lifecycle:
    """The :class:`Lifecycle` of ``base`` (the defaults for a new job) with the options given
    in ``params`` (a command's keyword arguments); :class:`UsageFailure` (exit 2) naming the
    option for a combination that is not valid (``--retry-delay 10m --retry-max-delay 1m``)."""
    from zkstore.lifecycle.options import SUMMARY_KEYS, Lifecycle

    given = {key: params.get(key) for key in SUMMARY_KEYS if params.get(key) is not None}
    try:
        return (base or Lifecycle()).with_options(**given)
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from exc


def lifecycle_summary(
    params: Mapping[str, Any], lowered: LoweredMinimums | None = None
) -> dict[str, Any]:
    """The handle summary keys of the lifecycle options given in ``params`` (those not given
    are left out: the daemon's defaults apply), validated together (against the product's
    minimums, or the tests' ``lowered`` ones); :class:`UsageFailure` (exit 2) for a combination
    that is not valid. A limit or URL turned ``off`` is left out."""
    from zkstore.lifecycle.attempt_limits import least_limits
    from zkstore.lifecycle.options import SUMMARY_KEYS, Lifecycle

    lifecycle_from(params, Lifecycle(limits=least_limits(lowered)))
    given = {key: params.get(key) for key in SUMMARY_KEYS if params.get(key) is not None}
    return {
        key: value
        for key, value in given.items()
        if not (key in ("timeout", "start_timeout", "progress_timeout") and value == 0)
        and not (key == "notify" and value == "")
    }


def attempt_options(func: F) -> F:
    """``--max-attempts`` and ``--max-lost-attempts`` as a change (default None: unchanged),
    for ``jobs resume`` and ``schedules update``."""
    for flag in ("--max-lost-attempts", "--max-attempts"):
        func = click.option(
            flag,
            type=click.IntRange(1, 1000),
            default=None,
            help="change the job's " + flag.removeprefix("--").replace("-", " ") + " (as submit)",
        )(func)
    return func


def daemon_notify_option(func: F) -> F:
    """``zkstore daemon --notify URL``: where every job's events go (with the job's own); its
    destination is checked by the daemon, against its ``--notify-allowed-hosts``."""
    return click.option(
        "--notify",
        "notify",
        type=NotifyUrl(check_destination=False),
        default=None,
        metavar="URL",
        help="POST a JSON event for every job's state changes that users care about to URL "
        "(at least once, with an Idempotency-Key; retried with backoff for a day).",
    )(func)


def stop_options(func: F) -> F:
    """``zkstore jobs stop``'s ``--checkpoint`` and ``--checkpoint-timeout`` (``--timeout``, its
    old spelling, still accepted with a warning: across the command line ``--timeout`` is a
    run's time limit)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        old = kwargs.pop("old_checkpoint_timeout")
        if old is not None:
            click.echo(
                "zkstore: warning: jobs stop --timeout is deprecated: use --checkpoint-timeout "
                "(--timeout is a run's time limit, as in submit)",
                err=True,
            )
            if kwargs["checkpoint_timeout"] is None:
                kwargs["checkpoint_timeout"] = old
        if kwargs["checkpoint_timeout"] is None:
            kwargs["checkpoint_timeout"] = DEFAULT_CHECKPOINT_TIMEOUT
        return func(*args, **kwargs)

    options = [
        click.option(
            "--checkpoint/--no-checkpoint",
            default=False,
            help="ask the job for a checkpoint first (the control plane's checkpoint request) "
            "and wait for it, then end the driver.",
        ),
        click.option(
            "--checkpoint-timeout",
            type=Duration(),
            default=None,
            metavar="DURATION",
            help="with --checkpoint: how long to wait for the checkpoint before ending the "
            "driver anyway (it then resumes from its newest checkpoint). Default: 5m.",
        ),
        click.option("--timeout", "old_checkpoint_timeout", type=Duration(), hidden=True),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


#: ``jobs stop --checkpoint``'s wait for the checkpoint, in seconds.
DEFAULT_CHECKPOINT_TIMEOUT = 300.0
