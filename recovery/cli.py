"""The ``zkstore`` console script: the store's commands plus the runtime's (daemon, submit,
demo), attached to the same click group."""

from __future__ import annotations

import logging
import os
import sys

import click

from recovery.client import Client
from recovery.dev.demo import demo
from recovery.settings import (
    API_TOKEN_ENV,
    DEFAULT_HTTP,
    DaemonSettings,
    api_token_from_env,
    default_daemon_id,
    parse_http_address,
    spark_master_from_env,
)
from zkstore.cli import cli
from zkstore.cli.base import Connection, connection_options
from zkstore.cli.handles import Duration
from zkstore.cli.jobs import describe
from zkstore.config import ENV_VARS, parse_storage_options
from zkstore.errors import EXIT_CANCELLED, EXIT_FAILED
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.states import CANCELLED, SUCCEEDED


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
@click.option("--id", "daemon_id", help="name of this daemon [default: host-pid]")
@click.option(
    "--max-drivers",
    type=click.IntRange(1),
    default=32,
    show_default=True,
    help="drivers this daemon runs at once when it leads; more jobs wait",
)
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False),
    help="where driver logs go on this host, one file per attempt (each is also shipped to "
    "storage: zkstore jobs logs) [default: a temporary directory]",
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
    "--keep-logs",
    type=Duration(),
    default="7d",
    show_default=True,
    help="how long a finished job's driver logs stay in storage (zkstore jobs logs) before "
    "the leader removes them",
)
@click.option(
    "--http",
    "http",
    metavar="HOST:PORT|off",
    help="where to serve the HTTP API, /metrics and the status page; off to serve none "
    f"[env {ENV_VARS['http']}; default {DEFAULT_HTTP}]. Changes (POST) need {API_TOKEN_ENV} "
    "set.",
)
@click.pass_context
def daemon(
    ctx: click.Context,
    connection: Connection,
    spark_master: str | None,
    session_timeout: float,
    daemon_id: str | None,
    max_drivers: int,
    log_dir: str | None,
    restart_backoff: float,
    reconcile_interval: float,
    keep_logs: float,
    http: str | None,
) -> None:
    """Run the recovery daemon on this host (start one on two or more hosts).

    The daemons elect a leader. The leader runs every job in the cluster as a separate driver
    process, restarts failed ones with backoff from their latest checkpoint, and cleans up
    finished ones. When it dies, another daemon takes over within the session timeout (at once
    on SIGTERM) and adopts the running drivers or resubmits the jobs whose driver is gone.
    """
    from recovery.daemon import Daemon

    _log_at_info(ctx)
    explicit_http = http or os.environ.get(ENV_VARS["http"])
    store = connection.config.with_changes(session_timeout=session_timeout)
    settings = DaemonSettings(
        store=store,
        daemon_id=daemon_id or default_daemon_id(),
        spark_master=spark_master_from_env(spark_master),
        max_drivers=max_drivers,
        log_dir=log_dir,
        restart_backoff=restart_backoff,
        max_backoff=max(60.0, restart_backoff),
        reconcile_interval=reconcile_interval,
        keep_logs=keep_logs,
        http=parse_http_address(explicit_http or DEFAULT_HTTP),
        http_required=explicit_http is not None,
        api_token=api_token_from_env(),
    )
    click.echo(
        f"zkstore daemon {settings.daemon_id}: ZooKeeper {store.zk_hosts}, storage "
        f"{store.storage_url}, Spark {settings.spark_master}",
        err=True,
    )
    sys.exit(Daemon(settings).run())


def _log_at_info(ctx: click.Context) -> None:
    """A daemon says what an operator needs at its default level: leadership gained and lost,
    each job started, adopted, restarted, finished or quarantined (INFO and up); ``-v`` adds
    DEBUG. Other commands keep their quiet default (WARNING)."""
    root = logging.getLogger()
    if root.level > logging.INFO:
        root.setLevel(logging.INFO)


@cli.command(context_settings={"ignore_unknown_options": False})
@click.argument("target", metavar="FILE.py[:FUNCTION]")
@click.argument("args", nargs=-1, metavar="[-- ARGS...]")
@connection_options
@click.option("--job-id", help="job id [default: <file stem>-<random>]")
@click.option("--name", help="a name for people [default: the file name]")
@click.option(
    "--conf",
    "conf_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Spark configuration, repeatable",
)
@click.option("--max-attempts", type=click.IntRange(1, 1000), default=3, show_default=True)
@click.option("--wait", is_flag=True, help="follow the job to its end; exit with its outcome")
def submit(
    target: str,
    args: tuple[str, ...],
    connection: Connection,
    job_id: str | None,
    name: str | None,
    conf_pairs: tuple[str, ...],
    max_attempts: int,
    wait: bool,
) -> None:
    """Submit a PySpark job; accepted as soon as it is durable, leader or not.

    FILE.py runs an unmodified PySpark script (restarted from scratch after a failure).
    FILE.py:FUNCTION calls FUNCTION(ctx, *ARGS) with a job context: ctx.spark, ctx.job_id,
    ctx.attempt, ctx.latest_checkpoint(), ctx.checkpoint(metadata), ctx.config.

    Prints the job id. With --wait, exits 0 if the job SUCCEEDED, 1 if it FAILED,
    3 if it was CANCELLED.
    """
    conf = {k: str(v) for k, v in parse_storage_options(conf_pairs).items()}
    with Client(connection.config) as client:
        submitted = client.submit_file(
            target, list(args), job_id=job_id, name=name, conf=conf, max_attempts=max_attempts
        )
        click.echo(submitted)
        if not wait:
            return
        result = client.wait(submitted, on_change=_progress)
    message = f"{submitted}: {result.outcome} after {result.attempts} attempt(s)"
    if result.error:
        message += f": {result.error.splitlines()[-1]}"
    click.echo(message, err=True)
    if result.outcome == SUCCEEDED:
        return
    sys.exit(EXIT_CANCELLED if result.outcome == CANCELLED else EXIT_FAILED)


def _progress(snapshot: JobSnapshot) -> None:
    item = describe(snapshot)
    detail = f" (attempt {item['attempt']})" if item["attempt"] else ""
    if item["driver"]:
        detail += f" on {item['driver']['host']} pid {item['driver']['pid']}"
    click.echo(f"{snapshot.job_id}: {snapshot.state}{detail}", err=True)


cli.add_command(demo)


def main() -> None:
    cli(prog_name="zkstore")


if __name__ == "__main__":
    main()
