"""Drivers as other users (``zkstore daemon --driver-user USER[,USER...]``).

On a host where the daemon runs as root (or holds the capabilities it needs, :data:`NEEDED`),
every driver, and so its Spark JVM and the Python workers that run job code, runs as another
user: job code can then read nothing of the daemon's (its memory, its environment, its files,
its launch records) and, with a user per driver, nothing of another job's. As YARN's container
executor runs containers as the submitting user.

- **One user**: every driver runs as it: the daemon is out of reach, the drivers of one host are
  not out of each other's.
- **Several users** (a pool): each running driver gets a user no other process of the host
  uses (:class:`DriverUserPool`), so two jobs never share one (``--max-drivers`` is at most the
  pool's size); an attempt's directory is its driver's, mode 0700, out of reach of the others.
  When a driver has exited, what it left in its session as its user is killed, so the user is
  free for the next one, and what it left outside its attempt is swept before the next driver
  runs as it (:mod:`recovery.member.sweep`); a user that cannot be swept, or that a leftover
  process still runs as, is out of the pool until a later look (:meth:`DriverUserPool.reclaim`,
  every few seconds) finds it free and clean. A pool is one daemon's: a daemon claims its users
  on its host (:func:`claim_users`) and a second one given any of them is refused.

Drivers never share a user with a process that holds secrets unless the operator says so
(:func:`check_apart`): see there why nothing else closes the window.

Who does what: the member makes the attempt's directory (and Spark's scratch beside it) owned by
the driver's user, mode 0700, in a work directory of the daemon's that the drivers may pass
through (0711) but neither list nor change; the fork server's child opens the log file (the
daemon's, mode 0600: its log shipper reads it), then changes its groups, group and user
(:func:`become`) before it runs the driver, which never regains root. The member still adopts,
ends (SIGTERM, SIGKILL of the group) and buries such drivers, and removes their directories
(:func:`recovery.shared.attemptdir.remove` with the pool's users as owners it may remove:
never through a symbolic link, which a driver may plant in its own directory).

:func:`prepare` checks at the daemon's start, before anything runs, that all this can work: the
privileges, the work directory, and that each user can run this daemon's Python and reach the
work directory (a Python under ``/root`` cannot be run by anyone else).

Why one module: a user's whole life as a driver's is one state (checked at the start, claimed
on the host, handed to a driver, its leftovers ended at the driver's exit or at the periodic
look that finds it gone first, swept, handed on), kept under one lock by the pool; the checks
and the claim are what the pool's first state needs. What stands alone lives apart: the sweep
(:mod:`recovery.member.sweep`) and the attempt's directory (:mod:`recovery.shared.attemptdir`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import stat
import subprocess
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path

from recovery.member.sweep import Swept, sweep_all
from recovery.settings import DaemonSettings, DriverUser
from recovery.shared.processes import Liveness, ProcessIdentity, probe
from zkstore.errors import ConfigError

__all__ = [
    "ACCEPT_FLAG",
    "CLAIMS",
    "NEEDED",
    "PROBE_TIMEOUT",
    "DriverUserPool",
    "become",
    "check_apart",
    "check_privileges",
    "claim_users",
    "end_leftovers",
    "held_secrets",
    "make_work_root",
    "missing_capabilities",
    "prepare",
    "probe_users",
    "release_users",
    "users_with_processes",
]

logger = logging.getLogger(__name__)

#: The capabilities a daemon that is not root needs (``CapEff`` bit numbers): to change a
#: driver's user and groups, give it its directory, remove that directory, signal its group.
NEEDED = {"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7}
#: What a probe runs as each user: the daemon's Python, zkstore's packages (where the rest of
#: what a driver imports is installed; a driver's whole imports cost 0.3 s of CPU per user), a
#: look into the work directory.
_PROBE = "import os, sys, zkstore, recovery; os.chdir(sys.argv[1])"
#: Seconds a probe may take (the imports of a driver, on a loaded host).
PROBE_TIMEOUT = 60.0


#: Where the daemons of a host claim their driver users: a file per user, locked (``flock``) by
#: the daemon that runs drivers as it, naming that daemon. Root's: no driver user can plant one.
CLAIMS = Path("/run/zkstore/driver-users")
#: The flag of a deployment that runs drivers as the daemon's own user while it holds secrets.
ACCEPT_FLAG = "--jobs-may-read-secrets"


def held_secrets(settings: DaemonSettings) -> list[str]:
    """What secrets the daemon of ``settings`` holds, by name (none: nothing to keep apart)."""
    store = settings.store
    held = {
        "the cluster's signing key": store.signing_key,
        "ZooKeeper credentials": store.zk_auth,
        "the API change token": settings.api_token,
        "the API read token": settings.api_read_token,
        "the API's tokens of pools": bool(settings.api_pool_tokens),
    }
    return [name for name, value in held.items() if value]


def check_apart(settings: DaemonSettings, accepted: bool) -> None:
    """Refuse (ConfigError, one line) a daemon that holds secrets and would run its drivers as
    its own user, unless ``accepted`` (:data:`ACCEPT_FLAG`).

    Why no process of the daemon's user can keep a secret from job code of that user: a
    process is dumpable from its ``execve`` until it calls ``prctl(PR_SET_DUMPABLE, 0)``, and
    in that window its user may open its ``/proc/<pid>/environ`` and ``mem``; the kernel checks
    the right only at ``open()``, so a ``mem`` descriptor opened then reads the process's memory
    for its whole life, secrets read from files later included. Only another user (without
    ``CAP_SYS_PTRACE``) is out of reach whatever the timing."""
    if settings.driver_users or accepted:
        return
    held = held_secrets(settings)
    if held:
        raise ConfigError(
            f"drivers would run as this daemon's user (uid {os.geteuid()}), and job code could "
            f"read {', '.join(held)} from any zkstore process of that user as it starts: run "
            "them as other users (--driver-user, as root), or give "
            f"{ACCEPT_FLAG} to accept that every job may read them"
        )


def claim_users(users: Iterable[DriverUser], daemon_id: str, claims: Path = CLAIMS) -> list[int]:
    """Claim ``users`` for this daemon on this host: each user's file in ``claims`` locked
    (``flock``, held by the descriptors returned until they are closed or the daemon dies) and
    naming this daemon. Raises ConfigError naming the daemon that holds one already: two
    daemons that share users would hand a user to two jobs at once, and sweep one's files
    under the other's running driver."""
    _private_directory(claims)
    held: list[int] = []
    try:
        for user in users:
            held.append(_claim(claims / user.name, user, daemon_id))
    except BaseException:
        for fd in held:
            os.close(fd)
        raise
    return held


