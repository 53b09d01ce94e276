"""Shipping one attempt's output to storage: the launcher starts a shipper beside each driver.

The driver writes its stdout and stderr (its Python logging, the job's prints, the Spark JVM's
output) to the attempt's log file on the host, exactly as without shipping: the driver never
waits for the shipper, and its writes never fail because of it. A shipper process, started by
the launcher beside the driver, follows that file and stores what is new every few seconds as a
chunk (:mod:`zkstore.jobs.logship`), then, once the driver has exited, the rest and
``end.json``. It runs at a lower priority than the driver, so that it costs the job little.

Why a process of its own, not a thread of the daemon: drivers outlive their daemon by design (a
new leader adopts them), and so must the shipping of their output. A pipe into the daemon would
be worse still: the driver's next print would fail once the daemon died. The shipper learns of
the driver's exit through a pidfd the launcher opened while the driver was its unreaped child,
so it can never mistake another process for it; a SIGKILLed driver's last lines are in the file,
and the shipper stores them.

What a failure leaves: storage down, the chunks wait in the file (nothing is dropped; the
shipper retries with backoff, and gives up on a dead driver's output after ``--give-up``
seconds, leaving the file); the shipper killed, the chunks stored so far and the file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

from zkstore.config import StoreConfig
from zkstore.jobs.logship import INTERVAL

logger = logging.getLogger(__name__)

#: The shipper runs at a lower priority than the driver: its work can wait, the job's cannot.
SHIPPER_NICENESS = 10


def shipper_config(config: StoreConfig) -> str:
    """The storage settings only: the shipper has no use for the signing key."""
    return config.with_changes(signing_key=None).to_json()


def shipper_argv(
    job_id: str, attempt: int, log_path: Path, offset: int, interval: float = INTERVAL
) -> list[str]:
    """The shipper's arguments; ``{config_fd}`` and ``{pidfd}`` stand for its two pipes."""
    return [
        "--config-fd",
        "{config_fd}",
        "--pidfd",
        "{pidfd}",
        "--job-id",
        job_id,
        "--attempt",
        str(attempt),
        "--log",
        str(log_path),
        "--offset",
        str(offset),
        "--interval",
        str(interval),
    ]


def start_shipper(
    config: StoreConfig,
    job_id: str,
    attempt: int,
    driver_pid: int,
    log_path: Path,
    offset: int,
    *,
    env: dict[str, str],
    python: str = sys.executable,
    interval: float = INTERVAL,
) -> subprocess.Popen[bytes] | None:
    """Start the shipper of a driver just launched (a child of ours, or of our fork server:
    either way alive and unreaped, so its pid is still its own).

    ``env`` is the driver's environment (the daemon's secrets already taken out). Returns None,
    with a warning, if it cannot be started: the driver runs regardless and its output stays in
    ``log_path``.
    """
    try:
        pidfd = os.pidfd_open(driver_pid)
    except (OSError, AttributeError) as exc:
        logger.warning("cannot follow driver %d for log shipping: %s", driver_pid, exc)
        return None
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, shipper_config(config).encode())
        os.close(write_end)
        write_end = -1
        argv = shipper_argv(job_id, attempt, log_path, offset, interval)
        fds = {"{config_fd}": str(read_end), "{pidfd}": str(pidfd)}
        command = [python, "-m", "zkstore.jobs.logship", *(fds.get(a, a) for a in argv)]
        shipper = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            pass_fds=(read_end, pidfd),
        )
    except OSError as exc:
        logger.warning("cannot start the log shipper of %s attempt %d: %s", job_id, attempt, exc)
        return None
    else:
        with contextlib.suppress(OSError):  # it exited already, or we may not: it runs anyway
            os.setpriority(os.PRIO_PROCESS, shipper.pid, SHIPPER_NICENESS)
    finally:
        for fd in (read_end, write_end, pidfd):
            if fd >= 0:
                os.close(fd)
    # Reap it when it ends, so that no zombie is left behind; nobody waits for it otherwise.
    threading.Thread(target=shipper.wait, name=f"shipper-{job_id}", daemon=True).start()
    return shipper
