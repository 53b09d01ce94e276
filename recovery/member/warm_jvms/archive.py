"""The class-data-sharing archive a daemon's Spark driver JVMs map Spark's classes from.

A Spark driver JVM loads and verifies some ten thousand classes from the jars at each start; a
dynamic CDS archive (``-XX:ArchiveClassesAtExit`` to make, ``-XX:SharedArchiveFile`` to use,
JDK 13 and newer) holds them ready to map. The daemon makes one in the background at its start
(:class:`.class_data.ClassData`), never blocking a launch: until it is ready, drivers start as
before.

It is made once per **key** (:class:`ArchiveKey`): the Java binary (resolved path, size, time),
pyspark's version and home, and the class path Spark's launcher gives a driver here
(:mod:`.home`); the archive's name is a digest of the key, and a sidecar file beside it names the
key with the archive's size and sha256. It is used only after it is verified (:func:`verify`):
both files regular, not links, this user's and writable by nobody else, in a directory of this
user's that nobody else may change; the sidecar naming this very key; the archive's bytes
matching the sidecar's digest. Anything else (another key: a new pyspark, a new Java; a file
somebody else wrote; a cut-off write) is ignored, said in the daemon's log, and a new archive
made. The JVM checks again what it can (its own build, each jar's size and time, the class
path's order) and silently loads the classes from the jars when they differ: a stale archive
costs time, never correctness. A JVM that refuses it (``-Xshare:auto``, the default) starts
anyway.

The daemon removes only its own files here, never through a link: archives and sidecars
(:func:`remove_stale`: regular files of this user's whose names it gives) and the scratch
directories of makings that did not end (:func:`remove_unfinished`).

The making JVM never outlives its daemon: a clean stop ends it and removes its scratch
directory (:meth:`.class_data.ClassData.stop`), a daemon that dies takes it along (a
parent-death signal, :mod:`zkstore.lifeline`), and the next daemon to hold the directory's lock
removes the scratch directory that one left (this user's directories of the maker's prefix;
while the lock is held nobody else makes one).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from recovery.member.warm_jvms import home
from zkstore import lifeline
from zkstore.records.strict import utc_now

__all__ = [
    "DUMP_JIT",
    "FORMAT",
    "MAKE_NICE",
    "MAKE_TIMEOUT",
    "SIDECAR",
    "SUFFIX",
    "WARM_UP",
    "ArchiveKey",
    "Sidecar",
    "digest",
    "dump_options",
    "locked",
    "make",
    "prepare_directory",
    "private_problem",
    "remove_stale",
    "remove_unfinished",
    "verify",
]

logger = logging.getLogger(__name__)

FORMAT = 1
SUFFIX = ".jsa"
SIDECAR = ".json"
_NAME = re.compile(r"spark-[0-9a-f]{16}\.(jsa|json)")
#: Seconds the making of an archive may take (a Spark job: 25 s of CPU here).
MAKE_TIMEOUT = 900.0
#: The niceness the archive is made at (``nice -n``): below the warm JVM started meanwhile.
MAKE_NICE = 10
#: The prefix of the scratch directory an archive is made in (then renamed into place).
MAKING = ".making-"
#: Seconds between two looks of the making's wait at whether the daemon stops.
STOP_POLL = 0.2
#: What an archive is made from: a driver's start, a query, an RDD job with a Python worker,
#: the context's stop (the classes a driver loads, most of what a first query loads).
WARM_UP = """\
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").appName("zkstore class-data archive").getOrCreate()
spark.range(100).selectExpr("sum(id)").collect()
spark.sparkContext.parallelize(range(10), 2).map(lambda x: x * 2).sum()
spark.stop()
"""
#: The JIT of the JVM that makes an archive: C1 alone. The archive holds the classes it loaded,
#: no compiled code, so a JVM of any compiler and collector maps it (a G1 and C2 driver mapped
#: one made so); C2's compiling was a quarter of the making's CPU: 33-34 s -> 24-25 s, 26-32 s
#: -> 23-24 s of wall (a daemon's first archive, docs/benchmarks.md).
DUMP_JIT = "-XX:TieredStopAtLevel=1"
#: Options of the environment's SPARK_SUBMIT_OPTS left out when making one (a JVM that maps a
#: dynamic archive cannot write another).
_NOT_WHEN_MAKING = re.compile(r"-XX:SharedArchiveFile=.*|-Xshare:.*|-XX:ArchiveClassesAtExit=.*")


@dataclass(frozen=True)
class ArchiveKey:
    """What an archive was made for: a JVM with another of these cannot use it."""

    java: str
    java_size: int
    java_mtime_ns: int
    pyspark: str
    spark_home: str
    class_path: str

    @property
    def name(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return f"spark-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


@dataclass(frozen=True)
class Sidecar:
    """The file beside an archive: its key, size and sha256."""

    key: ArchiveKey
    size: int
    sha256: str
    made: str

    def to_bytes(self) -> bytes:
        return json.dumps({"format": FORMAT, **asdict(self)}, sort_keys=True).encode()

    @classmethod
    def parse(cls, data: bytes) -> Sidecar:
        """Raises ValueError for anything this code would not have written."""
        raw = json.loads(data)
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise ValueError("not a sidecar of this format")
        key = raw.get("key")
        if not isinstance(key, dict):
            raise ValueError("no key")
        kinds = {
            f: (int if f.endswith(("size", "ns")) else str) for f in ArchiveKey.__annotations__
        }
        for name, kind in {**kinds, "size": int, "sha256": str, "made": str}.items():
            value = key.get(name) if name in kinds else raw.get(name)
            if type(value) is not kind:
                raise ValueError(f"{name!r} has the wrong type")
        return cls(
            ArchiveKey(**{f: key[f] for f in kinds}), raw["size"], raw["sha256"], raw["made"]
        )


def private_problem(path: Path, *, directory: bool = False) -> str | None:
    """What makes ``path`` untrustworthy (a link, not a regular file or directory, somebody
    else's, writable by others), or None."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return f"{path} is missing"
    except OSError as exc:
        return f"{path}: {exc}"
    wanted = stat.S_ISDIR if directory else stat.S_ISREG
    if not wanted(found.st_mode):
        return f"{path} is not a {'directory' if directory else 'regular file'}"
    if found.st_uid != os.geteuid():
        return f"{path} belongs to uid {found.st_uid}, not this daemon's"
    if found.st_mode & 0o022:
        return f"{path} may be changed by others (mode {stat.S_IMODE(found.st_mode):04o})"
    return None


def digest(path: Path) -> tuple[int, str]:
    """Size and sha256 of the file at ``path``, opened without following a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        hashed = hashlib.sha256()
        size = 0
        while chunk := f.read(1 << 20):
            hashed.update(chunk)
            size += len(chunk)
    return size, hashed.hexdigest()


def verify(directory: Path, key: ArchiveKey) -> tuple[Path | None, str]:
    """The archive for ``key`` in ``directory`` if it can be trusted (see the module), else None
    and why not."""
    archive = directory / f"{key.name}{SUFFIX}"
    sidecar = directory / f"{key.name}{SIDECAR}"
    for path in (archive, sidecar):
        problem = private_problem(path)
        if problem is not None:
            return None, problem
    try:
        recorded = Sidecar.parse(sidecar.read_bytes())
    except (OSError, ValueError) as exc:
        return None, f"{sidecar} is unreadable: {exc}"
    if recorded.key != key:
        return None, f"{sidecar} names another Java, pyspark or class path"
    try:
        size, sha256 = digest(archive)
    except OSError as exc:
        return None, f"{archive}: {exc}"
    if (size, sha256) != (recorded.size, recorded.sha256):
        return None, f"{archive} does not match its sidecar's size and sha256 (cut off, or changed)"
    return archive, "verified"


def make(
    directory: Path,
    key: ArchiveKey,
    spark: home.SparkHome,
    environ: Mapping[str, str],
    submit_args: list[str],
    stopping: threading.Event | None = None,
) -> Path:
    """Run a small Spark job under ``spark-submit SUBMIT_ARGS`` in ``environ`` (a driver's:
    the class path its launcher builds is the key's) whose JVM writes
    the classes it loaded into a new archive as it exits; write it and its sidecar under
    temporary names and rename them into place (a JVM never maps a half-written archive, and a
    half-written one never verifies). The job is killed, and nothing is kept, once ``stopping``
    is set or :data:`MAKE_TIMEOUT` has passed; it dies with this process (a parent-death
    signal). Raises OSError."""
    with tempfile.TemporaryDirectory(dir=directory, prefix=MAKING) as scratch:
        script = Path(scratch) / "warm_up.py"
        script.write_text(WARM_UP)
        written = Path(scratch) / "archive.jsa"
        opts = dump_options(written, Path(scratch), environ.get("SPARK_SUBMIT_OPTS", ""))
        env = {**environ, "SPARK_SUBMIT_OPTS": opts}
        # at a lower priority than the warm JVM started beside it (issue 56.3: the JVM a user
        # waits for first; the archive only makes the next ones faster)
        nice = shutil.which("nice")
        lower = [nice, "-n", str(MAKE_NICE)] if nice is not None else []
        command = [*lower, str(spark.submit), *submit_args, str(script)]
        returncode, stderr = _run_making(lifeline.wrap(command), env, scratch, stopping)
        if returncode != 0 or not written.exists():
            tail = (stderr.strip().splitlines() or ["no output"])[-1]
            raise OSError(f"spark-submit exited {returncode}: {tail[:300]}")
        os.chmod(written, 0o644)
        size, sha256 = digest(written)
        sidecar = Path(scratch) / "sidecar.json"
        sidecar.write_bytes(Sidecar(key, size, sha256, utc_now()).to_bytes())
        os.chmod(sidecar, 0o644)
        target = directory / f"{key.name}{SUFFIX}"
        os.replace(written, target)
        os.replace(sidecar, directory / f"{key.name}{SIDECAR}")
    return target


def _run_making(
    command: list[str], env: Mapping[str, str], cwd: str, stopping: threading.Event | None
) -> tuple[int, str]:
    """(exit status, standard error) of the making job, in a process group of its own (its
    JVM's Python worker goes with it); killed, group and all, at ``stopping`` or the timeout."""
    deadline = time.monotonic() + MAKE_TIMEOUT
    with subprocess.Popen(
        command,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        while True:
            try:
                _, stderr = proc.communicate(timeout=STOP_POLL)
                return proc.returncode, stderr
            except subprocess.TimeoutExpired:
                stopped = stopping is not None and stopping.is_set()
                if not stopped and time.monotonic() < deadline:
                    continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise OSError(
                "stopped with the daemon" if stopped else f"not made within {MAKE_TIMEOUT:g} s"
            )


def dump_options(written: Path, scratch: Path, submit_opts: str) -> str:
    """``SPARK_SUBMIT_OPTS`` of the JVM that makes an archive at ``written``: the dump's options,
    then the environment's own (``submit_opts``) but those of another archive, so that an
    operator's own option wins. The JIT stops at C1 (:data:`DUMP_JIT`)."""
    kept = [o for o in shlex.split(submit_opts) if not _NOT_WHEN_MAKING.fullmatch(o)]
    dump = [
        f"-Djava.io.tmpdir={scratch}",
        f"-XX:ArchiveClassesAtExit={written}",
        "-Xlog:cds=off",
        "-Xlog:cds+dynamic=off",
        DUMP_JIT,
    ]
    return shlex.join([*dump, *kept])


def remove_stale(directory: Path, keep: ArchiveKey) -> int:
    """Remove this user's archives and sidecars in ``directory`` made for the Spark home and
    Java that ``keep`` names but another key (an older pyspark there, a Java updated in place),
    and those whose sidecar is gone or garbled; returns how many files went. Archives of other
    Spark homes and Javas are left: a per-user directory holds those of every installation its
    daemons use (``<tmp>/zkstore-<uid>/class-data``)."""
    removed = 0
    stale: set[str] = set()
    for entry in directory.iterdir():
        match = _NAME.fullmatch(entry.name)
        if match is None or entry.name.startswith(f"{keep.name}."):
            continue
        base = entry.name.rsplit(".", 1)[0]
        if base not in stale and not _other_installation(directory / f"{base}{SIDECAR}", keep):
            stale.add(base)
    for base in stale:
        for entry in (directory / f"{base}{SUFFIX}", directory / f"{base}{SIDECAR}"):
            if private_problem(entry) is None:
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()
                    removed += 1
    return removed


def remove_unfinished(directory: Path) -> int:
    """Remove the scratch directories that makers of archives left in ``directory`` when their
    daemons died (call it holding the directory's lock: no maker is at work then); returns how
    many went. Only this user's directories of the maker's prefix, never through a link."""
    removed = 0
    for entry in directory.iterdir():
        # the directory is this user's, changed by nobody else (prepare_directory): what is
        # checked here stays so until it goes
        if not entry.name.startswith(MAKING) or private_problem(entry, directory=True):
            continue
        try:
            shutil.rmtree(entry)  # never follows a link inside
        except OSError as exc:
            logger.warning("unfinished class-data archive %s not removed: %s", entry, exc)
            continue
        removed += 1
    return removed


def _other_installation(sidecar: Path, keep: ArchiveKey) -> bool:
    """Whether the sidecar names a key of another Spark home or Java than ``keep``'s (False
    if it cannot be read: its archive cannot be verified, so nobody can use it)."""
    try:
        key = Sidecar.parse(sidecar.read_bytes()).key
    except (OSError, ValueError):
        return False
    return (key.spark_home, key.java) != (keep.spark_home, keep.java)


@contextlib.contextmanager
def locked(directory: Path, stopping: threading.Event | None = None) -> Iterator[None]:
    """Hold ``directory``'s lock (daemons sharing one verify and make one at a time); a wait
    for another's is said in the log. Raises OSError if ``stopping`` is set meanwhile (a daemon
    that stops does not wait for another's making: half a minute or more)."""
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("waiting for another daemon's class-data archive in %s", directory)
            _wait_for_lock(fd, stopping)
        yield
    finally:
        os.close(fd)


def _wait_for_lock(fd: int, stopping: threading.Event | None) -> None:
    if stopping is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    while not stopping.wait(STOP_POLL):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            continue
    raise OSError("stopped while another daemon held the directory")


def prepare_directory(directory: Path) -> str | None:
    """Make the class-data directory and its empty ``conf`` (mode 0755: drivers of other users
    read the archive, their JVMs list the directory); None if it can be trusted, else why not."""
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o755, parents=True)
    problem = private_problem(directory, directory=True)
    if problem is not None:
        return problem
    conf = directory / "conf"
    with contextlib.suppress(FileExistsError):
        conf.mkdir(mode=0o755)
    problem = private_problem(conf, directory=True)
    if problem is None and any(conf.iterdir()):
        problem = f"{conf} is not empty: the JVM maps no archive with it on the class path"
    return problem