def _private_directory(place: Path) -> None:
    with contextlib.suppress(FileExistsError):
        place.mkdir(mode=0o700, parents=True)
    found = os.lstat(place)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid() or found.st_mode & 0o022:
        raise ConfigError(
            f"{place} must be a directory of this user's that nobody else may change (the "
            "driver users' claims of this host's daemons)"
        )


def _claim(path: Path, user: DriverUser, daemon_id: str) -> int:
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 300, 0).decode(errors="replace").strip() or "a daemon"
                raise ConfigError(
                    f"--driver-user {user.name} is the driver user of {holder} on this host: "
                    "give each daemon of a host users of its own"
                ) from None
            with contextlib.suppress(FileNotFoundError):
                if os.fstat(fd).st_ino == os.stat(path).st_ino:  # not one its holder removed
                    text = f"daemon {daemon_id} (pid {os.getpid()})".encode()
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, text, 0)
                    return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def release_users(held: Iterable[int], users: Iterable[DriverUser], claims: Path = CLAIMS) -> None:
    """Give up the claims :func:`claim_users` made (their files removed while still held, so
    that a daemon that opened one meanwhile tries again on a new file)."""
    for user in users:
        with contextlib.suppress(OSError):
            (claims / user.name).unlink()
    for fd in held:
        os.close(fd)


