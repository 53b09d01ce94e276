"""An embedded ZooKeeper server for development, the demo and the tests.

It runs ``org.apache.zookeeper.server.ZooKeeperServerMain`` from the jars that the installed
``pyspark`` wheel ships (``pyspark/jars/zookeeper-*.jar``) with the machine's ``java``, on a free
127.0.0.1 port and a temporary data directory. It is a single server: fine for development, not a
production ensemble (:mod:`zkstore_dev.ensemble` runs three servers for the chaos tests).

The server dies with the process that started it (:mod:`zkstore.lifeline`): a SIGKILLed
``zkstore zookeeper``, demo or test run leaves no JVM behind.

A server starts in half the CPU when its JVM maps a class-data archive of the classes a server
loads (:func:`make_class_data`: a dynamic CDS archive, about 0.5 s of CPU a start instead of 0.9 s
on the 2-core CI machine), named by ``class_data`` or :data:`CLASS_DATA_ENV` (the test suite's:
``tests/zk_jvm.py``). The JVM checks it against its own build and class path, and loads every
class from the jars as usual where they differ: a stale archive costs time, never correctness.
But it trusts the file's contents (a truncated archive crashes it with SIGBUS as it maps it), so
an archive is used only while it matches the digest written beside it when it was made
(:func:`class_data_verified`, checked once per process and file).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from zkstore import lifeline
from zkstore.closing import Closeable
from zkstore.errors import ConfigError, StoreUnavailable
from zkstore.zookeeper.retry import RACES, TryAgain

__all__ = [
    "CLASS_DATA_ENV",
    "SHORT_JVM_OPTIONS",
    "STANDALONE_MAIN",
    "EmbeddedZooKeeper",
    "class_data_key",
    "class_data_verified",
    "find_java",
    "find_zookeeper_jars",
    "four_letter_word",
    "free_port",
    "make_class_data",
]

logger = logging.getLogger(__name__)

STANDALONE_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"

#: The JVM of a development server: the C1 compiler alone, one compiler thread, the serial
#: collector. A short-lived server with little load spends most of its CPU compiling (about 40%
#: less CPU without C2, for a start and for tens of thousands of requests after it, measured on
#: a 2-core machine); a production server, long-lived and busy, wants the JVM's defaults
#: (``short_jvm=False``, as the benchmarks run it).
#: The server's tick: it expires a session at the first tick after its timeout, so the tick
#: is what a host's loss waits beyond the session (on average half of it). ZooKeeper's own
#: 2000 ms would add a second to a 2-s session's failover, 500 ms a quarter of one; 100 ms
#: adds 50 ms (the server's only cost: it looks for expired sessions ten times a second).
TICK_MS = 100
#: The shortest session it grants (ZooKeeper's default is two ticks): one second, as before
#: the tick was shortened, so no session is shorter than the daemons' lease margins allow.
MIN_SESSION_MS = 1000
SHORT_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=1")
#: The class-data archive every embedded server maps unless told otherwise (if the file exists).
CLASS_DATA_ENV = "ZKSTORE_DEV_ZK_CLASS_DATA"

_LOG4J = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
"""


