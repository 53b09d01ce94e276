"""Starting driver processes: one OS process per attempt, in its own session.

A driver is started with ``start_new_session=True``, so it is not in the daemon's process group:
a signal to the daemon (Ctrl-C, SIGTERM, SIGKILL) does not reach it, and it outlives a daemon
crash. Its configuration comes through the environment (the signing key never appears on a
command line); its output goes to a log file per attempt.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from recovery.settings import DaemonSettings
from zkstore.config import ENV_VARS

logger = logging.getLogger(__name__)

DRIVER_CONFIG_ENV = "ZKSTORE_DRIVER_CONFIG"

# Exit codes of ``python -m recovery.driver``.
EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_REFUSED = 3  # another attempt holds ``running``, or this attempt was superseded
EXIT_CANCELLED = 4
EXIT_BROKEN = 5  # the definition cannot be loaded: quarantine material
EXIT_SUSPENDED = 6  # the session was suspended past the safe bound: stopped without an outcome

EXIT_MEANINGS = {
    EXIT_SUCCEEDED: "succeeded",
    EXIT_FAILED: "failed",
    EXIT_REFUSED: "refused to start",
    EXIT_CANCELLED: "cancelled",
    EXIT_BROKEN: "could not load its definition",
    EXIT_SUSPENDED: "stopped itself: ZooKeeper session suspended",
}


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by signal {-code}"
    return EXIT_MEANINGS.get(code, f"exited with code {code}")


@dataclass
class Launch:
    """A driver process this daemon started."""

    job_id: str
    attempt: int
    status_version: int
    process: subprocess.Popen[bytes]
    log_path: Path
    started: float = field(default_factory=time.monotonic)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def exit_code(self) -> int | None:
        return self.process.poll()

    @property
    def age(self) -> float:
        return time.monotonic() - self.started


class DriverLauncher:
    """Builds the driver's command and environment and starts it."""

    def __init__(self, settings: DaemonSettings) -> None:
        self.settings = settings
        self.log_dir = Path(settings.log_dir or tempfile.mkdtemp(prefix="zkstore-drivers-"))

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env[DRIVER_CONFIG_ENV] = self.settings.store.to_json()
        env[ENV_VARS["spark_master"]] = self.settings.spark_master
        env.pop(ENV_VARS["signing_key"], None)  # travels inside the driver config
        env["PYTHONUNBUFFERED"] = "1"
        # Spark's Python workers run PYSPARK_PYTHON ("python3" if unset, which may lack pyspark
        # and zkstore): by default, the Python that runs the driver.
        env.setdefault("PYSPARK_PYTHON", self.settings.python)
        return env

    def command(self, job_id: str, attempt: int, status_version: int) -> list[str]:
        return [
            self.settings.python,
            "-m",
            "recovery.driver",
            "--job-id",
            job_id,
            "--attempt",
            str(attempt),
            "--status-version",
            str(status_version),
            "--cancel-grace",
            str(self.settings.cancel_grace),
        ]

    def launch(self, job_id: str, attempt: int, status_version: int) -> Launch:
        """Start the driver of ``attempt``; raises OSError if the process cannot be started."""
        log_path = self.log_dir / job_id / f"attempt-{attempt}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                self.command(job_id, attempt, status_version),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                start_new_session=True,
            )
        logger.info(
            "started driver of %s attempt %d (pid %d, log %s)",
            job_id,
            attempt,
            process.pid,
            log_path,
        )
        return Launch(job_id, attempt, status_version, process, log_path)
