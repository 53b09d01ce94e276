"""A fork server for drivers: one process per daemon that has imported what a driver (and the
daemon's log shipper) needs, and forks one per attempt.

Why: a driver started as a new Python process spends a third of a second or more (much more on
a busy host) starting the interpreter and importing kazoo, fsspec, cloudpickle and zkstore
before it can take its ``running`` node. After a host is lost, the leader places tens of jobs
at once on the survivors; forked from an interpreter that has all of that loaded, each driver
starts in a few milliseconds.

Fork safety: the server never starts a thread nor opens a connection (it only imports, and for
an S3 store makes botocore's session and TLS context: :func:`zkstore.payloads.s3.warm`), so every
child starts as a clean single-threaded process; the child then runs
:func:`recovery.driver.driver.main` exactly as ``python -m recovery.driver.driver`` would, with the
same arguments, in its own session, its output in the attempt's log file, its configuration (its
job's signing key included) through a pipe it reads once and closes.

The server is not dumpable (:mod:`zkstore.payloads.secrecy`): job code running as its user cannot
read its memory or environment in ``/proc``. Its drivers are made dumpable again as they start (what
they hold is their own job's; see :mod:`zkstore.payloads.secrecy` for why), its log shipper is not.
With ``--driver-user``, a request names the user a driver runs as: the child opens its log, then
takes that user's groups, group and user (:func:`recovery.member.driveruser.become`) before the
driver's code runs.

The server never reads a configuration: the daemon writes each into a pipe of its own and hands
the server the pipe's read end over a Unix socket (``SCM_RIGHTS``), which the child inherits and
the server closes. So no configuration ever sits in the server's memory, where every later
child, and the job code in it, would find it (freed memory included): a driver holds its own
job's key and no other job's. Descriptors are received close-on-exec (``MSG_CMSG_CLOEXEC``: a
program job code executes inherits none), and a child closes, before anything else, those the
server holds for later requests (one read of the socket can bring the next request's with the
end of this one's): a driver holds its own launch's descriptors and no other's.

Protocol, over the server's stdin (a Unix socket: requests, each line sent with its
descriptors) and stdout (answers), one JSON object per line::

    -> {"id": 1, "kind": "driver", "argv": [...], "env": {...}, "cwd": "...", "log": "...",
        "nice": 0, "user": null | {"uid": 1001, "gid": 1001, "groups": [1001]},
        "fds": ["{config_fd}", "{warm_fd}"]}
                        + the read end of its configuration pipe (and the descriptors "fds" names
                          after it, each standing for its name in argv)
    <- {"id": 1, "pid": 4242, "start": 98765}  or {"id": 1, "error": "..."}
    <- {"exit": 4242, "code": 0}                when a child ends (negative: killed by a signal)

A request's kind is ``driver``, ``shipper`` (the daemon's log shipper,
:mod:`recovery.member.log_shipper`, started once) or ``warm-up`` (the warm-up of a warm driver JVM,
:mod:`recovery.member.warm_jvms.warmup`). The server exits when its stdin closes (its
daemon is gone); drivers and the shipper go on: they are in sessions
of their own, and a new daemon's leader adopts them.

Why one module: the server's loop and the daemon's handle on it (:class:`ForkServer`) are the two
ends of the protocol above, and of its rules on descriptors; kept together, each message's writer
and reader are read, and changed, side by side.
"""

from __future__ import annotations

import array
import codecs
import contextlib
import importlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from recovery.member.driveruser import become
from recovery.proctitle import (
    driver_title,
    fork_server_title,
    set_title,
    shipper_title,
    warm_up_title,
)
from recovery.settings import DriverUser
from recovery.shared.processes import exists, start_ticks
from zkstore.payloads import secrecy

__all__ = ["MAX_FDS", "MEMBER_ENV", "ForkServer", "ForkedProcess", "prepare", "serve"]

logger = logging.getLogger(__name__)

#: Descriptors one request carries: its child's configuration pipe, and for a driver that took
#: a warm JVM (:mod:`recovery.member.warm_jvms.pool`) the write end of that JVM's standard input.
MAX_FDS = 2


# -- the server (a process of its own) ----------------------------------------------------------


