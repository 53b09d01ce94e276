"""``zkstore daemon``: run the recovery daemon on this host (imported only when the command is
used: the runtime's settings and the daemon's options cost nothing to other commands)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

import click

from recovery.cli.artifact_options import artifact_root_option, with_roots
from recovery.cli.base import Connection, cli, command_environment, connection_options
from recovery.cli.bounds import bounds_from, bounds_options
from recovery.cli.lifecycle_options import daemon_notify_option
from recovery.cli.types import Duration, Retention
from recovery.member.driveruser import check_apart
from recovery.settings import (
    API_TOKEN_ENV,
    DEFAULT_HTTP,
    MAX_WARM_UP_PASSES,
    READ_TOKEN_ENV,
    WARM_UP_PASSES,
    DaemonSettings,
    api_token_from_env,
    api_tokens_from_env,
    default_daemon_id,
    driver_users,
    parse_allowed_hosts,
    parse_http_address,
    spark_master_from_env,
)
from recovery.shared.fleet_view import parse_labels
from zkstore.config import ENV_VARS, SECRET_ENV_VARS
from zkstore.lifecycle.destinations import Destinations


@cli.command()
@connection_options
@click.option(
    "--spark-master",
    help="Spark master of the jobs: local[N], spark://host:7077, yarn, k8s://... "
    "[env ZKSTORE_SPARK_MASTER; default local[2]]",
)
@click.option(
    "--session-timeout",
    type=click.FloatRange(2, 600),
    default=10.0,
    show_default=True,
    help="ZooKeeper session timeout, seconds: how long a dead leader keeps its jobs waiting",
)
@click.option(
    "--id",
    "daemon_id",
    help="name of this daemon in the fleet, unique among live daemons (give each daemon of one "
    "host its own) [default: the host name]",
)
@click.option(
    "--max-drivers",
    type=click.IntRange(1),
    help="driver slots of this daemon: attempts the leader may place here at once "
    "[default: from this host: 2 per core, 1 GiB of memory each after 1 GiB for the daemon, "
    "at most 64; cgroup CPU quotas and memory limits count; the daemon logs the number]",
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    help="a label of this daemon, repeatable; jobs submitted with --require KEY=VALUE only "
    "run on daemons that have it",
)
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False),
    help="where driver logs go on this host, one file per attempt (each is also shipped to "
    "storage: zkstore jobs logs) [default: .logs in the work directory]",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False),
    help="where drivers run, one fresh directory per attempt holding the job's shipped files "
    "and one beside it for the Spark driver's temporary files, shuffle blocks included unless "
    "spark.local.dir says otherwise (both removed when the attempt ends), and the launch "
    "records a restarted daemon adopts its drivers by; keep it across restarts, on a disk "
    "with room for shuffle data [default: <tmp>/zkstore-<uid>/<cluster>-<id>/work]",
)
@click.option(
    "--restart-backoff",
    type=click.FloatRange(0.01),
    default=1.0,
    show_default=True,
    help="seconds before retrying a failed job; doubles per failure, capped at 60 s",
)
@click.option(
    "--reconcile-interval",
    type=click.FloatRange(0.5, 3600),
    default=10.0,
    show_default=True,
    help="seconds between full passes over every job when leading (events such as a "
    "submission, a driver's exit or a cancel are handled at once regardless)",
)
@click.option(
    "--strict-acl",
    is_flag=True,
    help="refuse to start if the cluster root's ZooKeeper ACL lets anyone change it "
    "(default: a loud warning)",
)
@click.option(
    "--keep-results",
    type=Retention(),
    default="7d",
    show_default=True,
    metavar="DURATION|forever",
    help="how long the leader keeps a finished job's result (30m, 12h, 7d): until then its id "
    "is refused at submission, after that the result is deleted and the id may run again",
)
@click.option(
    "--keep-logs",
    type=Duration(),
    default="7d",
    show_default=True,
    help="how long a finished job's driver logs stay in storage (zkstore jobs logs) before "
    "the leader removes them; never longer than the job's result (--keep-results)",
)
@click.option(
    "--http",
    "http",
    metavar="HOST:PORT|off",
    help="where to serve the HTTP API, /metrics and the status page; off to serve none "
    f"[env {ENV_VARS['http']}; default {DEFAULT_HTTP}]. Changes (POST) need {API_TOKEN_ENV} "
    f"set; with {READ_TOKEN_ENV} set, so do job details, logs and control.",
)
@click.option(
    "--http-allowed-hosts",
    "http_allowed_hosts",
    multiple=True,
    metavar="NAME,...",
    help="host names the HTTP side answers to (any other Host header: 421, against DNS "
    "rebinding); .example.com for a domain, * for any; localhost and IP addresses are always "
    f"answered [env {ENV_VARS['http_allowed_hosts']}; default: the name in --http]",
)
@click.option(
    "--launch-timeout",
    type=Duration(),
    default="60s",
    show_default=True,
    help="how long a placed attempt's driver may take to take its running node; a driver "
    "that holds none this long after its placement and left no outcome (never started, or "
    "lost its session: SIGSTOPped, frozen) is ended and its attempt counted as lost",
)
@click.option(
    "--end-grace",
    type=Duration(),
    default="30s",
    show_default=True,
    help="between the SIGTERM and the SIGKILL (of its whole process group) of a driver the "
    "leader ended: over its --timeout or --progress-timeout, or stopped (zkstore jobs stop)",
)
@click.option(
    "--cancel-grace",
    type=Duration(),
    default="30s",
    show_default=True,
    help="how long a cancelled job's driver has to stop by itself (its code sees "
    "ctx.cancelled) before it records CANCELLED and exits anyway",
)
@click.option(
    "--api-token-file",
    metavar="FILE",
    help="file holding the HTTP API's change tokens, one a line: TOKEN (the cluster-wide "
    "token, which does everything) or TOKEN pool=NAME[,NAME...] (a token that lists, reads, "
    "cancels and controls only the jobs of those pools; with one, the reads a read token guards "
    f"are guarded) [env {API_TOKEN_ENV}: the cluster-wide token alone]",
)
@click.option(
    "--api-read-token-file",
    metavar="FILE",
    help=f"file holding the HTTP API's read token (its first line) [env {READ_TOKEN_ENV}]",
)
@click.option(
    "--driver-user",
    "driver_user_names",
    multiple=True,
    metavar="USER[,USER...]",
    envvar=ENV_VARS["driver_users"],
    help="run every driver (its Spark JVM and job code) as USER, never as the daemon's user "
    "(needs root, or CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_DAC_OVERRIDE and CAP_KILL); "
    "with several users, each running driver gets one no other process uses, what one left "
    "outside its attempt is removed before the next gets it, and --max-drivers is at most "
    f"their number; no two daemons of a host may share a user [env {ENV_VARS['driver_users']}]",
)
@click.option(
    "--jobs-may-read-secrets",
    is_flag=True,
    envvar="ZKSTORE_JOBS_MAY_READ_SECRETS",
    help="start even though drivers run as this daemon's own user (no --driver-user) while "
    "it holds secrets (signing key, API tokens, ZooKeeper credentials): job code can then "
    "read them from any zkstore process of that user as it starts; refused without this "
    "[env ZKSTORE_JOBS_MAY_READ_SECRETS=1]",
)
@click.option(
    "--warm-drivers",
    type=click.IntRange(0),
    envvar="ZKSTORE_WARM_DRIVERS",
    help="Spark driver JVMs kept started and warmed ahead of need: an attempt whose JVM-level "
    "settings are the daemon's defaults takes one and computes within a second of its start "
    "(each serves one attempt; the next is started 2 s after it was taken); 0 for none [env "
    "ZKSTORE_WARM_DRIVERS; default: from this host, 1 per 2 cores and 1 GiB of memory each "
    "beside the driver slots', at most 4; local[N] and spark:// masters only]",
)
@click.option(
    "--warm-up-passes",
    type=click.IntRange(0, MAX_WARM_UP_PASSES),
    default=WARM_UP_PASSES,
    show_default=True,
    envvar="ZKSTORE_WARM_UP_PASSES",
    help="how often each warm driver's warm-up runs its queries before it is ready: each pass "
    "costs about 1.3 s of a core per warm JVM (2.9 s with none: its start and a context) and "
    "leaves more of Spark compiled for the attempt that takes it (a host loss's first Spark "
    "action came 0.2 s sooner with 2 than with 1, none sooner with 4) [env "
    "ZKSTORE_WARM_UP_PASSES]",
)
@click.option(
    "--class-data",
    metavar="DIR|off",
    envvar="ZKSTORE_CLASS_DATA",
    help="where this daemon makes (in the background, once per pyspark version, Java and class "
    "path) and keeps the class-data archive its Spark drivers map Spark's classes from; off: "
    "they load them from the jars [env ZKSTORE_CLASS_DATA; default (auto): this user's cache "
    "<tmp>/zkstore-<uid>/class-data, kept at a clean stop; with --work-dir, "
    "<work dir>/.class-data]",
)
@daemon_notify_option
@artifact_root_option
@bounds_options
@click.pass_context
def daemon(
    ctx: click.Context,
    /,
    connection: Connection,
    spark_master: str | None,
    session_timeout: float,
    daemon_id: str | None,
    max_drivers: int | None,
    log_dir: str | None,
    work_dir: str | None,
    restart_backoff: float,
    reconcile_interval: float,
    labels: tuple[str, ...],
    strict_acl: bool,
    keep_logs: float,
    http: str | None,
    http_allowed_hosts: tuple[str, ...],
    artifact_roots: tuple[str, ...],
    keep_results: float | None,
    launch_timeout: float,
    end_grace: float,
    cancel_grace: float,
    api_token_file: str | None,
    api_read_token_file: str | None,
    driver_user_names: tuple[str, ...],
    jobs_may_read_secrets: bool,
    warm_drivers: int | None,
    warm_up_passes: int,
    class_data: str | None,
    notify: str | None,
    **limits: Any,
) -> None:
    """Run the recovery daemon on this host (start one on two or more hosts).

    Every daemon runs drivers: it offers --max-drivers slots (and its --label labels) to the
    fleet. The daemons elect a leader, which places each job's attempt on a daemon with a free
    slot (least loaded first), restarts failed ones with backoff from their latest checkpoint,
    re-places the jobs of a daemon that is lost, and cleans up finished ones. When the leader
    dies, another daemon takes over within the session timeout (at once on SIGTERM) and adopts
    the running drivers: nothing restarts. A daemon started again with its --id adopts the
    drivers it left running (SIGTERM, SIGKILL or a crash): no job notices the restart.
    """
    from recovery.daemon import Daemon

    _log_at_info(ctx)
    explicit_http = http or os.environ.get(ENV_VARS["http"])
    allowed_hosts = http_allowed_hosts or os.environ.get(ENV_VARS["http_allowed_hosts"])
    store = with_roots(connection.config, artifact_roots).with_changes(
        session_timeout=session_timeout
    )
    environ = command_environment()
    bounds = bounds_from(limits)
    if notify:
        Destinations.parse(bounds.notify_allowed).check_url(notify)
    users = driver_users(driver_user_names)
    if users:
        from recovery.member.driveruser import check_privileges

        check_privileges()
    if max_drivers is None:  # after the checks: a usage error stays one line
        from recovery.capacity import default_max_drivers, explain, read_host_size

        host = read_host_size()
        max_drivers = default_max_drivers(host)
        logging.getLogger(__name__).info("--max-drivers not given: %s", explain(host))
        if len(users) > 1 and max_drivers > len(users):
            max_drivers = len(users)
            logging.getLogger(__name__).info(
                "--max-drivers: %d, one per --driver-user", max_drivers
            )
    master = spark_master_from_env(spark_master)
    warm_drivers = _warm_drivers(warm_drivers, max_drivers, master)
    api_token, api_pool_tokens = api_tokens_from_env(environ, file=api_token_file)
    settings = DaemonSettings(
        store=store,
        daemon_id=daemon_id or default_daemon_id(),
        spark_master=master,
        max_drivers=max_drivers,
        log_dir=log_dir,
        work_dir=work_dir,
        restart_backoff=restart_backoff,
        max_backoff=max(60.0, restart_backoff),
        reconcile_interval=reconcile_interval,
        labels=parse_labels(labels),
        strict_acl=strict_acl,
        keep_logs=keep_logs,
        http=parse_http_address(explicit_http or DEFAULT_HTTP),
        http_required=explicit_http is not None,
        api_token=api_token,
        api_pool_tokens=api_pool_tokens,
        api_read_token=api_token_from_env(
            environ, variable=READ_TOKEN_ENV, file=api_read_token_file
        ),
        http_allowed_hosts=parse_allowed_hosts(allowed_hosts) if allowed_hosts else None,
        keep_results=keep_results,
        end_grace=end_grace,
        cancel_grace=cancel_grace,
        start_timeout=launch_timeout,
        notify=(notify,) if notify else (),
        driver_users=users,
        warm_drivers=warm_drivers,
        warm_up_passes=warm_up_passes,
        class_data=_class_data(class_data),
        bounds=bounds,
    )
    check_apart(settings, jobs_may_read_secrets)
    _deprecated_variables(
        environ,
        {
            API_TOKEN_ENV: api_token_file,
            READ_TOKEN_ENV: api_read_token_file,
            ENV_VARS["signing_key"]: connection.options.get("signing_key_file"),
            ENV_VARS["zk_auth"]: connection.options.get("zk_auth_file"),
        },
    )
    process = Daemon(settings)  # what it checks at its start refuses it before it says it runs
    click.echo(
        f"zkstore daemon {settings.daemon_id}: ZooKeeper {store.zk_hosts}, storage "
        f"{store.storage_url}, Spark {settings.spark_master}",
        err=True,
    )
    sys.exit(process.run())


def _deprecated_variables(environ: Mapping[str, str], files: Mapping[str, str | None]) -> None:
    """Say which secrets came from the environment, no file given instead (deprecated: a file
    is read only once the process is undumpable, and never reaches a child by mistake)."""
    for name in sorted(SECRET_ENV_VARS):
        if environ.get(name) and not files.get(name):
            logging.getLogger(__name__).warning(
                "%s: a secret in the environment is deprecated; give it as a file "
                "(--signing-key-file, --zk-auth-file, --api-token-file, "
                "--api-read-token-file: docs/operating.md)",
                name,
            )


def _warm_drivers(given: int | None, max_drivers: int, master: str) -> int:
    """``--warm-drivers``, or its default from this host (0 for a master warm drivers do not
    serve)."""
    if given is not None:
        return given
    from recovery.capacity import default_warm_drivers, explain_warm, read_host_size
    from recovery.settings import is_warm_master

    log = logging.getLogger(__name__)
    if not is_warm_master(master):
        log.info("--warm-drivers not given: none for the Spark master %s", master)
        return 0
    host = read_host_size()
    log.info("--warm-drivers not given: %s", explain_warm(host, max_drivers))
    return default_warm_drivers(host, max_drivers)


def _class_data(value: str | None) -> str:
    """``--class-data``: ``off``, a directory (made absolute), or ``auto`` (the default: the
    user's cache, or the work directory's: :func:`recovery.member.launcher.class_data_dir`)."""
    if value is None or value.strip().lower() in ("", "auto"):
        return "auto"
    if value.strip().lower() == "off":
        return "off"
    return os.path.abspath(value)


def _log_at_info(ctx: click.Context) -> None:
    """A daemon says what an operator needs at its default level: leadership gained and lost,
    each job started, adopted, restarted, finished or quarantined (INFO and up); ``-v`` adds
    DEBUG. Other commands keep their quiet default (WARNING)."""
    root = logging.getLogger()
    if root.level > logging.INFO:
        root.setLevel(logging.INFO)
