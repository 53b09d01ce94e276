"""The ``zkstore`` console script: the store's commands plus the runtime's (daemon, submit,
demo), attached to the same click group."""

from __future__ import annotations

import sys

import click

from recovery.client import Client
from recovery.dev.demo import demo
from recovery.settings import DaemonSettings, default_daemon_id, spark_master_from_env
from zkstore.cli import cli
from zkstore.cli.base import Connection, connection_options
from zkstore.cli.jobs import describe
from zkstore.config import parse_storage_options
from zkstore.errors import EXIT_CANCELLED, EXIT_FAILED
from zkstore.jobs.records import CANCELLED, SUCCEEDED
from zkstore.jobs.snapshot import JobSnapshot


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
    help="where driver logs go, one file per attempt [default: a temporary directory]",
)
@click.option(
    "--restart-backoff",
    type=click.FloatRange(0.01),
    default=1.0,
    show_default=True,
    help="seconds before retrying a failed job; doubles per failure, capped at 60 s",
)
@click.option(
    "--strict-acl",
    is_flag=True,
    help="refuse to start if the cluster root's ZooKeeper ACL lets anyone change it "
    "(default: a loud warning)",
)
def daemon(
    connection: Connection,
    spark_master: str | None,
    session_timeout: float,
    daemon_id: str | None,
    max_drivers: int,
    log_dir: str | None,
    restart_backoff: float,
    strict_acl: bool,
) -> None:
    """Run the recovery daemon on this host (start one on two or more hosts).

    The daemons elect a leader. The leader runs every job in the cluster as a separate driver
    process, restarts failed ones with backoff from their latest checkpoint, and cleans up
    finished ones. When it dies, another daemon takes over within the session timeout (at once
    on SIGTERM) and adopts the running drivers or resubmits the jobs whose driver is gone.
    """
    from recovery.daemon import Daemon

    store = connection.config.with_changes(session_timeout=session_timeout)
    settings = DaemonSettings(
        store=store,
        daemon_id=daemon_id or default_daemon_id(),
        spark_master=spark_master_from_env(spark_master),
        max_drivers=max_drivers,
        log_dir=log_dir,
        restart_backoff=restart_backoff,
        max_backoff=max(60.0, restart_backoff),
        strict_acl=strict_acl,
    )
    click.echo(
        f"zkstore daemon {settings.daemon_id}: ZooKeeper {store.zk_hosts}, storage "
        f"{store.storage_url}, Spark {settings.spark_master}",
        err=True,
    )
    sys.exit(Daemon(settings).run())


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