def missing_capabilities(status: str, euid: int) -> list[str]:
    """The capabilities of :data:`NEEDED` that a process with ``status`` (the text of
    ``/proc/self/status``) and effective user ``euid`` lacks: none for root."""
    if euid == 0:
        return []
    effective = 0
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            effective = int(line.split()[1], 16)
    return [name for name, bit in NEEDED.items() if not effective >> bit & 1]


def prepare(
    settings: DaemonSettings, work_root: Path, environment: Callable[[DriverUser], dict[str, str]]
) -> None:
    """Check, at the daemon's start, that its drivers can run as ``settings.driver_users``
    (each with its ``environment``); make the work directory (mode 0711: the drivers pass
    through it, never list or change it). Raises ConfigError with one line saying what is
    wrong."""
    check_privileges()
    make_work_root(work_root)
    if settings.store.storage_url.startswith("file:"):
        logger.warning(
            "--driver-user with local storage %s: every driver user must be able to read and "
            "write it (a group of theirs); object storage (s3://...) needs nothing",
            settings.store.storage_url,
        )
    probe_users(settings.driver_users, settings.python, work_root, environment)


def check_privileges() -> None:
    """Raise ConfigError (one line) unless this process may run drivers as other users."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        status = ""
    missing = missing_capabilities(status, os.geteuid())
    if missing:
        raise ConfigError(
            "--driver-user needs root or the capabilities " + ", ".join(NEEDED) + ": this "
            f"daemon runs as uid {os.geteuid()} without {', '.join(missing)}"
        )


def make_work_root(work_root: Path) -> None:
    """The work directory, made 0711 if missing; refused (ConfigError) if it is not this
    user's or others may change it (a driver could plant a link where its next attempt's
    directory goes)."""
    for place in [*reversed(work_root.parents), work_root]:
        if not place.exists():
            with contextlib.suppress(FileExistsError):
                place.mkdir(mode=0o711)
    found = os.lstat(work_root)
    mode = stat.S_IMODE(found.st_mode)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid() or mode & 0o022:
        raise ConfigError(
            f"work directory {work_root} must be a directory of this user's that nobody else "
            f"may change (it is mode {mode:04o}, owner uid {found.st_uid}): chmod 711 it, or "
            "pass another --work-dir"
        )


def probe_users(
    users: Iterable[DriverUser],
    python: str,
    work_root: Path,
    environment: Callable[[DriverUser], dict[str, str]],
) -> None:
    """Run :data:`_PROBE` with ``python`` as each user at once (in its driver's
    ``environment``); ConfigError naming the first that failed."""
    running: list[tuple[DriverUser, subprocess.Popen[str]]] = []
    try:
        for user in users:
            try:
                process = subprocess.Popen(
                    [python, "-c", _PROBE, str(work_root)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd="/",
                    env=environment(user),
                    user=user.uid,
                    group=user.gid,
                    extra_groups=list(user.groups),
                )
            except OSError as exc:
                raise _cannot(user, f"{exc.strerror or exc}: {python}") from exc
            running.append((user, process))
        for user, process in running:
            try:
                _, error = process.communicate(timeout=PROBE_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise _cannot(user, f"{python} did not start within {PROBE_TIMEOUT:g} s") from None
            if process.returncode != 0:
                lines = [line for line in error.strip().splitlines() if line.strip()]
                raise _cannot(user, lines[-1][:300] if lines else f"exit {process.returncode}")
    finally:
        for _, process in running:
            if process.poll() is None:
                process.kill()
                process.wait()


def _cannot(user: DriverUser, why: str) -> ConfigError:
    return ConfigError(f"--driver-user {user.name} cannot run this daemon's drivers: {why}")


def become(uid: int, gid: int, groups: Collection[int]) -> None:
    """In a forked driver, before anything of the job runs: take the user's groups, group and
    user (real, effective and saved: root is never regained). Raises OSError if any is not
    what was asked afterwards."""
    os.setgroups(list(groups))
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise OSError(f"could not become uid {uid} gid {gid}")


def _users_of(pid: int | str) -> set[int]:
    """The users process ``pid`` runs as (real, effective, saved, filesystem); raises OSError
    if it is gone."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("Uid:"):
                return set(map(int, line.split()[1:5]))
    return set()