def find_java() -> str:
    """The ``java`` executable: ``$JAVA_HOME/bin/java``, else the one on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if not found:
        raise ConfigError(
            "Java not found: the embedded ZooKeeper needs a Java runtime (17 or newer) on PATH "
            "or in JAVA_HOME"
        )
    return found


def find_zookeeper_jars() -> Path:
    """The ``jars`` directory of the installed pyspark wheel, checked to hold ZooKeeper."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "pyspark is not installed: the embedded ZooKeeper runs from the jars of the pyspark "
            "wheel (pip install pyspark)"
        )
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    if not any(jars.glob("zookeeper-[0-9]*.jar")):
        raise ConfigError(
            f"no zookeeper-*.jar in {jars}: this pyspark installation does not ship ZooKeeper"
        )
    return jars


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(port: int, address: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on ``address``:``port``."""
    try:
        socket.create_connection((address, port), timeout=1.0).close()
    except OSError:
        return False
    return True


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on TCP ``port`` (from ``/proc``: the
    tables of the process's own network namespace, which may not be this process's)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return not os.path.isdir("/proc/self/fd")  # no /proc here: cannot tell
    except OSError:
        return False
    inodes = set()
    for table in (f"/proc/{pid}/net/tcp", f"/proc/{pid}/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            next(lines, None)
            for line in lines:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{inode}]")
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
    return False


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``...) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class EmbeddedZooKeeper(Closeable):
    """A ZooKeeper server process: ``start()``, use :attr:`connect_string`, ``stop()``.

    It can be stopped and started again on the same port and data directory (tests use that to
    simulate an outage): :meth:`stop` keeps the data unless told otherwise; :meth:`close` (and
    leaving a ``with`` block) stops it and removes a data directory it created itself.

    Its JVM is a development server's (:data:`SHORT_JVM_OPTIONS`) unless ``short_jvm=False``,
    mapping the class-data archive ``class_data`` (by default :data:`CLASS_DATA_ENV`'s) if it
    exists; ``jvm_options`` come after those, so a caller's own ``-XX`` flag wins.

    ``address`` is where it serves clients (127.0.0.1 by default; a host's own address in a
    network namespace, :mod:`zkstore_dev.hosts`), ``command_prefix`` what its command is run
    through (``ip netns exec NAME``: the JVM keeps the pid that is started).
    """

    def __init__(
        self,
        *,
        port: int = 0,
        data_dir: str | os.PathLike[str] | None = None,
        tick_time_ms: int = TICK_MS,
        max_session_timeout_ms: int = 60_000,
        extra_config: Sequence[str] = (),
        jvm_options: Sequence[str] = (),
        main_class: str = STANDALONE_MAIN,
        short_jvm: bool = True,
        address: str = "127.0.0.1",
        command_prefix: Sequence[str] = (),
        class_data: str | None = None,
    ) -> None:
        self.address = address
        self.command_prefix = tuple(command_prefix)
        self.port = port or free_port()
        self._port_chosen = not port  # ours to replace if another server takes it first
        self._owns_dir = data_dir is None
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.extra_config = tuple(extra_config)
        self.jvm_options = tuple(jvm_options)
        self.main_class = main_class
        self.short_jvm = short_jvm
        #: the class-data archive to map if it exists (None: :data:`CLASS_DATA_ENV`'s; "": none)
        self.class_data = class_data
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.address}:{self.port}"

    @property
    def data_dir(self) -> Path:
        """The server's directory (configuration, log, data); one this object creates is made
        at first use, so a server that cannot even launch (no Java) leaves nothing behind."""
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="zkstore-zookeeper-"))
        return self._data_dir

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def _write_config(self) -> Path:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"dataDir={self.data_dir / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.address}",
                    "maxClientCnxns=0",
                    f"minSessionTimeout={max(2 * self.tick_time_ms, MIN_SESSION_MS)}",
                    f"maxSessionTimeout={self.max_session_timeout_ms}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat,mntr,envi,cons,conf",
                    # Each job's node has a quota the server enforces (zkstore.cluster.quotas):
                    # unknown keys become ``zookeeper.<key>`` system properties.
                    "enforceQuota=true",
                    *self.extra_config,
                    "",
                ]
            )
        )
        (self.data_dir / "log4j2.properties").write_text(_LOG4J)
        return config

    def start(self, timeout: float = 30.0) -> EmbeddedZooKeeper:
        """Start the server and wait until it answers ``imok``; raise with its log if it cannot.

        The answer must come from this server (its JVM holds the listening socket): a port
        chosen free can be taken by another process before the JVM binds it, and then another
        server answers on it while this one exits. A port this object chose is then replaced by
        a new one (the race policy :data:`zkstore.zookeeper.retry.RACES`); a port it was given
        raises.
        """
        if self._process is not None and self._process.poll() is None:
            return self
        end = time.monotonic() + timeout
        RACES.call(
            lambda: self._start_once(end),
            what="embedded ZooKeeper",
            error=StoreUnavailable,
        )
        return self

    def _start_once(self, end: float) -> None:
        """Launch on the current port and wait until ready; :class:`TryAgain` with a new port
        if another server holds a port this object chose (it must not be taken for this one)."""
        if not (self._port_chosen and _answers(self.port, self.address)):
            self._launch()
            if self._wait_ready(end):
                return
        taken = self.port
        if not self._port_chosen:
            raise StoreUnavailable(
                f"embedded ZooKeeper could not listen on {self.address}:{taken}: another server "
                "holds the port\n" + self.log_tail()
            )
        self.port = free_port()
        raise TryAgain(f"port {taken} was taken by another server")

    def _launch(self) -> None:
        java, jars = find_java(), find_zookeeper_jars()
        config = self._write_config()
        command = [
            *self.command_prefix,
            java,
            "-Xmx256m",
            *(SHORT_JVM_OPTIONS if self.short_jvm else ("-XX:+UseSerialGC",)),
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-Dzookeeper.admin.enableServer=false",
            *self._class_data_options(),
            *self.jvm_options,
            "-cp",
            f"{jars}/*",
            self.main_class,
            str(config),
        ]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                lifeline.wrap(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        logger.debug("started ZooKeeper pid %s on %s", self._process.pid, self.connect_string)

    def _class_data_options(self) -> list[str]:
        archive = os.environ.get(CLASS_DATA_ENV, "") if self.class_data is None else self.class_data
        return [f"-XX:SharedArchiveFile={archive}"] if class_data_verified(archive) else []

    def _wait_ready(self, end: float) -> bool:
        """True once this server answers ``imok``; False if it exited while another server holds
        its port; raises if it exited otherwise or did not answer by ``end``."""
        assert self._process is not None
        while time.monotonic() < end:
            if self._process.poll() is not None:
                if _answers(self.port, self.address):
                    self._process = None
                    return False
                raise StoreUnavailable(
                    f"embedded ZooKeeper exited with code {self._process.returncode}:\n"
                    + self.log_tail()
                )
            with contextlib.suppress(OSError):
                if four_letter_word(self.address, self.port, "ruok") == "imok" and self._is_mine():
                    return True
            time.sleep(0.05)
        self.stop()
        raise StoreUnavailable(
            "embedded ZooKeeper did not answer within the start timeout:\n" + self.log_tail()
        )

    def _is_mine(self) -> bool:
        """Whether this object's JVM holds the socket listening on the port (Linux ``/proc``;
        elsewhere taken as true: the answer is then trusted as before)."""
        assert self._process is not None
        return _listens(self._process.pid, self.port)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the server (SIGKILL to crash it, SIGSTOP/SIGCONT to pause it)."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signum)

    def kill(self) -> None:
        """Crash the server (SIGKILL) and reap it; :meth:`start` brings it back on its data."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
        if process is not None:
            process.wait()

    def log_tail(self, lines: int = 20) -> str:
        if self._data_dir is None:
            return "(no log: never launched)"  # and no directory made just to say so
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def stop(self, *, remove_data: bool = False) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)  # a paused server cannot handle SIGTERM
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if remove_data and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)

    def close(self) -> None:
        """Stop, and remove the data directory if this object created it."""
        self.stop(remove_data=self._owns_dir)

    def __enter__(self) -> Self:
        """``with EmbeddedZooKeeper() as server:`` starts it, and closes it on the way out."""
        self.start()
        return self


