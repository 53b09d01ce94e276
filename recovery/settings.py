"""Settings of the recovery runtime, validated at the edge and passed down explicitly."""

from __future__ import annotations

import ipaddress
import os
import pwd
import re
import socket
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from zkstore.cluster.cleanup import DEFAULT_KEEP_LOGS
from zkstore.cluster.cluster_settings import ClusterSettings, settings_digest
from zkstore.cluster.pools import check_name
from zkstore.config import ENV_VARS, StoreConfig
from zkstore.errors import ConfigError
from zkstore.lifecycle.attempt_limits import least_limits
from zkstore.payloads.secrecy import read_secret_file, read_secret_lines
from zkstore.schedules.schedule_limits import DEFAULT_MIN_INTERVAL

__all__ = [
    "ANY_HOST",
    "API_TOKEN_ENV",
    "DEFAULT_HTTP",
    "DEFAULT_KEEP_RESULTS",
    "DEFAULT_SPARK_MASTER",
    "MAX_WARM_UP_PASSES",
    "MIN_TOKEN_CHARS",
    "READ_TOKEN_ENV",
    "TOKEN_FILE_OPTIONS",
    "WARM_UP_PASSES",
    "Bounds",
    "DaemonSettings",
    "DriverUser",
    "HttpAddress",
    "PoolToken",
    "api_token_from_env",
    "api_tokens_from_env",
    "default_daemon_id",
    "driver_users",
    "is_address",
    "is_warm_master",
    "normal_host",
    "parse_allowed_hosts",
    "parse_http_address",
    "spark_master_from_env",
]

DEFAULT_SPARK_MASTER = "local[2]"
#: Where a daemon serves HTTP unless told otherwise: loopback only, so nothing is exposed by
#: default; ``--http off`` turns it off, ``--http 0.0.0.0:8780`` opens it to the network.
DEFAULT_HTTP = "127.0.0.1:8780"
#: The bearer token of the HTTP API's changes (cancel, control): a secret, from the environment
#: only (a flag would show in ``ps``).
API_TOKEN_ENV = ENV_VARS["api_token"]
#: The bearer token of the HTTP API's reads that may carry secrets (job details, logs,
#: control): optional, from the environment only; the change token grants them too.
READ_TOKEN_ENV = ENV_VARS["api_read_token"]
MIN_TOKEN_CHARS = 16
_ADDRESS = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>[0-9]{1,5})")
#: How long the result of a finished job is kept (and its id refused) by default: 7 days.
DEFAULT_KEEP_RESULTS = 7 * 86400.0
#: How often a warm driver's warm-up runs its queries by default, and at most
#: (``--warm-up-passes``: :mod:`recovery.member.warm_jvms.warmup`).
WARM_UP_PASSES = 2
MAX_WARM_UP_PASSES = 10


def default_daemon_id() -> str:
    """The host name, made a valid id: stable across restarts, so that a drain mark outlives
    them. Several daemons on one host need ``--id`` each."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()).strip("-._")[:60] or "host"


def is_warm_master(master: str) -> bool:
    """Whether warm drivers serve ``master``: local mode and a standalone master, whose
    scheduler a context makes by itself (:mod:`recovery.shared.jvm_settings`)."""
    return (
        re.fullmatch(r"local(\[[0-9]+\]|\[\*\]|\[[0-9*]+, *[0-9]+\])?|spark://\S+", master)
        is not None
    )


def spark_master_from_env(explicit: str | None, environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return explicit or env.get(ENV_VARS["spark_master"]) or DEFAULT_SPARK_MASTER


@dataclass(frozen=True)
class HttpAddress:
    """Where a daemon serves HTTP (port 0: any free port)."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_http_address(value: str) -> HttpAddress | None:
    """``HOST:PORT`` (``[::1]:8780`` for IPv6), or None for ``off``."""
    if value.strip().lower() in {"off", "none", "no", "false", ""}:
        return None
    match = _ADDRESS.fullmatch(value.strip())
    if match is None or int(match.group("port")) > 65535:
        raise ConfigError(f"invalid HTTP address {value!r}: want HOST:PORT, or off")
    return HttpAddress(match.group("host").strip("[]"), int(match.group("port")))


#: The option that names a file holding each token instead of its variable.
TOKEN_FILE_OPTIONS = {API_TOKEN_ENV: "--api-token-file", READ_TOKEN_ENV: "--api-read-token-file"}


