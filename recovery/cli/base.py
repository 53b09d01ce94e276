"""The ``zkstore`` click group, its shared connection options and its error handling.

Exit codes are decided once, from the class of the error (see :mod:`zkstore.errors`): 0 success;
1 the operation failed; 2 usage error (bad flags, bad configuration, invalid job id); 4 no such
job; 5 conflict or wrong state (exists already, finished, quarantined, changed meanwhile);
6 ZooKeeper or storage unavailable; 7 a wait timed out; 8 ZooKeeper denied access (credentials
or ACL); 9 the fleet's protocol does not allow it (a daemon too old, an upgrade not finalized).
Failures print one line on stderr, never a traceback (``-vv`` logs it).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from recovery.cli.types import Duration
from zkstore import __version__, protocol
from zkstore.config import ENV_VARS, StoreConfig, parse_storage_options
from zkstore.errors import EXIT_FAILED, EXIT_USAGE, ConfigError, JobDidNotSucceed, ZkStoreError
from zkstore.payloads.secrecy import read_secret_file

__all__ = [
    "OLD_TIMEOUT_WARNING",
    "STORE_TIMEOUT_RANGE",
    "Connection",
    "DevCommand",
    "LazyGroup",
    "OperationFailed",
    "TakenSecrets",
    "UsageFailure",
    "ZkStoreGroup",
    "cli",
    "command_environment",
    "connection_options",
    "progress",
    "setup_logging",
    "store_timeout_connection_options",
    "wait_timeout_option",
]

F = TypeVar("F", bound=Callable[..., Any])

logger = logging.getLogger(__name__)


class ZkStoreGroup(click.Group):
    """A group that turns zkstore errors into one line on stderr and the exit code of their
    class; anything else is a bug of ours, reported in one line too (``-vv`` logs the traceback).
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            raise UsageFailure(str(exc)) from exc
        except JobDidNotSucceed as exc:  # its message is the job's last line, said as it is
            click.echo(str(exc), err=True)
            raise click.exceptions.Exit(exc.exit_code) from exc
        except ZkStoreError as exc:
            # The reason as it is: the class is for code (it decided the exit code), not for
            # the person reading the line (``-vv`` logs it with the traceback).
            logger.debug("%s", type(exc).__name__, exc_info=True)
            OperationFailed(str(exc)).show()
            raise click.exceptions.Exit(exc.exit_code) from exc
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            # The reader went away (``zkstore jobs logs JOB | head``): a quiet end, as for
            # every Unix tool; what is left in stdout's buffer goes nowhere at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        # The last line of defence of "never a traceback": a bug must not print one either.
        except Exception as exc:
            logger.debug("internal error", exc_info=True)
            raise OperationFailed(
                f"internal error: {type(exc).__name__}: {exc} (run with -vv for the traceback)"
            ) from exc


class DevCommand(click.Command):
    """A development command, imported by name only when it runs (or shows its own help): the
    production command line never imports :mod:`zkstore.dev` or :mod:`recovery.dev` (checked by
    the import contract in setup.cfg)."""

    def __init__(self, name: str, target: str, short_help: str) -> None:
        super().__init__(name, short_help=short_help, add_help_option=False)
        self.target = target

    def load(self) -> click.Command:
        module, _, attr = self.target.partition(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command), self.target
        return command

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        return self.load().make_context(info_name, args, parent, **extra)


class OperationFailed(click.ClickException):
    """The operation failed: one line on stderr, exit code 1."""

    exit_code = EXIT_FAILED

    def show(self, file: Any = None) -> None:
        click.echo(f"zkstore: error: {self.format_message()}", err=True)


class UsageFailure(click.ClickException):
    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"zkstore: usage error: {self.format_message()}", err=True)


@dataclass(frozen=True)
class TakenSecrets:
    """The secret variables the console script took out of its environment as it started
    (:func:`zkstore.payloads.secrecy.take_from_environment`), for the command to build its
    configuration from: click's ``obj`` of the root context."""

    values: Mapping[str, str] = field(default_factory=dict, repr=False)


def command_environment() -> Mapping[str, str]:
    """The environment a command's configuration is read from: ``os.environ`` and the secret
    variables taken out of it at the start (none when the command runs inside another program,
    a test's click runner: then they are still in ``os.environ``)."""
    ctx = click.get_current_context(silent=True)
    taken = ctx.find_object(TakenSecrets) if ctx is not None else None
    return {**os.environ, **taken.values} if taken is not None else os.environ


