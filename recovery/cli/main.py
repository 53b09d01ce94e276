"""The ``zkstore`` console script: the store's commands plus the runtime's (daemon, submit,
demo), attached to the same click group."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from recovery.cli import (
    daemons,  # noqa: F401  (registers `zkstore daemons`)
    schedules,  # noqa: F401  (registers `zkstore schedules create`)
)
from recovery.cli.joboptions import job_options
from recovery.client.client import Client
from recovery.client.shipping import Dependencies
from recovery.client.sparkconf import parse_spark_conf
from recovery.leader.placement import parse_labels
from recovery.settings import (
    API_TOKEN_ENV,
    DEFAULT_HTTP,
    READ_TOKEN_ENV,
    DaemonSettings,
    api_token_from_env,
    default_daemon_id,
    parse_allowed_hosts,
    parse_http_address,
    spark_master_from_env,
)
from zkstore.cli import cli
from zkstore.cli.artifacts import artifact_root_option, with_roots
from zkstore.cli.base import Connection, DevCommand, connection_options
from zkstore.cli.handles import Duration, Retention
from zkstore.cli.jobs import jobs
from zkstore.config import ENV_VARS
from zkstore.errors import JobDidNotSucceed, JobEndedCancelled
from zkstore.jobs.records import LeaderInfo
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.states import CANCELLED, RESTARTING, SUCCEEDED
from zkstore.layout import validate_job_id
from zkstore.service.jobs import headline

F = TypeVar("F", bound=Callable[..., Any])

wait_timeout_option = click.option(
    "--wait-timeout",
    type=Duration(),
    metavar="DURATION",
    help="stop waiting after this long (30s, 10m, 2h): exit 7, the job goes on",
)


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
    help="where driver logs go on this host, one file per attempt (each is also shipped to "
    "storage: zkstore jobs logs) [default: a temporary directory]",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False),
    help="where drivers run, one fresh directory per attempt holding the job's shipped files "
    "(removed when the attempt ends), and the launch records a restarted daemon adopts its "
    "drivers by; keep it across restarts [default: <tmp>/zkstore-<uid>/<cluster>-<id>/work]",
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
@artifact_root_option
@click.pass_context
def daemon(
    ctx: click.Context,
    connection: Connection,
    spark_master: str | None,
    session_timeout: float,
    daemon_id: str | None,
    max_drivers: int,
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
    settings = DaemonSettings(
        store=store,
        daemon_id=daemon_id or default_daemon_id(),
        spark_master=spark_master_from_env(spark_master),
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
        api_token=api_token_from_env(),
        api_read_token=api_token_from_env(variable=READ_TOKEN_ENV),
        http_allowed_hosts=parse_allowed_hosts(allowed_hosts) if allowed_hosts else None,
        keep_results=keep_results,
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
@job_options
@click.option(
    "--after",
    multiple=True,
    metavar="JOB[:STATE]",
    help="start only once JOB ended in STATE (SUCCEEDED [default], FAILED, CANCELLED or ENDED: "
    "any); the job fails if JOB ends otherwise; repeatable",
)
@click.option(
    "--idempotency-key",
    metavar="KEY",
    help="derive the job id from the file and KEY: a retry with the same KEY names the same job",
)
@click.option("--wait", is_flag=True, help="follow the job to its end; exit with its outcome")
@wait_timeout_option
def submit(
    target: str,
    args: tuple[str, ...],
    connection: Connection,
    job_id: str | None,
    name: str | None,
    conf_pairs: tuple[str, ...],
    py_files: tuple[str, ...],
    files: tuple[str, ...],
    jars: tuple[str, ...],
    packages: tuple[str, ...],
    max_attempts: int,
    max_lost_attempts: int,
    requirements: tuple[str, ...],
    no_path_check: bool,
    after: tuple[str, ...],
    idempotency_key: str | None,
    wait: bool,
    wait_timeout: float | None,
) -> None:
    """Submit a PySpark job; accepted as soon as it is durable, leader or not.

    FILE.py runs an unmodified PySpark script (restarted from scratch after a failure).
    FILE.py:FUNCTION calls FUNCTION(ctx, *ARGS) with a job context: ctx.spark, ctx.job_id,
    ctx.attempt, ctx.latest_checkpoint(), ctx.checkpoint(metadata), ctx.config.

    The job takes along what it needs, stored with it so that any daemon's host can run it:
    the modules FILE.py imports from its own directory, and --py-files, --files and --jars.
    It runs in a fresh working directory per attempt on the driver's host, holding those files
    under their own names; a relative path among ARGS that exists here is refused unless it
    names a shipped file (use an absolute path or a URI).

    Submitting is idempotent: a job id that exists with the same definition and options
    prints that id (exit 0); with another, exit 5 says how they differ. Retry blindly with
    --job-id or --idempotency-key.

    Prints the job id. With --wait, follows the job and exits with its outcome: 0 SUCCEEDED,
    1 FAILED, 3 CANCELLED, 5 quarantined, 7 --wait-timeout reached (the job goes on).
    """
    needs = Dependencies(py_files=py_files, files=files, jars=jars, packages=packages)
    with Client(connection.config) as client:
        submitted = client.submit_file(
            target,
            list(args),
            job_id=job_id,
            name=name,
            conf=parse_spark_conf(conf_pairs),
            max_attempts=max_attempts,
            max_lost_attempts=max_lost_attempts,
            require=parse_labels(requirements, "requirement"),
            needs=needs,
            check_paths=not no_path_check,
            warn=lambda message: click.echo(f"zkstore: warning: {message}", err=True),
            after=after,
            idempotency_key=idempotency_key,
        )
        click.echo(submitted)
        if wait:
            follow(client, submitted, wait_timeout)


@jobs.command("wait")
@click.argument("job_id")
@connection_options
@wait_timeout_option
def wait_job(job_id: str, connection: Connection, wait_timeout: float | None) -> None:
    """Follow a job to its end (again, e.g. after Ctrl-C on submit --wait).

    Prints its state as it changes and exits with its outcome, as submit --wait does:
    0 SUCCEEDED, 1 FAILED, 3 CANCELLED, 4 no such job, 5 quarantined, 7 --wait-timeout reached.
    """
    validate_job_id(job_id)
    with Client(connection.config) as client:
        follow(client, job_id, wait_timeout)


def follow(client: Client, job_id: str, timeout: float | None) -> None:
    """Print the job's progress until it ends; exit with its outcome (raises the errors of
    :meth:`Client.wait`, which the command line turns into their exit codes)."""
    progress = Progress(job_id)
    result = client.wait(
        job_id, timeout=timeout, on_change=progress.changed, on_leader=progress.leader
    )
    message = f"{job_id}: {result.outcome} after {result.attempts} attempt(s)"
    if result.error and result.outcome != CANCELLED:
        message += f": {headline(result.error)}"
    if result.outcome == CANCELLED:
        raise JobEndedCancelled(message)
    if result.outcome != SUCCEEDED:
        raise JobDidNotSucceed(message)
    click.echo(message, err=True)


class Progress:
    """What ``--wait`` prints on stderr: each state as it happens, and when no leader is up."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.leader_missing = False

    def say(self, message: str) -> None:
        click.echo(f"{self.job_id}: {message}", err=True)

    def changed(self, snapshot: JobSnapshot) -> None:
        if snapshot.result is not None:
            return  # the closing line says how it ended
        detail = f" (attempt {snapshot.attempt})" if snapshot.attempt else ""
        running, ended, spark = snapshot.running, snapshot.attempt_outcome, snapshot.spark
        if running is not None:
            detail += f" on {running.host} pid {running.pid}"
            if spark is not None and spark.attempt == running.attempt:
                detail += f", Spark {spark.app_id}" + (f" UI {spark.ui}" if spark.ui else "")
        elif ended is not None:
            detail = f" (attempt {ended.attempt} {ended.outcome})"
        elif snapshot.state == RESTARTING and snapshot.status is not None:
            error = snapshot.status.last_error
            detail += f": {headline(error)}" if error else ""
        self.say(f"{snapshot.state}{detail}")

    def leader(self, info: LeaderInfo | None) -> None:
        if info is None:
            self.leader_missing = True
            self.say("no leader is up: the job waits until a daemon leads (zkstore daemon)")
        elif self.leader_missing:
            self.leader_missing = False
            self.say(f"daemon {info.daemon_id} on {info.host} leads now")


cli.add_command(
    DevCommand(
        "demo",
        "recovery.dev.demo:demo",
        "Tell the failover story end to end (embedded ZooKeeper, two daemons, local Spark).",
    )
)


def main() -> None:
    cli(prog_name="zkstore")


if __name__ == "__main__":
    main()
