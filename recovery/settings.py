"""Settings of the recovery runtime, validated at the edge and passed down explicitly."""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from zkstore.config import ENV_VARS, StoreConfig
from zkstore.errors import ConfigError

DEFAULT_SPARK_MASTER = "local[2]"
#: How long the result of a finished job is kept (and its id refused) by default: 7 days.
DEFAULT_KEEP_RESULTS = 7 * 86400.0


def default_daemon_id() -> str:
    """The host name, made a valid id: stable across restarts, so that a drain mark outlives
    them. Several daemons on one host need ``--id`` each."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()).strip("-._")[:60] or "host"


def spark_master_from_env(explicit: str | None, environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return explicit or env.get(ENV_VARS["spark_master"]) or DEFAULT_SPARK_MASTER


@dataclass(frozen=True)
class DaemonSettings:
    """How one recovery daemon behaves.

    ``restart_backoff`` is the first delay before a failed job's next attempt; it doubles per
    failure up to ``max_backoff``. ``max_drivers`` is this daemon's number of driver slots, and
    ``labels`` are what jobs submitted with ``--require`` match against. ``reconcile_interval``
    is how often the leader re-reads every job even without events (watches make the common
    path immediate). ``start_timeout`` bounds how long a placed attempt's driver may take to take
    its ``running`` node. ``strict_acl`` refuses to start when anyone may change the cluster
    root (else the daemon warns). ``keep_results`` is how long, in seconds, the leader keeps
    a finished job's result (and so refuses its id) before deleting it; None keeps them forever.
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
    log_dir: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    work_dir: str | None = None
    python: str = field(default_factory=lambda: sys.executable)
    strict_acl: bool = False
    keep_results: float | None = DEFAULT_KEEP_RESULTS

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", self.daemon_id):
            raise ConfigError(f"invalid daemon id {self.daemon_id!r}: use [A-Za-z0-9._-]")
        if self.max_drivers < 1:
            raise ConfigError("max drivers must be at least 1")
        if not 0 < self.restart_backoff <= self.max_backoff:
            raise ConfigError("restart backoff must be positive and at most the max backoff")
        if self.reconcile_interval <= 0 or self.start_timeout <= 0 or self.cancel_grace <= 0:
            raise ConfigError("intervals and timeouts must be positive")
        if self.keep_results is not None and self.keep_results <= 0:
            raise ConfigError("the retention of results must be positive (or forever)")
        if not self.spark_master:
            raise ConfigError("Spark master is empty")

    def backoff(self, failures: int) -> float:
        """Delay before the next attempt after ``failures`` failed ones (exponential, capped)."""
        return float(min(self.max_backoff, self.restart_backoff * 2 ** max(0, failures - 1)))
