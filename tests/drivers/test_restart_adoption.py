"""A daemon restarted with its id: no job notices (issue 21).

Daemons are ``zkstore daemon`` processes (:class:`LocalCluster`), stopped with SIGTERM or
SIGKILL and started again with the same ``--id`` while checkpointing jobs run on them. The jobs
run until the test drops a stop file in their directory, so that every check happens while the
drivers are alive: same attempt, no lost attempt, no false reason in any driver log, each
driver's working directory there while it runs, the daemon's log shipper the same process,
and its stored log each line once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from recovery.member.log_shipping import SHIPPER_NICENESS
from tests.cli import connection, with_credentials, zkstore
from tests.helpers import BIN, SESSION_TIMEOUT, wait_for
from zkstore.config import StoreConfig
from zkstore.records.job_states import SUCCEEDED
from zkstore.records.strict import utc_now
from zkstore.zookeeper.zk import ZooKeeper
from zkstore_dev.chaos import job

pytestmark = pytest.mark.e2e

#: Lines a driver writes only when something went wrong with it (the false reasons a restart
#: used to cause: the duplicate refused, the live driver stopping itself).
FALSE_REASONS = ("stops itself", "refusing to start", "superseded", "stopping it")
#: How long a daemon may take to start and register on a loaded 2-core machine: its interpreter
#: and imports, then a session (each a few session timeouts at worst).
START = SESSION_TIMEOUT * 10


def where(client: Client, job_id: str) -> str | None:
    status = client.status(job_id).status
    return status.daemon_id if status is not None else None


def member_pid(client: Client, daemon_id: str) -> int | None:
    found = client.cluster.zk.get_if_exists(client.cluster.layout.member(daemon_id))
    return None if found is None else int(json.loads(found[0])["pid"])


def stat_field(pid: int, field: int) -> int | None:
    """Field ``field`` (1-based, as in proc(5)) of ``/proc/<pid>/stat``, None if no such pid."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rfind(")") + 2 :].split()[field - 3])


def nice(pid: int) -> int | None:
    return stat_field(pid, 19)


def start_ticks(pid: int) -> int | None:
    return stat_field(pid, 22)


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def shippers(local: LocalCluster, daemon_id: str) -> set[int]:
    """The log shipper that daemon started (at the shipper's lower priority): one for all."""
    wanted = min(19, os.getpriority(os.PRIO_PROCESS, 0) + SHIPPER_NICENESS)  # the suite's own
    return {p for p in local.driver_processes(member=daemon_id) if nice(p) == wanted}


def steps(out: Path) -> int:
    return len(job.progress_times(out))


def stored_as(config: StoreConfig, job_id: str, text: str) -> bool:
    """Whether attempt 1's stored log is ``text`` (``jobs logs``, in this process)."""
    return zkstore(config, "jobs logs", job_id, "--attempt", "1").stdout == text


