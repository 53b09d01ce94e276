"""The servers of a chaos session and the cluster of one run.

:class:`World` owns what lives for the whole session: the ZooKeeper ensemble and a moto S3 server
(a subprocess, so that it can be frozen with SIGSTOP), both dying with this process.
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

from recovery.client.client import Client
from recovery.dev.chaos import job
from recovery.dev.localcluster import LocalCluster
from recovery.member.sparkjvm.pool import STOP_GRACE
from zkstore.closing import Closeable
from zkstore.config import StoreConfig
from zkstore.dev import lifeline
from zkstore.dev.embedded import free_port
from zkstore.dev.ensemble import ZooKeeperEnsemble
from zkstore.jobs.records import JobResult

#: How long the Spark JVMs of a run may take to exit once its daemons stopped: a daemon's stop
#: gives its warm JVMs STOP_GRACE before it kills them; one whose daemon was killed exits when
#: its standard input ends, in a second or two.
JVM_EXIT_GRACE = 2 * STOP_GRACE

S3_KEYS = {"AWS_ACCESS_KEY_ID": "chaos", "AWS_SECRET_ACCESS_KEY": "chaos"}


class S3Server(Closeable):
    """``moto_server`` on a free loopback port, in its own process."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> S3Server:
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
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
    """The ensemble and the S3 server shared by every run of a session."""

    def __init__(self, work_dir: Path, *, tick_time_ms: int = 2000) -> None:
        self.work_dir = work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        os.environ.update(S3_KEYS)  # the daemons and drivers inherit them
        self.ensemble = ZooKeeperEnsemble(tick_time_ms=tick_time_ms, work_dir=work_dir / "zk")
        self.s3 = S3Server(work_dir / "s3.log")
        self.bucket = "chaos"

    def start(self) -> World:
        self.ensemble.start()
        self.s3.start()
        self.s3.create_bucket(self.bucket)
        return self

    def heal(self) -> None:
        """Bring every server back (after a run, whatever its faults did)."""
        self.s3.resume()
        for n, member in self.ensemble.members.items():
            member.signal(signal.SIGCONT)
            if not member.running:
                self.ensemble.start_member(n)
        self.ensemble.wait_serving(timeout=120)

    def config(self, run_id: str, session_timeout: float) -> StoreConfig:
        return StoreConfig(
            zk_hosts=self.ensemble.connect_string,
            root="/chaos",
            cluster_id=run_id,
            storage_url=f"s3://{self.bucket}/{run_id}",
            storage_options=self.s3.options(),
            session_timeout=session_timeout,
            timeout=5.0,
        )

    def close(self) -> None:
        self.s3.close()
        self.ensemble.close()


class RunCluster(Closeable):
    """One run's cluster: three daemons and the jobs submitted to it."""

    def __init__(self, world: World, run_id: str, *, session_timeout: float) -> None:
        self.world = world
        self.run_id = run_id
        self.config = world.config(run_id, session_timeout)
        self.work_dir = world.work_dir / run_id
        # One daemon keeps a warm Spark driver JVM (issue 47): every scenario's faults reach it
        # too, and none may be left behind (close).
        self.local = LocalCluster(
            self.config,
            self.work_dir,
            restart_backoff=0.5,
            daemon_args={"d1": ("--warm-drivers", "1")},
        )
        #: the Spark JVMs left after the daemons stopped (and a grace to exit), at close
        self.jvms_left: list[int] = []
        self.client: Client | None = None
        self.jobs: dict[str, tuple[Path, int | None]] = {}

    def start(self, daemons: int = 3) -> RunCluster:
        for n in range(1, daemons + 1):
            self.local.start_daemon(f"d{n}")
        self.local.wait_for_leader(timeout=120)
        self.client = Client(self.config)
        return self

    def submit(self, steps: int | None, delay: float, max_attempts: int = 50) -> str:
        assert self.client is not None
        job_id = f"j{len(self.jobs) + 1}-{uuid.uuid4().hex[:6]}"
        out = self.work_dir / "out" / job_id
        self.client.submit_function(
            job.sum_of_squares, str(out), steps, delay, job_id=job_id, max_attempts=max_attempts
        )
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

    def wait_all(self, timeout: float) -> dict[str, JobResult]:
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