def users_with_processes(uids: Collection[int]) -> set[int]:
    """Which of ``uids`` any process of this host runs as."""
    found: set[int] = set()
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError):
            found.update(_users_of(entry.name) & set(uids))
    return found


def _session_of(pid: int | str) -> int:
    """The session of process ``pid`` (field 6 of ``/proc/<pid>/stat``); OSError if gone."""
    with open(f"/proc/{pid}/stat") as stat_file:
        text = stat_file.read()
    return int(text[text.rfind(")") + 2 :].split()[3])


#: Drivers found gone by a periodic look kept for their exit's handling (:meth:`DriverUserPool.
#: ended`), at most: one whose exit is never handled must not be kept for ever.
MAX_GONE = 64


def end_leftovers(uid: int, session: int) -> int:
    """SIGKILL every process that runs as ``uid`` in the session ``session`` (a driver's: it
    leads its own, and what it starts stays in it unless it makes a new one); returns how many.
    A session's number is not a new process's pid while anything is in it, so these are the
    driver's; each is signalled through a pidfd taken before it is checked, so a pid reused
    meanwhile is never hit."""
    ended = 0
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if uid not in _users_of(entry.name) or _session_of(entry.name) != session:
                continue
            pidfd = os.pidfd_open(int(entry.name))
            try:
                if uid in _users_of(entry.name) and _session_of(entry.name) == session:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    ended += 1
            finally:
                os.close(pidfd)
    return ended