def stored_log(config: StoreConfig, job_id: str) -> str:
    done = subprocess.run(
        [str(BIN / "zkstore"), "jobs", "logs", job_id, "--attempt", "1", *connection(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=with_credentials(config, None),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def daemon_row(url: str, daemon_id: str) -> str:
    """The status page's row of ``daemon_id`` in its daemons table, as text ("" if absent)."""
    with urllib.request.urlopen(f"{url}/", timeout=30) as answer:
        page = answer.read().decode()
    row = re.search(rf"<tr><td><code>{re.escape(daemon_id)}</code></td>.*?</tr>", page, re.S)
    return "" if row is None else re.sub(r"<[^>]+>", "", row.group(0))


def restart_under_jobs(
    local: LocalCluster,
    client: Client,
    config: StoreConfig,
    tmp_path: Path,
    how: signal.Signals,
    *,
    leader: bool,
) -> None:
    """Two daemons, four jobs (two on each); stop one with ``how`` and start it again with its
    id while its two jobs run; everything checked while they still run, then they end. While a
    daemon stopped with SIGTERM is away, the other's status page says what is known of it:
    gone, its attempts still placed on it, their drivers possibly alive (issue 49.4: it said
    "LOST ... its 2 attempt(s) not re-placed yet" of drivers alive and about to be adopted)."""
    local.extra_args = ("--max-drivers", "2")
    local.http = True
    for name in ("d1", "d2"):
        local.start_daemon(name)
    first = local.wait_for_leader(timeout=START).daemon_id
    wait_for(lambda: len(client.cluster.zk.children(client.cluster.layout.members)) == 2, START)
    outs = {f"j{i}": tmp_path / f"j{i}" for i in range(4)}
    for job_id, out in outs.items():
        client.submit_function(job.sum_of_squares, str(out), None, 0.2, job_id=job_id)
    wait_for(lambda: all(steps(o) >= 3 for o in outs.values()), timeout=90, what="progress")
    placed = {job_id: where(client, job_id) for job_id in outs}
    victim = first if leader else next(n for n in ("d1", "d2") if n != first)
    mine = sorted(j for j, m in placed.items() if m == victim)
    assert len(mine) == 2, placed
    drivers = {j: local.driver_pid(j) for j in mine}
    shipping = shippers(local, victim)
    assert len(shipping) == 1, "one log shipper for every attempt of the daemon"

    local.daemons[victim].signal(how)
    local.daemons[victim].process.wait(timeout=START)
    if how == signal.SIGTERM:  # its session closed: it left the fleet at once
        survivor = local.daemons[next(n for n in ("d1", "d2") if n != victim)]
        assert survivor.url is not None
        row = wait_for(
            lambda: "GONE" in (r := daemon_row(survivor.url or "", victim)) and r,
            timeout=START,
            what="the stopped daemon shown as gone",
        )
        assert "left the fleet" in row and "2 attempt(s) still placed on it" in row, row
        assert "LOST" not in row and "not re-placed" not in row, row
    again = local.start_daemon(victim)
    wait_for(lambda: member_pid(client, victim) == again.pid, START, what="registered again")
    assert again.alive, again.log()[-2000:]
    # The jobs go on, the same drivers, in their own directories, shipped by the same shipper.
    progress = {j: steps(o) for j, o in outs.items()}
    wait_for(lambda: all(steps(o) >= progress[j] + 5 for j, o in outs.items()), timeout=90)
    for job_id in mine:
        assert local.driver_pid(job_id) == drivers[job_id], f"{job_id}: the same driver runs"
        work_dir = local.work_dir / "attempts" / f"{job_id}-attempt-1"
        assert work_dir.is_dir(), f"{job_id}: its working directory is there while it runs"
        assert client.status(job_id).attempt == 1
        status = client.status(job_id).status
        assert status is not None and (status.lost or 0) == 0
    assert shippers(local, victim) == shipping, "the same shipper, and no second one"
    assert again.log().count("attempt 1 adopted") == 2, again.log()[-3000:]

    for out in outs.values():
        (out / job.STOP).touch()
    for job_id in outs:
        result = client.wait(job_id, timeout=90)
        assert (result.outcome, result.attempts) == (SUCCEEDED, 1), job_id
    for job_id, out in outs.items():
        assert [a.attempt for a in job.attempts(out)] == [1], f"{job_id} ran once"
    logs = sorted((local.work_dir / "drivers").rglob("*.log"))
    assert len(logs) == 4, logs
    for log in logs:
        text = log.read_text()
        assert not [r for r in FALSE_REASONS if r in text], f"{log}:\n{text[-3000:]}"
    for job_id in mine:  # each line stored once: no second shipper, no duplicate's output
        local_log = (local.work_dir / "drivers" / job_id / "attempt-1.log").read_text()
        # asked in this process while it waits; then read as a user does (the installed script)
        wait_for(partial(stored_as, config, job_id, local_log), timeout=60, what="its log stored")
        assert stored_log(config, job_id) == local_log


def test_a_daemon_restarted_after_sigterm_adopts_its_drivers(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    restart_under_jobs(local, client, runtime_config, tmp_path, signal.SIGTERM, leader=False)


def test_the_leader_restarted_after_sigkill_adopts_its_drivers(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    restart_under_jobs(local, client, runtime_config, tmp_path, signal.SIGKILL, leader=True)


# -- the earlier holder of the id --------------------------------------------------------------


def plant_member(
    config: StoreConfig,
    zk: ZooKeeper,
    daemon_id: str,
    *,
    pid: int,
    host: str | None = None,
    start_ticks: int | None = None,
    boot_id: str | None = None,
) -> ZooKeeper:
    """A member record of ``daemon_id`` in ``zk``, a session of our own (a stand-in's: alive
    until we stop it, whatever the load)."""
    info = {
        "member_id": daemon_id,
        "host": host or socket.gethostname(),
        "pid": pid,
        "slots": 1,
        "started": utc_now(),
        "start_ticks": start_ticks,
        "boot_id": boot_id,
    }
    zk.ensure_path(f"{config.base_path}/members")
    zk.create(f"{config.base_path}/members/{daemon_id}", json.dumps(info).encode(), ephemeral=True)
    return zk


def dead_process() -> tuple[int, int]:
    """The pid and start time of a process of this host that has ended (and was reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = start_ticks(child.pid)
    child.wait()
    assert ticks is not None
    return child.pid, ticks


def test_a_restart_takes_over_the_id_of_its_dead_predecessor_at_once(
    local: LocalCluster,
    client: Client,
    runtime_config: StoreConfig,
    stand_in_session: Callable[[], ZooKeeper],
) -> None:
    pid, ticks = dead_process()
    holder = plant_member(
        runtime_config, stand_in_session(), "again", pid=pid, start_ticks=ticks, boot_id=boot_id()
    )
    try:  # the planted session stays alive: only the takeover lets the daemon in
        daemon = local.start_daemon("again")
        wait_for(lambda: member_pid(client, "again") == daemon.pid, START, what="taken over")
        assert daemon.alive
        assert "is gone; removing its member record now" in daemon.log()
        assert "waiting for that session" not in daemon.log()
    finally:
        holder.stop()


def test_a_restart_waits_for_a_holder_it_cannot_check_and_never_exits_2(
    local: LocalCluster,
    client: Client,
    runtime_config: StoreConfig,
    stand_in_session: Callable[[], ZooKeeper],
) -> None:
    holder = plant_member(
        runtime_config, stand_in_session(), "elsewhere", host="another-host", pid=os.getpid()
    )
    daemon = local.start_daemon("elsewhere")
    try:
        wait_for(lambda: "waiting for that session to end" in daemon.log(), START, what="waits")
        end = time.monotonic() + SESSION_TIMEOUT  # a progress line at least once more
        wait_for(lambda: "still waiting" in daemon.log() or time.monotonic() > end, START)
        assert daemon.alive, daemon.log()[-2000:]
        assert member_pid(client, "elsewhere") == os.getpid(), "the holder's record is left alone"
    finally:
        holder.stop()  # its session ends: the daemon takes the id
    wait_for(lambda: member_pid(client, "elsewhere") == daemon.pid, START, what="registered")
    assert daemon.alive


def test_a_live_daemon_of_this_host_still_refuses_a_second_with_its_id(
    local: LocalCluster,
    runtime_config: StoreConfig,
    stand_in_session: Callable[[], ZooKeeper],
) -> None:
    """A guard (it passed before too): the takeover is for a dead holder only."""
    me = os.getpid()  # this test process plays the live holder: same host, boot and start time
    holder = plant_member(
        runtime_config,
        stand_in_session(),
        "twin",
        pid=me,
        start_ticks=start_ticks(me),
        boot_id=boot_id(),
    )
    try:
        second = subprocess.run(
            [str(BIN / "zkstore"), "daemon", "--id", "twin"],
            env=local.environment(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        holder.stop()
    assert second.returncode == 2, second
    assert "in use by another live daemon" in second.stderr
    assert "Traceback" not in second.stderr
