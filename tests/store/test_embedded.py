"""The embedded ZooKeeper launcher and ``zkstore zookeeper``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.helpers import wait_for
from zkstore.dev.embedded import (
    CLASS_DATA_ENV,
    EmbeddedZooKeeper,
    find_java,
    four_letter_word,
    make_class_data,
)
from zkstore.errors import ConfigError

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


def zookeeper_command(tmp: Path) -> subprocess.Popen[str]:
    """``zkstore zookeeper`` running, its output readable as text, its temporary directory
    under ``tmp`` (a SIGKILLed command cannot remove it)."""
    return subprocess.Popen(
        [str(BIN / "zkstore"), "zookeeper"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )


def test_zookeeper_command_starts_a_server_kazoo_can_use(tmp_path: Path) -> None:
    process = zookeeper_command(tmp_path)
    try:
        assert process.stdout is not None
        connect_string = process.stdout.readline().strip()
        host, port = connect_string.split(":")
        assert host == "127.0.0.1"
        client = KazooClient(connect_string)
        client.start(timeout=10)
        client.create("/hello", b"world")
        assert client.get("/hello")[0] == b"world"
        said = four_letter_word(host, int(port), "conf").splitlines()
        conf = dict(line.split("=", 1) for line in said if "=" in line)
        client.stop()
        client.close()
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0
    assert "export ZKSTORE_ZK=" in err
    # a short tick (a session expires at the first tick after its timeout: the tick is what a
    # host's loss waits beyond the session), and still no session under a second
    assert (conf["tickTime"], conf["minSessionTimeout"]) == ("100", "1000"), conf
    with pytest.raises(OSError):
        four_letter_word("127.0.0.1", int(port), "ruok")
    assert list(tmp_path.iterdir()) == [], "the temporary data directory is removed at the end"


def test_server_can_be_stopped_and_restarted_with_its_data(tmp_path: Any) -> None:
    server = EmbeddedZooKeeper(data_dir=tmp_path / "zk").start()
    try:
        client = KazooClient(server.connect_string)
        client.start(timeout=10)
        client.create("/kept", b"1")
        client.stop()
        server.stop()
        server.start()
        client = KazooClient(server.connect_string)
        client.start(timeout=10)
        assert client.get("/kept")[0] == b"1"
        client.stop()
    finally:
        server.close()
    assert (tmp_path / "zk").exists(), "a data directory given by the caller is kept"


@pytest.mark.parametrize("short_jvm", [True, False], ids=["development", "production"])
def test_the_servers_jvm_runs_with_the_compiler_it_was_asked_for(short_jvm: bool) -> None:
    """A development server's JVM compiles with C1 alone (far less CPU for a short life); the
    benchmarks' runs with the JVM's defaults. Asked of the running JVM itself (``jcmd``)."""
    jcmd = Path(find_java()).resolve().parent / "jcmd"
    with EmbeddedZooKeeper(short_jvm=short_jvm) as server:
        server.start()
        flags = subprocess.run(
            [str(jcmd), str(server.pid), "VM.flags"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.split()
    assert "-XX:+UseSerialGC" in flags
    assert ("-XX:TieredStopAtLevel=1" in flags) is short_jvm
    assert ("-XX:CICompilerCount=1" in flags) is short_jvm


def maps(pid: int, archive: Path) -> bool:
    """Whether the process has the file ``archive`` mapped (its JVM shares the classes in it)."""
    return str(archive) in Path(f"/proc/{pid}/maps").read_text()


def serves(server: EmbeddedZooKeeper) -> bool:
    client = KazooClient(hosts=server.connect_string, timeout=30.0)
    client.start(30)
    try:
        client.ensure_path("/served")
        return client.exists("/served") is not None
    finally:
        client.stop()
        client.close()


def test_a_server_maps_the_class_data_archive_made_for_it_and_starts_without_a_bad_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive halves a server's start (tests/zk_jvm.py); it is an optimization only. A
    damaged one is never handed to the JVM (a truncated archive crashed it with SIGBUS), and
    the server serves as without it."""
    archive = make_class_data(tmp_path / "zk.jsa")
    made = sorted(p.name for p in tmp_path.iterdir())
    assert made == ["zk.jsa", "zk.jsa.sha256"], "renamed into place, no scratch left"
    monkeypatch.setenv(CLASS_DATA_ENV, str(archive))
    with EmbeddedZooKeeper() as server:  # the environment's archive, by default
        assert server.pid is not None and maps(server.pid, archive)
        assert serves(server)
    bad = tmp_path / "bad.jsa"
    bad.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])  # cut short
    Path(f"{bad}.sha256").write_text(Path(f"{archive}.sha256").read_text())
    with EmbeddedZooKeeper(class_data=str(bad)) as server:
        assert server.pid is not None and not maps(server.pid, bad)
        assert serves(server)
    with EmbeddedZooKeeper(class_data="") as server:  # none, whatever the environment says
        assert server.pid is not None and not maps(server.pid, archive)


def test_missing_java_is_explained_and_leaves_no_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    server = EmbeddedZooKeeper()
    with pytest.raises(ConfigError, match="Java not found"):
        server.start()
    assert "never launched" in server.log_tail()
    assert list(tmp_path.iterdir()) == []


def test_missing_pyspark_is_explained(tmp_path: Any) -> None:
    """Run the launcher where pyspark cannot be imported: it says what is missing."""
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "import importlib.util as u; u.find_spec = lambda name: None\n"
        "from zkstore.dev.embedded import find_zookeeper_jars\n"
        "try:\n    find_zookeeper_jars()\nexcept Exception as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ}
    )
    assert "pyspark is not installed" in out.stdout


def _gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (a zombie not yet reaped by init counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _assert_dies_with(parent: subprocess.Popen[str], jvm_pid: int) -> None:
    assert not _gone(jvm_pid), "the JVM runs while its parent does"
    parent.kill()
    parent.wait(timeout=30)
    wait_for(lambda: _gone(jvm_pid), timeout=60, what=f"JVM {jvm_pid} to die with its parent")


def test_sigkilled_zookeeper_command_leaves_no_jvm(tmp_path: Path) -> None:
    process = zookeeper_command(tmp_path)
    try:
        assert process.stdout is not None and process.stderr is not None
        port = int(process.stdout.readline().strip().rsplit(":", 1)[1])
        up = next(line for line in process.stderr if "ZooKeeper is up" in line)
        jvm_pid = int(re.search(r"pid (\d+)", up).group(1))  # type: ignore[union-attr]
        assert four_letter_word("127.0.0.1", port, "ruok") == "imok"
        _assert_dies_with(process, jvm_pid)
    finally:
        process.kill()
        process.wait()


def test_sigkilled_python_process_holding_a_server_leaves_no_jvm(tmp_path: Path) -> None:
    code = (
        "import sys, time\n"
        "from zkstore.dev.embedded import EmbeddedZooKeeper\n"
        "server = EmbeddedZooKeeper().start()\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    try:
        assert process.stdout is not None
        jvm_pid = int(process.stdout.readline())
        assert "zookeeper" in Path(f"/proc/{jvm_pid}/cmdline").read_text().lower()
        _assert_dies_with(process, jvm_pid)
    finally:
        process.kill()
        process.wait()