@dataclass
class Connection:
    """The connection options of one command, turned into a validated config on first use."""

    options: dict[str, Any] = field(default_factory=dict)
    #: where ``ZKSTORE_*`` are read from (:func:`command_environment`)
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ, repr=False)
    _config: StoreConfig | None = None

    @property
    def config(self) -> StoreConfig:
        if self._config is None:
            opts = dict(self.options)
            pairs = opts.pop("storage_option", ()) or ()
            auth_file = opts.pop("zk_auth_file", None)
            if auth_file is not None:
                opts["zk_auth"] = read_secret_file(auth_file, "--zk-auth-file")
            key_file = opts.pop("signing_key_file", None)
            if key_file is not None:
                opts["signing_key"] = read_secret_file(key_file, "--signing-key-file")
            opts["zk_read_acl"] = opts.get("zk_read_acl") or None
            self._config = StoreConfig.from_env(
                self.environ, storage_options=parse_storage_options(pairs) or None, **opts
            )
        return self._config


def connection_options(func: F) -> F:
    """Add --zk, --root, --cluster-id, --storage, --storage-option, --store-timeout,
    --zk-auth-file, --zk-read-acl and --signing-key-file to a command.

    Each falls back to its ``ZKSTORE_*`` variable, then to the default; flags win. No secret is
    ever a flag's value or shown as a default: credentials come from ``ZKSTORE_ZK_AUTH`` or a
    file named by ``--zk-auth-file``, the signing key from ``ZKSTORE_SIGNING_KEY`` or a file
    named by ``--signing-key-file`` (:func:`zkstore.payloads.secrecy.read_secret_file`).

    ``--timeout``, the deadline's old spelling on these commands, is still accepted (hidden),
    with a warning on stderr: across the command line ``--timeout`` is a run's time limit
    (``submit``, ``schedules create``, ``jobs resume``).
    """
    return _connection_options(func, old_spelling=True)


def store_timeout_connection_options(func: F) -> F:
    """:func:`connection_options` without the deadline's old spelling: for the commands whose
    ``--timeout`` is a run's time limit (``submit``, ``schedules create``, ``jobs resume``)
    or that never took it (``jobs stop``)."""
    return _connection_options(func, old_spelling=False)


#: What the deadline of one ZooKeeper or storage operation may be, in seconds.
STORE_TIMEOUT_RANGE = (0.1, 600.0)
OLD_TIMEOUT_WARNING = (
    "zkstore: warning: --timeout as the deadline of one ZooKeeper or storage operation is "
    "deprecated: use --store-timeout (--timeout is a run's time limit, as in submit)"
)