class DriverUserPool:
    """Who the next driver runs as: the one user, or a user of the pool that no process of
    this host uses, no driver this daemon started is about to, and that holds nothing a
    driver left outside its attempt (:mod:`recovery.member.sweep`: swept before it is handed
    on; one that cannot be swept stays out). Thread-safe."""

    def __init__(
        self,
        users: Iterable[DriverUser],
        sweeper: Callable[[Sequence[DriverUser]], Mapping[int, Swept]] = sweep_all,
    ) -> None:
        self.users = tuple(users)
        self._sweep = sweeper
        self._lock = threading.Lock()
        #: users handed out by this daemon: the driver's identity once it runs, None before
        self._given: dict[int, ProcessIdentity | None] = {}
        #: users that may hold what a driver left: all of a pool at the start (an earlier
        #: life's drivers, anyone's), then each once handed out, until swept
        self._dirty: set[int] = {user.uid for user in self.users} if len(self.users) > 1 else set()
        #: users whose last sweep failed: why
        self._unclean: dict[int, str] = {}
        #: drivers a periodic look found gone before their exit was handled (:meth:`ended`):
        #: their user's id and how many processes they left were killed then
        self._gone: dict[ProcessIdentity, tuple[int, int]] = {}

    @property
    def uids(self) -> frozenset[int]:
        return frozenset(user.uid for user in self.users)

    def take(self) -> DriverUser:
        """A user for a new driver, swept first if a driver ran as it; OSError if every user
        of the pool is busy (a process of a driver, or one it left behind, runs as each) or
        could not be swept."""
        if len(self.users) == 1:
            return self.users[0]
        with self._lock:
            busy = self._busy()
            free = [user for user in self.users if user.uid not in busy]
            clean = self._clean(free)
            for user in free:
                if user.uid in clean:
                    self._given[user.uid] = None
                    self._dirty.add(user.uid)
                    return user
            out = self._out_of_pool(busy)
        why = [f"{user.name}: {out.get(user.name, 'runs a driver')}" for user in self.users]
        raise OSError("every --driver-user is busy or out of the pool: " + "; ".join(why))

    def reclaim(self) -> dict[str, str]:
        """Sweep the users that are free again (their leftover processes gone, or a sweep that
        failed before) and say which users are out of the pool, and why (name -> reason: a
        process left running as it, or what could not be removed). Called periodically."""
        if len(self.users) == 1:
            return {}
        with self._lock:
            busy = self._busy()
            self._clean([user for user in self.users if user.uid not in busy])
            return self._out_of_pool(busy)

    def _busy(self) -> set[int]:
        """The users some process runs as, or handed to a driver that is not gone (lock held).
        A driver found gone before its exit was handled has what it left ended here, as
        :meth:`ended` would (which then reports it): dropped alone, the user stayed out of the
        pool as long as a child it left ran, and nothing ended that child."""
        given: set[int] = set()
        for uid, driver in list(self._given.items()):
            if driver is None or probe(driver) is Liveness.ALIVE:
                given.add(uid)
            else:
                del self._given[uid]
                self._gone[driver] = (uid, end_leftovers(uid, driver.pid))
                while len(self._gone) > MAX_GONE:  # exits never handled: the oldest go
                    del self._gone[next(iter(self._gone))]
        return users_with_processes(self.uids) | given

    def _out_of_pool(self, busy: set[int]) -> dict[str, str]:
        """Name -> why, for the users out of the pool though no driver of ours runs as them."""
        out: dict[str, str] = {}
        for user in self.users:
            if user.uid in self._unclean:
                out[user.name] = f"cannot be cleaned: {self._unclean[user.uid]}"
            elif user.uid in busy and user.uid not in self._given:
                out[user.name] = "a process left by a driver still runs as it"
        return out

    def _clean(self, users: list[DriverUser]) -> set[int]:
        """Sweep those of ``users`` a driver may have left something to, in one walk (lock
        held, no process runs as any of them); the ids of those clean now (the others: something
        could not be removed)."""
        dirty = [user for user in users if user.uid in self._dirty]
        results = self._sweep(dirty) if dirty else {}
        clean = {user.uid for user in users if user.uid not in self._dirty}
        for user in dirty:
            swept = results[user.uid]
            if swept.failed:
                if self._unclean.get(user.uid) != swept.failed[0]:
                    logger.warning(
                        "driver user %s stays out of the pool: %s",
                        user.name,
                        "; ".join(swept.failed),
                    )
                self._unclean[user.uid] = swept.failed[0]
                continue
            if self._unclean.pop(user.uid, None) is not None:
                logger.info("driver user %s is back in the pool: swept", user.name)
            if swept.removed:
                logger.info(
                    "driver user %s: removed %d thing(s) a driver left outside its attempt",
                    user.name,
                    swept.removed,
                )
            self._dirty.discard(user.uid)
            clean.add(user.uid)
        return clean

    def started(self, user: DriverUser, driver: ProcessIdentity) -> None:
        """``user`` runs the driver ``driver``: busy until that process is gone."""
        if len(self.users) > 1:
            with self._lock:
                self._given[user.uid] = driver

    def adopted(self, driver: ProcessIdentity) -> None:
        """A live driver this daemon did not start in this life (a restart adopted it): its
        user, if one of the pool's, is its."""
        if len(self.users) > 1:
            with contextlib.suppress(OSError):
                for uid in _users_of(driver.pid) & self.uids:
                    with self._lock:
                        self._given[uid] = driver

    def ended(self, driver: ProcessIdentity) -> tuple[str, int] | None:
        """The driver ``driver`` is gone: what it left running in its session as its user (a
        child it did not end, its JVM's workers) is killed, so that the user is free for the
        next driver. Returns the user's name and how many were killed; None if no user of the
        pool was the driver's. What left the session (a daemon of the job's) keeps the user
        busy until it ends: :meth:`take` passes over it."""
        with self._lock:
            if driver in self._gone:  # a periodic look found it gone first, and ended them
                gone, killed = self._gone.pop(driver)
                return self._name(gone), killed
            uid = next((u for u, d in self._given.items() if d == driver), None)
            if uid is None:
                return None
            del self._given[uid]
            return self._name(uid), end_leftovers(uid, driver.pid)

    def _name(self, uid: int) -> str:
        return next(user.name for user in self.users if user.uid == uid)

    def release(self, user: DriverUser) -> None:
        """The driver of ``user`` could not be started."""
        with self._lock:
            self._given.pop(user.uid, None)
