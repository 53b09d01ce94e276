"""``zkstore demo``: the failover story, end to end, on this machine.

An embedded ZooKeeper, local storage in a temporary directory, two recovery daemons and local
Spark run the example pipeline (``examples/pipeline.py``: one day of sales per step, a checkpoint
after each). The job is placed on the first daemon (the second starts once it runs there). Mid-run
the demo SIGKILLs that daemon, the leader (the other daemon takes over and adopts the running
driver), then SIGKILLs the driver: nothing of the first daemon's "host" is left, as after a host
loss (docs/host-loss.md), and the new leader resubmits the job, which resumes from its latest
checkpoint on the daemon left. It narrates what happens as it happens, compares the output with
the result computed directly, and shows that no handle or payload is left behind.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from recovery.client.api import Client
from recovery.dev.localcluster import DaemonProcess, LocalCluster
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.jobs.logs import JobLogs
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.layout import Layout
from zkstore.records.fleet_records import DrainMark
from zkstore.records.strict import optional_time_text, utc_moment

PIPELINE = Path(__file__).resolve().parents[2] / "examples" / "pipeline.py"
#: the line a daemon logs once its warm driver JVM is ready (recovery.member.warm_jvms.pool)
#: :data:`recovery.member.warm_jvms.pool.READY_LINE` as logged, with or without its archive
WARM_READY = re.compile(r"warm driver \S+ ready \(pid \d+, started and warmed in ([0-9.]+) s[,)]")


class Narrator:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def say(self, message: str, *, bold: bool = False) -> None:
        stamp = click.style(f"[{time.monotonic() - self.start:6.1f}s]", dim=True)
        click.echo(f"{stamp} {click.style(message, bold=bold)}")


class Story:
    """Follows the job and triggers the failures at the right moments."""

    def __init__(self, narrator: Narrator, local: LocalCluster, client: Client, job_id: str):
        self.say = narrator.say
        self.local = local
        self.client = client
        self.job_id = job_id
        self.last_day = 0
        self.attempt = 0
        self.driver_pid: int | None = None

    def follow_until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Narrate progress until ``condition`` holds; fail if it does not within ``timeout``."""
        end = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > end:
                raise click.ClickException(f"demo stuck waiting for {what}")
            self._narrate(self.client.status(self.job_id))
            time.sleep(0.2)
        self._narrate(self.client.status(self.job_id))

    def _narrate(self, job: JobSnapshot) -> None:
        running = job.running
        if running is not None and running.pid != self.driver_pid:
            self.attempt, self.driver_pid = running.attempt, running.pid
            self.say(f"driver of attempt {self.attempt} is running (pid {self.driver_pid})")
        if job.result is not None:
            return
        checkpoint = self.client.cluster.checkpoints(self.job_id).latest()
        day = int(checkpoint.metadata["day"]) if checkpoint is not None else 0
        if day > self.last_day:
            done = f"day {day}" if day == self.last_day + 1 else f"days {self.last_day + 1}-{day}"
            self.last_day = day
            self.say(f"checkpoint after {done} (attempt {self.attempt})")