def api_token_from_env(
    environ: Mapping[str, str] | None = None,
    *,
    variable: str = API_TOKEN_ENV,
    file: str | None = None,
) -> str | None:
    """The API token in ``variable`` (the change token by default; :data:`READ_TOKEN_ENV` for
    the read token), or in ``file`` if one is given (its option,
    :data:`TOKEN_FILE_OPTIONS`, wins over the variable), or None if unset; a token too short to
    be safe is refused (and never shown: the message names where it came from, not its value)."""
    if file is not None:
        source = f"{TOKEN_FILE_OPTIONS[variable]} {file}"
        token: str | None = read_secret_file(file, TOKEN_FILE_OPTIONS[variable])
    else:
        source, token = variable, (os.environ if environ is None else environ).get(variable) or None
    if token is not None and len(token.strip()) < MIN_TOKEN_CHARS:
        raise ConfigError(f"{source} is too short: use at least {MIN_TOKEN_CHARS} characters")
    return token.strip() if token is not None else None


@dataclass(frozen=True)
class PoolToken:
    """A change token of the HTTP API that acts on the jobs of ``pools`` only (a line
    ``TOKEN pool=etl,reporting`` of ``--api-token-file``)."""

    token: str = field(repr=False)
    pools: frozenset[str]


def api_tokens_from_env(
    environ: Mapping[str, str] | None = None, *, file: str | None = None
) -> tuple[str | None, tuple[PoolToken, ...]]:
    """The API's cluster-wide change token and its pool-scoped ones.

    Without ``file``: :data:`API_TOKEN_ENV` alone, as :func:`api_token_from_env` reads it, and
    no scoped token. With ``file`` (``--api-token-file``): each line (blank lines and ``#``
    comments aside) is ``TOKEN`` (the cluster-wide token: one at most) or ``TOKEN
    pool=NAME[,NAME...]`` (a token of those pools). Raises ConfigError naming the line, never
    its token: a token too short, a word other than ``pool=``, a pool name that cannot be one,
    a token given twice."""
    if file is None:
        return api_token_from_env(environ), ()
    option = TOKEN_FILE_OPTIONS[API_TOKEN_ENV]
    cluster: str | None = None
    scoped: list[PoolToken] = []
    seen: set[str] = set()
    for number, line in read_secret_lines(file, option):
        where = f"{option} {file} line {number}"
        token, *words = line.split()
        if len(token) < MIN_TOKEN_CHARS:
            raise ConfigError(f"{where}: the token is too short: use {MIN_TOKEN_CHARS} characters")
        if token in seen:
            raise ConfigError(f"{where}: the token is given twice")
        seen.add(token)
        if not words:
            if cluster is not None:
                raise ConfigError(f"{where}: a second cluster-wide token (give it pool=...)")
            cluster = token
            continue
        if len(words) > 1 or not words[0].startswith("pool="):
            raise ConfigError(f"{where}: after the token, only pool=NAME[,NAME...]")
        try:
            names = frozenset(check_name(n) for n in words[0].removeprefix("pool=").split(","))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        scoped.append(PoolToken(token, names))
    return cluster, tuple(scoped)


# -- the bounds on what submitters send (invariant 15, issue 44) -------------------------------


@dataclass(frozen=True)
class Bounds:
    """What one submitter may cost the cluster (the daemon's ``--schedule-*``, ``--notify-*``
    and ``--http-*`` limits; :mod:`recovery.cli.bounds`).

    ``schedule_min_interval``: the fewest seconds between two windows of a schedule the leader
    fires; ``schedule_fire_budget``: windows one pass of the leader fires over every schedule.
    ``notify_allowed``: notification destinations allowed although not global (names,
    addresses, CIDR blocks: :mod:`zkstore.lifecycle.destinations`); ``notify_per_job``: a
    job's undelivered events kept at most (its outcome always is); ``notify_per_host``: POSTs
    at once to one receiver. ``http_max_connections``: open HTTP connections at most (more are
    answered 503 and closed); ``http_timeout``: the longest a connection may take to send a
    request or to take an answer; ``http_workers``: threads that serve the HTTP side's reads.
    """

    schedule_min_interval: int = DEFAULT_MIN_INTERVAL
    schedule_fire_budget: int = 20
    notify_allowed: tuple[str, ...] = ()
    notify_per_job: int = 100
    notify_per_host: int = 2
    http_max_connections: int = 128
    http_timeout: float = 15.0
    http_workers: int = 4

    def __post_init__(self) -> None:
        counts = (
            self.schedule_min_interval,
            self.schedule_fire_budget,
            self.notify_per_job,
            self.notify_per_host,
            self.http_max_connections,
            self.http_workers,
        )
        if min(counts) < 1 or self.http_timeout <= 0:
            raise ConfigError("the --schedule-*, --notify-* and --http-* bounds must be positive")