def _connection_options(func: F, *, old_spelling: bool) -> F:
    """See :func:`connection_options`."""
    deadline = Duration(STORE_TIMEOUT_RANGE)
    options = [
        click.option(
            "--zk",
            "zk_hosts",
            metavar="HOST:PORT[,...]",
            help=f"ZooKeeper connect string [env {ENV_VARS['zk_hosts']}; default 127.0.0.1:2181]",
        ),
        click.option(
            "--root", help=f"ZooKeeper root path [env {ENV_VARS['root']}; default /zkstore]"
        ),
        click.option(
            "--cluster-id",
            help=f"cluster id under the root [env {ENV_VARS['cluster_id']}; default 'default']",
        ),
        click.option(
            "--storage",
            "storage_url",
            metavar="URL",
            help=(
                "payload storage, any fsspec URL: file:///dir, s3://bucket/prefix "
                f"[env {ENV_VARS['storage_url']}; default ~/.local/share/zkstore/storage]"
            ),
        ),
        click.option(
            "--storage-option",
            multiple=True,
            metavar="KEY=VALUE",
            help="fsspec storage option, repeatable (endpoint_url=http://minio:9000); "
            "FSSPEC_S3_* variables work too",
        ),
        click.option(
            "--store-timeout",
            type=deadline,
            metavar="DURATION",
            help="deadline of one ZooKeeper or storage operation (5s, 1m; a plain number is "
            "seconds) [default 5s]",
        ),
        click.option(
            "--zk-auth-file",
            metavar="FILE",
            help="file holding the ZooKeeper credentials, in the form of "
            f"{ENV_VARS['zk_auth']} (user:password for digest, or sasl:MECHANISM:...) "
            f"[env {ENV_VARS['zk_auth']} holds them directly]",
        ),
        click.option(
            "--zk-read-acl",
            multiple=True,
            metavar="SCHEME:ID",
            help="ZooKeeper id granted read-only access to every node zkstore creates, "
            "repeatable (digest:monitor:HASH, sasl:monitor) "
            f"[env {ENV_VARS['zk_read_acl']}, comma-separated]",
        ),
        click.option(
            "--signing-key-file",
            metavar="FILE",
            help="file holding the cluster's signing key (its first line), readable by its "
            f"owner (and group) only [env {ENV_VARS['signing_key']} holds it directly]",
        ),
    ]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        names = (
            "zk_hosts",
            "root",
            "cluster_id",
            "storage_url",
            "storage_option",
            "zk_auth_file",
            "zk_read_acl",
            "signing_key_file",
        )
        given = {n: kwargs.pop(n) for n in names}
        given["timeout"] = kwargs.pop("store_timeout")
        old = kwargs.pop("old_timeout", None)
        if old is not None:
            click.echo(OLD_TIMEOUT_WARNING, err=True)
            if given["timeout"] is None:
                given["timeout"] = old
        connection = Connection(given, command_environment())
        return func(*args, connection=connection, **kwargs)

    if old_spelling:
        options.append(click.option("--timeout", "old_timeout", type=deadline, hidden=True))
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


#: ``--wait-timeout`` of ``jobs wait`` and ``submit --wait``.
wait_timeout_option = click.option(
    "--wait-timeout",
    type=Duration(),
    metavar="DURATION",
    help="stop waiting after this long (30s, 10m, 2h): exit 7, the job goes on",
)


@contextmanager
def progress(items: int, label: str) -> Iterator[Callable[[int], None]]:
    """A progress bar on a terminal for long runs; silent when stderr is not a terminal."""
    if items < 50 or not sys.stderr.isatty():
        yield lambda n: None
        return
    with click.progressbar(length=items, label=label, file=sys.stderr) as bar:
        yield bar.update


def setup_logging(verbose: int) -> None:
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)-7s %(name)s: %(message)s", stream=sys.stderr
    )
    # kazoo narrates every reconnect attempt; the command's own error line says what matters.
    kazoo_level = {0: logging.ERROR, 1: logging.WARNING}.get(verbose, logging.DEBUG)
    logging.getLogger("kazoo").setLevel(kazoo_level)


class LazyGroup(ZkStoreGroup):
    """The root group: each command named with the one module (or package) of its noun that
    defines it with all its verbs, imported when the command is used (its run, its ``--help``, a
    usage error inside it), never before.

    ``zkstore --version``, ``--help`` and a usage error at the top import click and this module
    only: no ZooKeeper client, no storage, no runtime (issue 27: a command line that answers at
    once). The table is :data:`recovery.cli.main.COMMANDS`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, tuple[str, str]] = {}

    def add_lazy(self, name: str, module: str, short_help: str) -> None:
        """Name a command that ``module`` defines on this group, with its one-line help."""
        self.lazy[name] = (module, short_help)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            importlib.import_module(self.lazy[cmd_name][0])  # registers its commands (idempotent)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list of ``--help`` from the table: showing it imports no command."""
        limit = formatter.width - 6 - max(len(n) for n in self.list_commands(ctx))
        rows = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is not None and command.hidden:
                continue
            text = command.get_short_help_str(limit) if command else self.lazy[name][1]
            rows.append((name, text))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="more logging on stderr (-vv for everything)")
@click.version_option(
    __version__,
    package_name="zkstore",
    prog_name="zkstore",
    message=f"%(prog)s %(version)s ({protocol.describe()})",
)
def cli(verbose: int) -> None:
    """zkstore: a high-availability job store and recovery runtime for PySpark.

    Job definitions and checkpoints live in object storage; ZooKeeper keeps small verified
    handles to them. Daemons elect a leader that runs every job and resubmits what needs it
    after a failover.

    Connection options (--zk, --storage, ...) belong to each command and fall back to the
    ZKSTORE_* environment variables.
    """
    setup_logging(verbose)