def run_demo(days: int, session_timeout: float, keep: bool) -> bool:
    narrator = Narrator()
    say = narrator.say
    work = Path(tempfile.mkdtemp(prefix="zkstore-demo-"))
    say("starting an embedded ZooKeeper from the pyspark jars...")
    with EmbeddedZooKeeper() as zookeeper:
        config = StoreConfig(
            zk_hosts=zookeeper.connect_string,
            root="/zkstore-demo",
            storage_url=f"file://{work}/storage",
            session_timeout=session_timeout,
        )
        say(f"ZooKeeper on {zookeeper.connect_string}; payloads in {work}/storage")
        # One warm driver JVM per daemon (the default of a daemon on a host with room for
        # it; a LocalCluster keeps none unless asked): each attempt of the story starts on one.
        local = LocalCluster(
            config,
            work / "daemons",
            spark_master="local[2]",
            restart_backoff=1.0,
            http=True,
            warm_drivers=1,
        )
        try:
            return _story(narrator, local, config, work, days)
        finally:
            local.stop()
            if keep:
                say(f"kept the demo's files in {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)


def _story(
    narrator: Narrator, local: LocalCluster, config: StoreConfig, work: Path, days: int
) -> bool:
    say = narrator.say
    pipeline = _load_pipeline()
    pipeline.generate(str(work / "input"), days=days, rows_per_day=4000)
    say(f"generated {days} days of sales in {work / 'input'}")
    # The pipeline's outputs are artifacts: the daemons must let jobs register them there.
    roots = ("--artifact-root", f"file://{work / 'output'}")
    local.start_daemon("daemon-1", *roots)
    first = local.wait_for_leader()
    # The second daemon plays another host: drained until the job runs on the first (as
    # `zkstore daemons drain` would), it warms its own driver JVM meanwhile.
    _drain(local, "daemon-2", drained=True)
    local.start_daemon("daemon-2", *roots)
    say(
        f"two recovery daemons are up; {first.daemon_id} (pid {first.pid}) is the leader, "
        "daemon-2 is drained until the job runs on daemon-1",
        bold=True,
    )
    pages = ", ".join(f"{d.url}/" for d in local.daemons.values() if d.url)
    say(f"status pages (open one in a browser while the story runs): {pages}")
    _await_warm_driver(narrator, first)
    with Client(config) as client:
        job_id = client.submit_file(
            f"{PIPELINE}:run",
            [str(work / "input"), str(work / "output"), "1.0"],
            job_id="daily-sales",
            max_attempts=3,
        )
        say(f"submitted job {job_id}: examples/pipeline.py:run, one day per step")
        story = Story(narrator, local, client, job_id)
        # The job on daemon-1 (the only one yet): the second daemon then plays another host.
        story.follow_until(lambda: story.driver_pid is not None, 180, "the driver")
        _drain(local, "daemon-2", drained=False)
        say(f"the job runs on {first.daemon_id}; daemon-2 is undrained")
        story.follow_until(lambda: story.last_day >= 2, 180, "day 2")
        second = local.daemons["daemon-2"]
        story.follow_until(lambda: _warm(second) is not None, 180, "daemon-2's warm driver")
        _kill_leader(story, first)
        kill_after = min(story.last_day + 2, days - 2)
        story.follow_until(lambda: story.last_day >= kill_after, 180, f"day {kill_after}")
        _kill_driver(story, first.daemon_id)
        story.follow_until(lambda: story.attempt == 2, 120, "attempt 2")
        say(f"attempt 2 resumes after day {story.last_day}: checkpointed days are not redone")
        story.follow_until(lambda: client.status(job_id).result is not None, 300, "the result")
        result = client.status(job_id).result
        assert result is not None
        say(f"job {job_id}: {result.outcome} after {result.attempts} attempt(s)", bold=True)
        story.follow_until(lambda: client.status(job_id).state == result.outcome, 60, "cleanup")
        cleaned = client.status(job_id).result or result  # its cleanup listed the kept outputs
    say(f"outputs kept (listed in the job's result): {', '.join(sorted(cleaned.outputs or {}))}")
    staging = work / "output" / "_staging"
    say(f"staging directories left: {len(list(staging.glob('*'))) if staging.exists() else 0}")
    matches = _compare(say, work, pipeline.expected(str(work / "input")))
    clean = _nothing_left(say, config, job_id) and not staging.exists()
    return matches and clean and result.outcome == "SUCCEEDED"


def _load_pipeline() -> Any:
    """Import examples/pipeline.py from the checkout (examples are not an installed package)."""
    spec = importlib.util.spec_from_file_location("zkstore_demo_pipeline", PIPELINE)
    if spec is None or spec.loader is None:
        raise click.ClickException(f"cannot load {PIPELINE}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kill_leader(story: Story, leader: Any) -> None:
    say = story.say
    say(f"SIGKILL the leader daemon {leader.daemon_id} (pid {leader.pid})", bold=True)
    leader.signal(signal.SIGKILL)
    killed = time.monotonic()
    say(f"its driver (pid {story.driver_pid}) keeps running: a separate process, its own session")
    timeout = story.local.config.session_timeout
    say(f"the other daemon waits for the dead leader's session to expire ({timeout:g} s)")

    def new_leader() -> bool:
        info = story.local.leader()
        return info is not None and info.daemon_id != leader.daemon_id

    story.follow_until(new_leader, 120, "a new leader")
    successor = story.local.wait_for_leader(exclude=leader.daemon_id)
    say(
        f"{successor.daemon_id} became the leader {time.monotonic() - killed:.1f} s after the kill",
        bold=True,
    )

    # Adopted: the new leader's first pass over every job (its leader record says when it was
    # done) left the running driver alone: still the first attempt, in the same process.
    def recovered() -> bool:
        info = story.local.leader()
        return info is not None and info.recovered is not None

    story.follow_until(recovered, 60, "the takeover")
    snapshot = story.client.status(story.job_id)
    pid = story.local.driver_pid(story.job_id)
    if pid != story.driver_pid or snapshot.attempt != story.attempt:
        raise click.ClickException("the new leader did not adopt the running driver")
    say(f"it adopted the running driver (pid {pid}) instead of starting the job again")


def _kill_driver(story: Story, lost: str) -> None:
    say = story.say
    pid = story.local.driver_pid(story.job_id)
    if pid is None:
        raise click.ClickException("the driver is not running")
    say(f"SIGKILL the driver (pid {pid}) after day {story.last_day}", bold=True)
    os.kill(pid, signal.SIGKILL)
    say(
        f"with its daemon dead already, nothing of {lost}'s host is left: a host loss "
        "(docs/host-loss.md does it on one machine)"
    )
    say(
        "the leader will see its running node vanish when the driver's session expires, "
        "then start attempt 2 from the latest checkpoint on the daemon left"
    )


def _warm(daemon: DaemonProcess) -> str | None:
    """How long the daemon's warm driver JVM took to be ready (``12.3 s``), once it is."""
    found = WARM_READY.search(daemon.log())
    return None if found is None else f"{found.group(1)} s"


def _await_warm_driver(narrator: Narrator, daemon: DaemonProcess) -> None:
    """Wait for the daemon's warm driver JVM: the job's first attempt starts on it, not on a
    JVM of its own started cold (Spark's start is most of a short attempt's time)."""
    narrator.say(f"{daemon.daemon_id} warms a Spark driver JVM for the job (--warm-drivers 1)")
    end = time.monotonic() + 180
    while (took := _warm(daemon)) is None:
        if time.monotonic() > end or not daemon.alive:
            raise click.ClickException(f"{daemon.daemon_id}'s warm driver never got ready")
        time.sleep(0.2)
    narrator.say(f"its warm driver is ready (started and warmed in {took})")


def _drain(local: LocalCluster, daemon_id: str, *, drained: bool) -> None:
    """Put or take away the daemon's drain mark (what ``zkstore daemons drain|undrain``
    write): no new attempt is placed on a drained daemon."""
    path = Layout(local.config.base_path).drain_mark(daemon_id)
    if drained:
        local.zk.create(path, DrainMark(version=None, since=utc_moment()).to_bytes())
    else:
        local.zk.delete(path)


def _compare(say: Callable[..., None], work: Path, expected: dict[str, Any]) -> bool:
    summary_path = work / "output" / "summary.json"
    produced = json.loads(summary_path.read_text())
    say("pipeline output (summary.json) against the same totals computed directly:")
    for category, totals in expected.items():
        got = produced.get(category)
        mark = "ok" if got == totals else "MISMATCH"
        click.echo(
            f"    {category:8s} {totals['orders']:6d} orders {totals['amount']:>12d} cents  {mark}"
        )
    if produced == expected:
        say("output matches", bold=True)
        return True
    say("output does NOT match", bold=True)
    return False


def _nothing_left(say: Callable[..., None], config: StoreConfig, job_id: str) -> bool:
    """Nothing but the result and the driver logs (kept for their retention) is left."""
    with Cluster.open(config) as cluster:
        handles = cluster.zk.children(cluster.layout.current_jobs)
        records = cluster.zk.children(cluster.layout.jobs)
        logs = cluster.storage_layout.logs(job_id)
        payloads = [
            o
            for o in cluster.storage.list(cluster.storage_layout.jobs)
            if not cluster.storage.is_under(o.uri, logs)
        ]
        result = cluster.results.get(job_id)
        attempts = JobLogs(cluster.storage, cluster.storage_layout, job_id).attempts()
    say(
        f"the logs of its {len(attempts)} attempt(s) are kept in storage until "
        f"{optional_time_text(result.logs_until) if result else '?'}: "
        f"zkstore jobs logs {job_id} --attempt N"
    )
    say(
        f"left behind: {len(handles)} job handle(s), {len(records)} job record tree(s), "
        f"{len(payloads)} payload(s); result kept: {result.state if result else None}"
    )
    clean = not handles and not records and not payloads and result is not None
    if clean:
        say("no handle or payload left behind", bold=True)
    return clean


@click.command()
@click.option(
    "--days", type=click.IntRange(6, 30), default=10, show_default=True, help="pipeline steps"
)
@click.option(
    "--session-timeout",
    type=click.FloatRange(2, 60),
    default=5.0,
    show_default=True,
    help="ZooKeeper session timeout of daemons and drivers",
)
@click.option("--keep", is_flag=True, help="keep the demo's files (storage, logs, output)")
def demo(days: int, session_timeout: float, keep: bool) -> None:
    """Tell the failover story end to end: embedded ZooKeeper, local storage, two daemons,
    local Spark, a leader killed mid-run and then a driver; the output is checked at the end."""
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    if not PIPELINE.exists():
        raise click.ClickException(f"{PIPELINE} not found: run the demo from a source checkout")
    if not run_demo(days, session_timeout, keep):
        raise click.ClickException("the demo did not end as it should")