@dataclass(frozen=True)
class DriverUser:
    """A Unix user this daemon's drivers run as (``zkstore daemon --driver-user``), looked up
    once at the start: its ids, its groups (the supplementary ones of the group database, as a
    login gets them) and its home."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str


def driver_users(values: Iterable[str]) -> tuple[DriverUser, ...]:
    """The users of ``--driver-user`` (repeatable, comma-separated names), each looked up; a
    user that does not exist, root, or a name given twice is refused (ConfigError)."""
    names = [n.strip() for value in values for n in value.split(",") if n.strip()]
    if len(set(names)) != len(names):
        raise ConfigError("--driver-user names a user twice")
    users = []
    for name in names:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise ConfigError(f"--driver-user {name[:40]!r}: no such user on this host") from None
        if entry.pw_uid == 0:
            raise ConfigError(f"--driver-user {name}: drivers would run as root")
        if entry.pw_uid == os.geteuid():
            raise ConfigError(f"--driver-user {name}: drivers would run as this daemon's user")
        groups = tuple(sorted(set(os.getgrouplist(name, entry.pw_gid))))
        users.append(DriverUser(name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir or "/"))
    return tuple(users)


@dataclass(frozen=True)
class DaemonSettings:
    """How one recovery daemon behaves.

    ``restart_backoff`` is the first delay before a failed job's next attempt; it doubles per
    failure up to ``max_backoff``. ``max_drivers`` is this daemon's number of driver slots, and
    ``labels`` are what jobs submitted with ``--require`` match against. ``reconcile_interval``
    is how often the leader re-reads every job even without events (watches make the common
    path immediate). ``start_timeout`` bounds how long a placed attempt's driver may take to take
    its ``running`` node. ``strict_acl`` refuses to start when anyone may change the cluster
    root (else the daemon warns). ``keep_logs`` is how long a finished job's driver logs stay in
    storage (never longer than its result); ``keep_results`` is how long, in seconds, the leader
    keeps a finished job's result (and so refuses its id) before deleting it; None keeps them
    forever. ``http`` is where the daemon serves its HTTP API (None: not at all); if it is not
    ``http_required``, an address in use only costs a warning. ``api_token`` enables the API's
    changes; ``api_read_token``, when set, guards the reads that may carry secrets;
    ``api_pool_tokens`` act on the jobs of their pools only (and guard those reads as well).
    ``http_allowed_hosts`` are the host names the HTTP side answers to besides ``localhost`` and
    addresses (None: the name in ``http``; see :mod:`recovery.observe.access`). ``driver_users``:
    the users drivers run as (none: the daemon's own); one is every driver's, several are one
    per running driver (:mod:`recovery.member.driveruser`). ``warm_drivers``: Spark driver
    JVMs kept started and warmed ahead of need (0: none), each warm-up running its queries
    ``warm_up_passes`` times (:mod:`recovery.member.warm_jvms.warmup`); ``class_data``: where
    the class-data archive of Spark's classes is made and kept (``auto``: the work directory's,
    ``off``: none; :mod:`recovery.member.warm_jvms`).
    """

    store: StoreConfig
    daemon_id: str = field(default_factory=default_daemon_id)
    spark_master: str = DEFAULT_SPARK_MASTER
    max_drivers: int = 32
    restart_backoff: float = 1.0
    max_backoff: float = 60.0
    reconcile_interval: float = 10.0
    start_timeout: float = 60.0
    cancel_grace: float = 30.0
    #: between the SIGTERM and the SIGKILL of a driver the leader ended (timeout, stuck, stop)
    end_grace: float = 30.0
    #: where every job's events are POSTed (``zkstore daemon --notify``), besides its own URL
    notify: tuple[str, ...] = ()
    log_dir: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    #: fork drivers from a process that has imported what they need (see recovery.member.forkserver)
    fork_server: bool = True
    work_dir: str | None = None
    python: str = field(default_factory=lambda: sys.executable)
    strict_acl: bool = False
    keep_logs: float = DEFAULT_KEEP_LOGS
    http: HttpAddress | None = None
    http_required: bool = False
    api_token: str | None = field(default=None, repr=False)
    #: change tokens of the HTTP API that act on the jobs of some pools only
    api_pool_tokens: tuple[PoolToken, ...] = field(default=(), repr=False)
    api_read_token: str | None = field(default=None, repr=False)
    http_allowed_hosts: tuple[str, ...] | None = None
    keep_results: float | None = DEFAULT_KEEP_RESULTS
    driver_users: tuple[DriverUser, ...] = ()
    warm_drivers: int = 0
    warm_up_passes: int = WARM_UP_PASSES
    class_data: str = "off"
    bounds: Bounds = field(default_factory=Bounds)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", self.daemon_id):
            raise ConfigError(f"invalid daemon id {self.daemon_id!r}: use [A-Za-z0-9._-]")
        if self.max_drivers < 1:
            raise ConfigError("max drivers must be at least 1")
        if not 0 < self.restart_backoff <= self.max_backoff:
            raise ConfigError("restart backoff must be positive and at most the max backoff")
        if (
            self.reconcile_interval <= 0
            or self.start_timeout <= 0
            or self.cancel_grace <= 0
            or self.end_grace <= 0
        ):
            raise ConfigError("intervals and timeouts must be positive")
        if self.keep_results is not None and self.keep_results <= 0:
            raise ConfigError("the retention of results must be positive (or forever)")
        if not self.spark_master:
            raise ConfigError("Spark master is empty")
        if self.keep_logs < 0:
            raise ConfigError("log retention must not be negative")
        if not 0 <= self.warm_drivers <= self.max_drivers:
            raise ConfigError(
                f"--warm-drivers {self.warm_drivers} is more than --max-drivers "
                f"{self.max_drivers}: a warm driver serves one attempt, and at most "
                f"{self.max_drivers} run here at once"
            )
        if self.warm_drivers and not is_warm_master(self.spark_master):
            raise ConfigError(
                f"--warm-drivers: the Spark master {self.spark_master[:60]} has spark-submit "
                "prepare its drivers (warm drivers serve local[N] and spark://); use 0"
            )
        if not 0 <= self.warm_up_passes <= MAX_WARM_UP_PASSES:
            raise ConfigError(
                f"--warm-up-passes {self.warm_up_passes}: from 0 to {MAX_WARM_UP_PASSES}"
            )
        if self.class_data not in ("auto", "off") and not os.path.isabs(self.class_data):
            raise ConfigError(f"--class-data {self.class_data[:80]!r}: give an absolute path")
        if len(self.driver_users) > 1 and self.max_drivers > len(self.driver_users):
            raise ConfigError(
                f"--max-drivers {self.max_drivers} is more than the {len(self.driver_users)} "
                "users of --driver-user: each running driver gets a user of its own (give one "
                "user for all drivers, or as many as slots)"
            )

    def backoff(self, failures: int) -> float:
        """Delay before the next attempt after ``failures`` failed ones (exponential, capped)."""
        return float(min(self.max_backoff, self.restart_backoff * 2 ** max(0, failures - 1)))

    def published(self) -> ClusterSettings:
        """What this daemon enforces as a leader, as it publishes it in ``R/settings``
        (:mod:`zkstore.cluster.cluster_settings`; not sealed yet: no leader, no digest)."""
        bounds = self.bounds
        least = least_limits(self.store.lowered_minimums).least_progress_timeout
        return ClusterSettings(
            version=None,
            schedule_min_interval=bounds.schedule_min_interval,
            schedule_fire_budget=bounds.schedule_fire_budget,
            notify_allowed_hosts=tuple(
                item.strip() for v in bounds.notify_allowed for item in v.split(",") if item.strip()
            ),
            notify_max_per_job=bounds.notify_per_job,
            notify_per_host=bounds.notify_per_host,
            progress_timeout_min_ms=round(least * 1000),
        )

    @property
    def settings_digest(self) -> str:
        """The digest of :meth:`published`'s values, which this daemon's member record carries
        (``fleet status`` compares it with the leader's record)."""
        return settings_digest(self.published().policy())


#: ``--http-allowed-hosts`` value that answers any name (behind a proxy that checks it).
ANY_HOST = "*"
_NAME = re.compile(r"\.?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")


def normal_host(name: str) -> str:
    """A host name as compared: stripped, lower case, without a trailing dot."""
    return name.strip().lower().rstrip(".")


def is_address(name: str) -> bool:
    """True for an IP address literal (``10.0.0.5``, ``[::1]``)."""
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def parse_allowed_hosts(value: str | Iterable[str]) -> tuple[str, ...]:
    """Names from ``--http-allowed-hosts`` (comma-separated, repeatable): DNS names, a
    ``.domain`` suffix, ``*``, or addresses (always allowed anyway); without ports."""
    items = value.split(",") if isinstance(value, str) else [i for v in value for i in v.split(",")]
    names = []
    for item in (normal_host(i) for i in items):
        if not item:
            continue
        if item != ANY_HOST and not is_address(item) and not _NAME.fullmatch(item):
            raise ConfigError(
                f"allowed host {item[:60]!r} is not a name (zk1.example.com), a domain "
                "(.example.com), an address, or *; give no port"
            )
        names.append(item.strip("[]"))
    if not names:
        raise ConfigError("--http-allowed-hosts names no host")
    return tuple(dict.fromkeys(names))