def serve(preload: Sequence[str] = ()) -> int:
    """Answer requests on stdin until it closes; fork a driver per request; report exits.
    ``preload``: more modules to import before any fork (the storage backend the daemon's
    configuration names, which fsspec would otherwise import in every driver)."""
    secrecy.set_dumpable(False)
    daemon_id = os.environ.get(MEMBER_ENV)  # the launcher's environment names its daemon
    if daemon_id:
        set_title(fork_server_title(daemon_id))  # ps: "zkstore fork-server ID"
    prepare(preload)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the daemon is not ours
    requests = socket.socket(fileno=0)
    ended = _child_endings()
    pending, descriptors = b"", []
    while True:
        _reap()
        # asleep until a request or a child's end (never polling: an idle server costs nothing)
        ready, _, _ = select.select([0, ended], [], [])
        if ended in ready:
            _drain(ended)
        if 0 not in ready:
            continue
        chunk, fds = _receive(requests)
        if not chunk:
            return 0
        pending += chunk
        descriptors += fds
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            wanted = len(request.get("fds") or ["{config_fd}"])
            configs, descriptors = descriptors[:wanted], descriptors[wanted:]
            # One read can bring the next request's descriptors with this one's end: its
            # child closes them before anything else (they are another job's configuration).
            _answer(request, configs, descriptors)


def _receive(requests: socket.socket) -> tuple[bytes, list[int]]:
    """Bytes of requests and the descriptors that came with them, close-on-exec as they arrive
    (``MSG_CMSG_CLOEXEC``: no program a child executes inherits a launch's pipe; Python's
    ``socket.recv_fds`` drops its ``flags`` before 3.12, hence ``recvmsg`` here)."""
    fds = array.array("i")
    chunk, ancillary, _, _ = requests.recvmsg(
        1 << 16, socket.CMSG_LEN(MAX_FDS * fds.itemsize), socket.MSG_CMSG_CLOEXEC
    )
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return chunk, list(fds)


def prepare(preload: Sequence[str] = ()) -> None:
    """What every forked child finds done: the mains imported and warmed (``warm()``), the
    ``preload`` modules and pyspark imported, botocore's S3 session made if s3fs is one. A child
    that imports, compiles or parses something at each start pays for it in every run
    (tests/drivers/test_driver_start.py)."""
    for module in _MAINS.values():  # the point of the server: imported once, before forks
        warm = getattr(importlib.import_module(module), "warm", None)
        if warm is not None:
            warm()
    for module in preload:
        with contextlib.suppress(ImportError):  # a driver that needs it says so itself
            importlib.import_module(module)
    if "s3fs" in preload and "s3fs" in sys.modules:
        from zkstore.payloads import s3

        s3.warm()  # botocore's session, S3 data and TLS context: made here, not in every driver

    # socket.getaddrinfo encodes a host name with the idna codec, imported at its first use:
    # in every child's ZooKeeper connection otherwise
    codecs.lookup("idna")
    with contextlib.suppress(ImportError):
        import pyspark  # noqa: F401


def _send(message: dict[str, Any]) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(1, data) :]


def _child_endings() -> int:
    """A descriptor that turns readable when a child ends: SIGCHLD's handler does nothing, and
    Python writes each signal's number into the wake-up pipe as it arrives. A child that ends
    between a reap and the next ``select`` leaves the pipe readable, so no end is missed."""
    read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    _WAKEUP[:] = [read_end, write_end]
    return read_end


#: the wake-up pipe's two ends, which a forked child closes (:func:`_forget_endings`)
_WAKEUP: list[int] = []


