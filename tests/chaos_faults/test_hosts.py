"""Hosts that really fail (zkstore_dev/hosts.py): namespaces made and removed, cuts that really
cut, and one partition end to end, as ``make chaos`` runs them (its other scenarios, and their
checks, are ``make chaos``'s; zkstore_dev/chaos/partitions.py).

They need root (ip netns add): elsewhere they skip, saying so in one line.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.helpers import hands_client, wait_for
from zkstore.config import StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.records.job_states import SUCCEEDED
from zkstore_dev import hosts
from zkstore_dev.chaos import job, ledger
from zkstore_dev.hosts import Network

pytestmark = pytest.mark.e2e

ECHO = """
import socket, sys
with socket.create_server((sys.argv[1], 7000)) as server:
    while True:
        connection, _ = server.accept()
        connection.sendall(b"here")
        connection.close()
"""

ASK = """
import socket, sys
try:
    answer = socket.create_connection((sys.argv[1], 7000), timeout=float(sys.argv[2]))
    print(answer.recv(4).decode())
except OSError:
    print("cut")
"""


@pytest.fixture
def network() -> Iterator[Network]:
    why = hosts.unavailable()
    if why is not None:
        pytest.skip(why)
    with Network(["a", "b", "c"]).start() as made:
        yield made


def names(command: list[str]) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def test_hosts_have_their_own_address_and_are_removed_with_their_processes(
    network: Network,
) -> None:
    addresses = {host.address for host in network.hosts.values()}
    assert len(addresses) == 3
    sleeper = subprocess.Popen(network["b"].command([sys.executable, "-c", "input()"]),
                               stdin=subprocess.PIPE)  # fmt: skip
    wait_for(lambda: network.host_of(sleeper.pid) == "b", timeout=30, what="the process in b")
    assert network["b"].pids() == [sleeper.pid], "ip netns exec keeps the pid it is started with"
    network.close()
    assert sleeper.wait(timeout=30) != 0, "killed with its host"
    assert network.tag not in names(["ip", "netns", "list"])
    assert network.tag not in names(["ip", "-o", "link", "show"])


def test_a_cut_really_cuts_one_way_or_both_and_heal_restores(network: Network) -> None:
    """Packets are dropped silently (a connect times out, it is not refused), only between the
    hosts named, and only in the direction named."""
    b = network["b"].address
    server = subprocess.Popen(network["b"].command([sys.executable, "-c", ECHO, b]))
    try:

        def ask(host: str, wait: float = 2.0) -> str:
            command = [sys.executable, "-c", ASK, b, str(wait)]
            return names(network[host].command(command)).strip()

        wait_for(lambda: ask("a") == "here", timeout=30, what="b answers a")
        cut = network.isolate("a", from_="b")
        assert (ask("a"), ask("c")) == ("cut", "here")
        cut.restore()
        assert ask("a") == "here"
        network.one_way("b", "a")  # b's answers to a are dropped: a connect from a fails too
        assert (ask("a"), ask("c")) == ("cut", "here")
        network.heal()
        assert ask("a") == "here" and network.cuts == 0
        network.isolate("b")  # from everybody, this process included
        with pytest.raises(OSError):
            socket.create_connection((b, 7000), timeout=2).close()
        network.heal()
        wait_for(lambda: ask("c") == "here", timeout=30, what="b back")
    finally:
        server.kill()
        server.wait()


def test_what_a_killed_run_left_is_removed_and_a_live_runs_kept(network: Network) -> None:
    script = (
        "import sys, time\n"
        "from zkstore_dev.hosts import Network\n"
        "made = Network(['x']).start()\n"
        "print(made.tag, flush=True)\n"
        "time.sleep(600)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    tag = child.stdout.readline().strip()
    assert tag in names(["ip", "netns", "list"])
    assert not any(tag in name for name in hosts.remove_leftovers()), "its maker lives"
    child.kill()
    child.wait()
    removed = hosts.remove_leftovers()
    assert f"{tag}-x" in removed and f"{tag}-router" in removed
    assert tag not in names(["ip", "netns", "list"]) and tag not in names(["ip", "-o", "link"])
    assert network.tag in names(["ip", "netns", "list"]), "this live run's hosts stay"


def test_a_driver_host_cut_off_from_zookeeper_stops_its_driver_before_the_job_runs_elsewhere(
    tmp_path: Path,
) -> None:
    """The host of a running driver cut off from ZooKeeper, storage (local disk) still there: the
    driver stops itself before its session can expire, the job runs again on the other host
    from its checkpoint, and storage took no write of the first attempt after the second's
    first. After the heal, each host holds its daemon and nothing else."""
    why = hosts.unavailable()
    if why is not None:
        pytest.skip(why)
    with Network(["zk", "d1", "d2"]).start() as network:
        zk_host = network["zk"]
        with EmbeddedZooKeeper(
            port=2181, address=zk_host.address, command_prefix=zk_host.command([])
        ) as server:
            storage = tmp_path / "storage"
            config = StoreConfig(
                zk_hosts=server.connect_string,
                root="/hosts",
                storage_url=storage.as_uri(),
                session_timeout=4.0,
                timeout=2.0,
            )
            daemons = {name: network[name].command([]) for name in ("d1", "d2")}
            local = LocalCluster(config, tmp_path / "rt", restart_backoff=0.5, hosts=daemons)
            out = tmp_path / "out"
            try:
                for name in daemons:
                    local.start_daemon(name)
                local.wait_for_leader(timeout=120)
                with hands_client(config) as client:
                    where = (f"{storage.as_uri()}/ledger", {})
                    client.submit_function(
                        job.sum_of_squares, str(out), None, 0.2, where, job_id="cut"
                    )
                    wait_for(lambda: len(job.progress_times(out)) >= 3, timeout=120, what="steps")
                    first = job.attempts(out)[0]
                    host = network.host_of(first.pid)
                    assert host in daemons
                    cut_at = time.time()
                    cut = network.isolate(host, from_="zk")
                    wait_for(lambda: len(job.attempts(out)) == 2, timeout=60, what="attempt 2")
                    cut.restore()
                    wait_for(
                        lambda: job.attempts(out)[1].step >= job.attempts(out)[0].step + 3,
                        timeout=60,
                        what="attempt 2 working",
                    )
                    first, second = job.attempts(out)
                    assert network.host_of(second.pid) not in (host, None)
                    (out / job.STOP).touch()
                    result = client.wait("cut", timeout=120)
                accounted = _only_daemons(network, local, daemons)
            finally:
                local.stop()
    assert (result.outcome, result.attempts) == (SUCCEEDED, 2)
    assert first.last < second.start, "never both alive"
    assert second.start - cut_at > config.session_timeout * 0.75, "not before the lease ended"
    entries = ledger.Ledger(f"{storage.as_uri()}/ledger").entries()
    assert {e.attempt for e in entries} == {1, 2}
    assert ledger.zombie_writes(entries) == []
    assert accounted == []


def _title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""  # gone meanwhile


def _only_daemons(
    network: Network, local: LocalCluster, daemons: dict[str, list[str]]
) -> list[str]:
    """What is on each daemon host once the job ended that is not its daemon's (its daemon,
    fork server and log shipper), after a while for the drivers to end."""

    def left() -> list[str]:
        found = []
        for name in daemons:
            helpers = (f"zkstore fork-server {name}", f"zkstore log-shipper {name}")
            for pid in network[name].pids():
                title = _title(pid)
                if title and pid != local.daemons[name].pid and not title.startswith(helpers):
                    found.append(f"{name}: {pid} {title}")
        return found

    with contextlib.suppress(AssertionError):
        wait_for(lambda: not left(), timeout=60, what="the drivers to end")
    return left()
