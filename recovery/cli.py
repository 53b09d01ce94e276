"""The ``zkstore`` console script: the store's commands plus the runtime's (daemon, submit,
demo), attached to the same click group."""

from __future__ import annotations

import sys

import click

from recovery import fleet_cli  # noqa: F401  (registers `zkstore daemons`)
from recovery.client import Client
from recovery.dev.demo import demo
from recovery.fleet import parse_labels
from recovery.settings import DaemonSettings, default_daemon_id, spark_master_from_env
from zkstore.cli import cli
from zkstore.cli.base import Connection, connection_options
from zkstore.cli.jobs import describe
from zkstore.config import parse_storage_options
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
@click.option(
    "--id",
    "daemon_id",
    help="name of this daemon in the fleet, unique among live daemons (give each daemon of one "
    "host its own) [default: the host name]",
)
@click.option(
    "--max-drivers",
    type=click.IntRange(1),
    default=32,
    show_default=True,
    help="driver slots of this daemon: attempts the leader may place here at once",
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
    "--reconcile-interval",
    type=click.FloatRange(0.5, 3600),
    default=10.0,
    show_default=True,
    help="seconds between full passes over every job when leading (events such as a "
    "submission, a driver's exit or a cancel are handled at once regardless)",
)
def daemon(
    connection: Connection,
    spark_master: str | None,
    session_timeout: float,
    daemon_id: str | None,
    max_drivers: int,
    log_dir: str | None,
    restart_backoff: float,
    reconcile_interval: float,
    labels: tuple[str, ...],
) -> None:
    """Run the recovery daemon on this host (start one on two or more hosts).

    Every daemon runs drivers: it offers --max-drivers slots (and its --label labels) to the
    fleet. The daemons elect a leader, which places each job's attempt on a daemon with a free
    slot (least loaded first), restarts failed ones with backoff from their latest checkpoint,
    re-places the jobs of a daemon that is lost, and cleans up finished ones. When the leader
    dies, another daemon takes over within the session timeout (at once on SIGTERM) and adopts
    the running drivers: nothing restarts.
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
        reconcile_interval=reconcile_interval,
        labels=parse_labels(labels),
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
