"""The servers of a chaos session and the cluster of one run.

:class:`World` owns what lives for the whole session: the ZooKeeper ensemble and a moto S3 server
(a subprocess, so that it can be frozen with SIGSTOP), both dying with this process. With a
:class:`~zkstore_dev.hosts.Network`, every process runs on a host of its own (:data:`HOSTS`:
the three ZooKeeper servers, the S3 server, one host per daemon, which its drivers share), so
that the network between them can fail; without one, everything is on this machine's loopback.
Storage is the S3 server, or local disk (``storage="file"``: no S3 server at all).
:class:`RunCluster` is one run: its own cluster id and storage prefix, three daemons as real
processes (:class:`~recovery.dev.localcluster.LocalCluster`), the jobs it submitted.
Nothing here assumes where drivers run: they are found through their ``running`` nodes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import fsspec

from recovery.client.api import Client, JobEnd
from recovery.dev.localcluster import LocalCluster
from recovery.member.warm_jvms.pool import STOP_GRACE
from zkstore import lifeline
from zkstore.closing import Closeable
from zkstore.config import StoreConfig
from zkstore.dev.embedded import free_port
from zkstore.jobs.definition import JobDefinition
from zkstore_dev.chaos import job
from zkstore_dev.chaos.ledger import Ledger
from zkstore_dev.chaos.probe import ScheduleProbe
from zkstore_dev.ensemble import ZooKeeperEnsemble
from zkstore_dev.hosts import Host, Network

__all__ = [
    "DAEMONS",
    "FILE",
    "HEARTBEAT_JOB",
    "HOSTS",
    "JVM_EXIT_GRACE",
    "S3",
    "S3_KEYS",
    "SENTINELS",
    "SLOTS",
    "STORAGE_HOST",
    "WARM",
    "ZOOKEEPER_HOSTS",
    "RunCluster",
    "S3Server",
    "World",
]

#: How long the Spark JVMs of a run may take to exit once its daemons stopped: a daemon's stop
#: gives its warm JVMs STOP_GRACE before it kills them; one whose daemon was killed exits when
#: its standard input ends, in a second or two.
JVM_EXIT_GRACE = 2 * STOP_GRACE

S3_KEYS = {"AWS_ACCESS_KEY_ID": "chaos", "AWS_SECRET_ACCESS_KEY": "chaos"}
ZOOKEEPER_HOSTS = ("zk1", "zk2", "zk3")
STORAGE_HOST = "s3"
DAEMONS = ("d1", "d2", "d3")
#: The hosts of a world on a network: a daemon's host is named after the daemon.
HOSTS = (*ZOOKEEPER_HOSTS, STORAGE_HOST, *DAEMONS)
S3 = "s3"
FILE = "file"
#: A job that checkpoints every 100 steps (20 s) and heartbeats at every step, with a progress
#: timeout of 40 s: its driver writes a heartbeat 10 s after each checkpoint.
HEARTBEAT_JOB: tuple[int, dict[str, Any]] = (100, {"progress_timeout": 40.0})
#: Objects that are not zkstore's, put in its storage before a run: they must all be there
#: after it (``handles cleanup`` included). Keys under the storage root.
SENTINELS = ("not-zkstore.txt", "{cluster}/not-zkstore.txt", "{cluster}/jobs-not-zkstore/x.txt")


class S3Server(Closeable):
    """``moto_server`` in its own process: on a free loopback port, or on a host's address."""

    def __init__(self, log_path: Path, host: Host | None = None) -> None:
        self.host = host
        self.port = free_port() if host is None else 5000
        address = "127.0.0.1" if host is None else host.address
        self.address = address
        self.endpoint = f"http://{address}:{self.port}"
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self, timeout: float = 60.0) -> S3Server:
        command = [sys.executable, "-m", "moto.server", "-H", self.address, "-p", str(self.port)]
        if self.host is not None:
            command = self.host.command(command)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                lifeline.wrap(command), stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(self.endpoint, timeout=1).read()
                return self
            time.sleep(0.1)
        raise RuntimeError(f"moto S3 server did not start within {timeout:g} s")

    def pause(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def create_bucket(self, name: str) -> None:
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        urllib.request.urlopen(request, timeout=30).read()

    def options(self) -> dict[str, Any]:
        return {
            "endpoint_url": self.endpoint,
            "key": S3_KEYS["AWS_ACCESS_KEY_ID"],
            "secret": S3_KEYS["AWS_SECRET_ACCESS_KEY"],
            "client_kwargs": {"region_name": "us-east-1"},
        }

    def close(self) -> None:
        if self._process is not None:
            self.resume()
            self._process.kill()
            self._process.wait()


class World(Closeable):
    """The ensemble and the storage shared by every run of a session (see the module)."""

    def __init__(
        self,
        work_dir: Path,
        *,
        tick_time_ms: int = 2000,
        network: Network | None = None,
        storage: str = S3,
    ) -> None:
        if storage not in (S3, FILE):
            raise ValueError(f"storage is {S3} or {FILE}, not {storage}")
        self.work_dir = work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        os.environ.update(S3_KEYS)  # the daemons and drivers inherit them
        self.network = network
        hosts = [self._on(name) for name in ZOOKEEPER_HOSTS] if network is not None else []
        self.ensemble = ZooKeeperEnsemble(
            tick_time_ms=tick_time_ms,
            work_dir=work_dir / "zk",
            hosts=[(host.address, host.command([])) for host in hosts if host is not None],
        )
        storage_host = network[STORAGE_HOST] if network is not None else None
        self.s3 = S3Server(work_dir / "s3.log", storage_host) if storage == S3 else None
        self.storage = storage
        self.bucket = "chaos"

    def _on(self, name: str) -> Host | None:
        return self.network[name] if self.network is not None else None

    def daemon_hosts(self) -> dict[str, list[str]]:
        """The command prefix that runs a daemon on its own host (none without a network)."""
        if self.network is None:
            return {}
        return {name: self.network[name].command([]) for name in DAEMONS}

    def start(self) -> World:
        self.ensemble.start()
        if self.s3 is not None:
            self.s3.start()
            self.s3.create_bucket(self.bucket)
        return self

    def heal(self) -> None:
        """Bring every server and the network back (after a run, whatever its faults did)."""
        if self.network is not None:
            self.network.heal()
        if self.s3 is not None:
            self.s3.resume()
        for n, member in self.ensemble.members.items():
            member.signal(signal.SIGCONT)
            if not member.running:
                self.ensemble.start_member(n)
        self.ensemble.wait_serving(timeout=120)

    def config(self, run_id: str, session_timeout: float) -> StoreConfig:
        if self.s3 is not None:
            url, options = f"s3://{self.bucket}/{run_id}", self.s3.options()
        else:
            url, options = (self.work_dir / "storage" / run_id).as_uri(), {}
        return StoreConfig(
            zk_hosts=self.ensemble.connect_string,
            root="/chaos",
            cluster_id=run_id,
            storage_url=url,
            storage_options=options,
            session_timeout=session_timeout,
            timeout=5.0,
        )

    def close(self) -> None:
        if self.s3 is not None:
            self.s3.close()
        self.ensemble.close()


#: Driver slots per daemon, the same on every machine (the default follows the cores): three
#: daemons hold the largest load's twelve jobs with a slot to spare for the schedule's runs,
#: which would otherwise wait for a job to end, not for the fault.
SLOTS = 5
#: the warm Spark driver JVMs each daemon keeps ready (issue 47): one daemon keeps one
WARM = {"d1": 1}


class RunCluster(Closeable):
    """One run's cluster: three daemons and the jobs submitted to it."""

    def __init__(self, world: World, run_id: str, *, session_timeout: float) -> None:
        self.world = world
        self.run_id = run_id
        self.config = world.config(run_id, session_timeout)
        self.work_dir = world.work_dir / run_id
        # the probe's schedule fires every 3 s: under the 10 s a production cluster keeps; one
        # daemon keeps a warm Spark driver JVM (issue 47): every scenario's faults reach it too,
        # and none may be left behind (close)
        self.local = LocalCluster(
            self.config,
            self.work_dir,
            restart_backoff=0.5,
            extra_args=("--max-drivers", str(SLOTS), "--schedule-min-interval", "1s"),
            hosts=world.daemon_hosts(),
            daemon_args={d: ("--warm-drivers", str(n)) for d, n in WARM.items()},
        )
        #: the Spark JVMs left after the daemons stopped (and a grace to exit), at close
        self.jvms_left: list[int] = []
        self.client: Client | None = None
        self.jobs: dict[str, tuple[Path, int | None]] = {}
        #: what the exactly-once check of the outputs read (:mod:`.invariants`)
        self.outputs_read = ""
        #: the run's schedule (the runner's)
        self.probe: ScheduleProbe | None = None

    def start(self, daemons: int = 3) -> RunCluster:
        self.plant_sentinels()
        for n in range(1, daemons + 1):
            self.local.start_daemon(f"d{n}")
        self.local.wait_for_leader(timeout=120)
        self.client = Client(self.config)
        return self

    def ledger_of(self, job_id: str) -> tuple[str, dict[str, Any]]:
        """Where a job's own writes go (its ledger), outside zkstore's keys, and how to reach it."""
        return f"{self.config.storage_url}/ledger/{job_id}", dict(self.config.storage_options)

    def ledger(self, job_id: str) -> Ledger:
        return Ledger(*self.ledger_of(job_id))

    def sentinels(self) -> list[str]:
        return [
            f"{self.config.storage_url}/{key.format(cluster=self.config.cluster_id)}"
            for key in SENTINELS
        ]

    def plant_sentinels(self) -> None:
        """Objects zkstore did not make, beside and among its own (see :data:`SENTINELS`)."""
        for url in self.sentinels():
            fs, path = fsspec.core.url_to_fs(url, **self.config.storage_options)
            fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            fs.pipe_file(path, b"not zkstore's")

    def missing_sentinels(self) -> list[str]:
        missing = []
        for url in self.sentinels():
            fs, path = fsspec.core.url_to_fs(url, **self.config.storage_options)
            if not fs.exists(path):
                missing.append(url)
        return missing

    def submit(self, steps: int | None, delay: float, max_attempts: int = 50) -> str:
        """A chaos job; every second one checkpoints rarely and heartbeats between, with a
        progress timeout (:data:`HEARTBEAT_JOB`), so that its driver writes heartbeats."""
        assert self.client is not None
        number = len(self.jobs) + 1
        job_id = f"j{number}-{uuid.uuid4().hex[:6]}"
        out = self.work_dir / "out" / job_id
        every, lifecycle = HEARTBEAT_JOB if number % 2 == 0 else (1, {})
        definition = JobDefinition.for_function(
            job_id,
            job.sum_of_squares,
            args=(str(out), steps, delay, self.ledger_of(job_id), every, True),
            max_attempts=max_attempts,
            lifecycle=lifecycle,
        )
        self.client.submit(definition)
        self.jobs[job_id] = (out, steps)
        return job_id

    def running_drivers(self) -> dict[str, int]:
        """job id -> pid of the driver holding its ``running`` node, wherever it runs."""
        found = {}
        for job_id in self.jobs:
            with contextlib.suppress(Exception):
                pid = self.local.driver_pid(job_id)
                if pid is not None:
                    found[job_id] = pid
        return found

    def wait_all(self, timeout: float) -> dict[str, JobEnd]:
        assert self.client is not None
        end = time.monotonic() + timeout
        return {
            job_id: self.client.wait(job_id, timeout=max(1.0, end - time.monotonic()))
            for job_id in self.jobs
        }

    def logs(self) -> str:
        parts = [f"--- {d.daemon_id} ---\n{d.log()[-4000:]}" for d in self.local.daemons.values()]
        for path in sorted((self.work_dir / "drivers").rglob("*.log")):
            parts.append(f"--- {path.relative_to(self.work_dir)} ---\n{path.read_text()[-3000:]}")
        return "\n".join(parts)

    def close(self) -> None:
        """Stop the daemons, count the Spark JVMs of the cluster still alive after a grace
        (a warm JVM ends with its daemon's stop, or with its daemon's death: its standard input
        ends; a driver's JVM with its driver), then stop whatever is left."""
        if self.client is not None:
            self.client.close()
        self.local.stop_daemons()
        deadline = time.monotonic() + JVM_EXIT_GRACE
        while self.local.spark_jvms() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.jvms_left = self.local.spark_jvms()
        self.local.stop()