def class_data_key() -> str:
    """What a class-data archive of the server is made for, as 16 hex digits: the ``java``
    (its resolved path, size and time) and each ZooKeeper jar's name, size and time. An
    archive named by another key was made for another JVM or other jars."""
    java = Path(find_java()).resolve()
    digest = hashlib.sha256()
    for path in (java, *sorted(find_zookeeper_jars().glob("*.jar"))):
        found = path.stat()
        digest.update(f"{path}\0{found.st_size}\0{found.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _digest_path(archive: Path) -> Path:
    return archive.with_name(archive.name + ".sha256")


def _file_digest(path: Path) -> str:
    with open(path, "rb") as data:
        return hashlib.file_digest(data, "sha256").hexdigest()


def class_data_verified(archive: str | os.PathLike[str]) -> bool:
    """Whether ``archive`` is a regular file that matches the digest written beside it when it
    was made (:func:`make_class_data`): a JVM given a damaged archive may crash mapping it."""
    try:
        found = os.stat(archive)
    except (OSError, ValueError):  # no such file, or "" (none asked)
        return False
    return stat.S_ISREG(found.st_mode) and _verified(
        os.path.realpath(archive), found.st_size, found.st_mtime_ns
    )


@functools.lru_cache(maxsize=8)
def _verified(archive: str, size: int, mtime_ns: int) -> bool:
    """The digest check, once per process for a file of this size and time."""
    try:
        expected = _digest_path(Path(archive)).read_text().split()
        return expected == [_file_digest(Path(archive)), str(size)]
    except OSError:
        return False


def make_class_data(path: Path, timeout: float = 60.0) -> Path:
    """Make the class-data archive ``path``: a server started with ``-XX:ArchiveClassesAtExit``
    serves one session's requests, and its JVM writes the classes it loaded as it stops. Written
    in a scratch directory of its own beside ``path`` and renamed, its digest beside it last
    (:func:`class_data_verified`), so that a server never maps a half-written archive; raises
    :class:`~zkstore.errors.StoreUnavailable` if the JVM wrote none."""
    from kazoo.client import KazooClient

    path.parent.mkdir(parents=True, exist_ok=True)
    # the archive and its digest are written in a directory of this call's own (``mkdtemp``:
    # a fresh name, this user's alone), and moved into place from there
    scratch = Path(tempfile.mkdtemp(prefix=f".{path.name}.making-", dir=path.parent))
    making, digest = scratch / "archive.jsa", scratch / "digest"
    server = EmbeddedZooKeeper(class_data="", jvm_options=(f"-XX:ArchiveClassesAtExit={making}",))
    try:
        server.start(timeout)
        client = KazooClient(hosts=server.connect_string, timeout=timeout)
        client.start(timeout)
        try:  # the classes that serve a session's reads, writes, watches and transactions
            client.ensure_path("/archive/made")
            client.get("/archive/made", watch=lambda event: None)
            transaction = client.transaction()
            transaction.create("/archive/made/node", b"x", ephemeral=True)
            transaction.commit()
            client.get_children("/archive/made")
        finally:
            client.stop()
            client.close()
        server.stop()  # SIGTERM: the JVM exits, and writes the archive as it does
        if not making.is_file():
            raise StoreUnavailable(f"the server's JVM wrote no archive:\n{server.log_tail()}")
        digest.write_text(f"{_file_digest(making)} {making.stat().st_size}\n")
        making.replace(path)
        digest.replace(_digest_path(path))  # last: until it is there, the archive is not used
    finally:
        server.close()
        try:  # ours (made above); rmtree follows no link inside
            shutil.rmtree(scratch)
        except OSError as exc:
            logger.warning("the archive's scratch directory %s was not removed: %s", scratch, exc)
    return path