def _forget_endings() -> None:
    """In a forked child: SIGCHLD as the kernel has it, and no end of the server's pipe (the
    driver's own children's ends would wake the server, and its signals go nowhere)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in _WAKEUP:
        with contextlib.suppress(OSError):
            os.close(fd)
    _WAKEUP.clear()


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 4096):
            continue


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send({"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _answer(request: dict[str, Any], configs: list[int], held: Sequence[int] = ()) -> None:
    """Fork the request's child with its configuration pipe and the other descriptors it came
    with (closed here), the descriptors ``held`` for later requests closed in it; answer with
    its pid and start time."""
    try:
        names = request.get("fds") or ["{config_fd}"]
        if len(configs) != len(names) or not 1 <= len(names) <= MAX_FDS:
            raise OSError("a request came without its configuration pipe")
        answer: dict[str, Any] = {
            "id": request["id"],
            "pid": _fork(request, dict(zip(names, configs, strict=True)), held),
        }
        # Read while the child is our unreaped child: its pid cannot name another process yet.
        answer["start"] = start_ticks(answer["pid"])
        _send(answer)
    except OSError as exc:
        _send({"id": request["id"], "error": f"{type(exc).__name__}: {exc}"})
    finally:
        for fd in configs:
            with contextlib.suppress(OSError):
                os.close(fd)


def _fork(request: dict[str, Any], fds: dict[str, int], held: Sequence[int] = ()) -> int:
    """Fork the child of ``request`` with ``fds`` (its configuration pipe first) under the
    names its arguments give them; the child first closes ``held`` (other launches')."""
    pid = os.fork()
    if pid == 0:
        _forget_endings()
        for fd in held:
            with contextlib.suppress(OSError):
                os.close(fd)
        _run_child(request, fds)  # never returns
    return pid


#: recovery.member.launcher.DRIVER_MEMBER_ENV (the launcher imports this module, not the reverse)
MEMBER_ENV = "ZKSTORE_DRIVER_MEMBER"

#: What the server can fork: ``python -m <module>`` of each, already imported.
_MAINS = {
    "driver": "recovery.driver.driver",
    "shipper": "recovery.member.log_shipper",
    "warm-up": "recovery.member.warm_jvms.warmup",
}


def _title(kind: str, argv: list[str]) -> tuple[str, str, str] | None:
    """The process title of a driver (``--job-id``, ``--attempt``) or of the log shipper
    (``--daemon-id``) from its arguments, None if they are not there."""
    try:
        if kind == "shipper":
            return shipper_title(argv[argv.index("--daemon-id") + 1])
        if kind == "warm-up":
            return warm_up_title(argv[argv.index("--warm-id") + 1])
        job_id = argv[argv.index("--job-id") + 1]
        attempt = int(argv[argv.index("--attempt") + 1])
    except (ValueError, IndexError):
        return None
    return driver_title(job_id, attempt)


def _run_child(request: dict[str, Any], fds: dict[str, int]) -> None:
    """In the child: become the driver (or the log shipper) of the request, then exit with its
    exit code."""
    code = 1
    try:
        os.setsid()
        title = _title(request.get("kind", "driver"), request["argv"])
        if title is not None:  # ps shows "zkstore driver JOB attempt N", not the fork server
            set_title(title)
        if request.get("nice"):
            os.nice(int(request["nice"]))
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.stdout.reconfigure(line_buffering=True, write_through=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(line_buffering=True, write_through=True)  # type: ignore[union-attr]
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if request.get("kind", "driver") in ("driver", "warm-up"):  # set-user-ID grants nothing
            secrecy.no_new_privileges()
        user = request.get("user")
        if user is not None:  # before anything of the job runs, and for good
            become(int(user["uid"]), int(user["gid"]), [int(g) for g in user["groups"]])
        if request.get("kind", "driver") == "driver":
            secrecy.set_dumpable(
                True
            )  # the server is not; its drivers are (zkstore.payloads.secrecy)
        module = _MAINS[request.get("kind", "driver")]
        argv = [str(fds[a]) if a in fds else a for a in request["argv"]]
        sys.argv = [module, *argv]
        code = importlib.import_module(module).main(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001 - the child must end here whatever happened
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


# -- the daemon's side --------------------------------------------------------------------------


class ForkedProcess:
    """A driver forked by the server: the part of ``subprocess.Popen`` a launch needs."""

    def __init__(self, pid: int, server: ForkServer, start_ticks: int | None = None) -> None:
        self.pid = pid
        #: when it started (see :mod:`recovery.shared.processes`), as the server saw it
        self.start_ticks = start_ticks
        self._server = server
        self._ended = threading.Event()
        self.returncode: int | None = None

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        if not self._ended.is_set() and not self._server.alive and not exists(self.pid):
            self._exited(-signal.SIGKILL)  # its exit code was lost with the server
        return self.returncode

    def wait(self) -> int:
        while not self._ended.wait(1.0):
            self.poll()
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if not self._ended.is_set():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


class ForkServer:
    """The daemon's handle on its fork server, started with the daemon (:meth:`start`), on
    first use if not, and again if it died."""

    def __init__(
        self,
        python: str,
        env: dict[str, str],
        on_log: Callable[[str], None],
        preload: Sequence[str] = (),
    ) -> None:
        self._python = python
        self._preload = list(preload)
        self._env = env
        self._on_log = on_log
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        #: the server's stdin: requests, with their configuration pipes
        self._requests: socket.socket | None = None
        self._answers: dict[int, ForkedProcess | str] = {}
        self._answered = threading.Condition(self._lock)
        self._children: dict[int, ForkedProcess] = {}
        self._next_id = 0

    @property
    def alive(self) -> bool:
        process = self._process
        return process is not None and process.poll() is None

    def start(self) -> None:
        """Start the server now (it imports what drivers need while nothing waits for it);
        raises OSError if it cannot be started."""
        with self._lock:
            self._start_if_needed()

    def fork(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        log: str,
        config: str,
        *,
        kind: str = "driver",
        nice: int = 0,
        user: DriverUser | None = None,
        fds: dict[str, int] | None = None,
    ) -> ForkedProcess:
        """Fork a driver (or, with ``kind="shipper"``, the log shipper; ``"warm-up"``, a warm
        driver's warm-up) with ``argv`` (``{config_fd}`` stands for its configuration pipe,
        which holds ``config``; each name of ``fds`` for that descriptor, which the child
        inherits and the caller still closes), at ``nice``, as ``user`` (None: the server's).
        Raises OSError if the server cannot do it (the caller falls back to a new process)."""
        extra = dict(fds or {})
        with self._lock:
            self._start_if_needed()
            assert self._process is not None and self._requests is not None
            self._next_id += 1
            request_id = self._next_id
            request = {
                "id": request_id,
                "kind": kind,
                "argv": argv,
                "env": env,
                "cwd": cwd,
                "log": log,
                "nice": nice,
                "user": (
                    {"uid": user.uid, "gid": user.gid, "groups": list(user.groups)}
                    if user is not None
                    else None
                ),
                "fds": ["{config_fd}", *extra],
            }
            pipes: list[int] = []
            try:
                pipes.append(_config_pipe(config))
                line = (json.dumps(request) + "\n").encode()
                descriptors = [*pipes, *extra.values()]
                socket.send_fds(self._requests, [line[:1]], descriptors)  # on the first byte
                self._requests.sendall(line[1:])
            except OSError as exc:
                raise OSError(f"the fork server is gone: {exc}") from exc
            finally:
                for fd in pipes:
                    os.close(fd)
            while request_id not in self._answers:
                if not self._answered.wait(30.0) or not self.alive:
                    raise OSError("the fork server did not answer")
            answer = self._answers.pop(request_id)
            if isinstance(answer, str):
                raise OSError(answer)
            return answer

    def _start_if_needed(self) -> None:
        if self.alive:
            return
        if self._requests is not None:
            self._requests.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._process = subprocess.Popen(
                # -P: not the daemon's working directory first on the path (a recovery/ or
                # zkstore/ package there would be imported by every driver forked from it)
                [self._python, "-P", "-m", "recovery.member.forkserver", *self._preload],
                stdin=theirs.fileno(),
                stdout=subprocess.PIPE,
                env=self._env,
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._requests = ours
        threading.Thread(
            target=self._read_answers, args=(self._process,), name="forkserver", daemon=True
        ).start()
        self._on_log(f"fork server started (pid {self._process.pid})")

    def _read_answers(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            message = json.loads(line)
            with self._lock:
                if "exit" in message:
                    # Always after the answer about the same child: the server reaps children
                    # only between requests, and answers each request at once.
                    child = self._children.pop(int(message["exit"]), None)
                    if child is not None:
                        child._exited(int(message["code"]))
                elif "error" in message:
                    self._answers[int(message["id"])] = str(message["error"])
                    self._answered.notify_all()
                else:
                    child = ForkedProcess(int(message["pid"]), self, message.get("start"))
                    self._children[child.pid] = child
                    self._answers[int(message["id"])] = child
                    self._answered.notify_all()
        with self._lock:
            self._answered.notify_all()

    def close(self) -> None:
        """Stop the server (its drivers go on)."""
        process, self._process = self._process, None
        requests, self._requests = self._requests, None
        if requests is not None:
            requests.close()
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)


def _config_pipe(config: str) -> int:
    """A pipe holding ``config``, written and closed: its read end (the caller closes it)."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, config.encode())  # a few hundred bytes: fits the pipe's buffer
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return read_end


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:]))
