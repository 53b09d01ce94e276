"""A job that looks for secrets in its own driver, as hostile job code would (it travels by
value; only the standard library is imported at module level).

It dumps what it can reach: every string and bytes object the garbage collector can reach
(objects, their referents, the frames of every thread), its environment, its command line, what
its open file descriptors read, and the writable memory of its process (freed memory included).
The test searches the dumps; the job itself prints what it found of its configuration.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from pathlib import Path
from typing import Any

MIN_CHARS = 8


def _texts(value: Any) -> list[bytes]:
    if isinstance(value, str):
        return [value.encode("utf-8", "surrogatepass")] if len(value) >= MIN_CHARS else []
    if isinstance(value, bytes | bytearray):
        return [bytes(value)] if len(value) >= MIN_CHARS else []
    return []


def reachable_strings() -> list[bytes]:
    """Every str and bytes the garbage collector reaches: containers' referents, and the local
    variables of every frame of every thread."""
    found: list[bytes] = []
    roots: list[Any] = gc.get_objects()
    for top in sys._current_frames().values():
        frame: Any = top
        while frame is not None:
            roots.append(frame)
            roots.extend(frame.f_locals.values())
            frame = frame.f_back
    for obj in roots:
        found += _texts(obj)
        with contextlib.suppress(Exception):
            for ref in gc.get_referents(obj):
                found += _texts(ref)
            if hasattr(obj, "__dict__"):
                for ref in vars(obj).values():
                    found += _texts(ref)
    return found


def process_files() -> dict[str, bytes]:
    """The process's environment, command line and what each open descriptor reads."""
    files = {
        "environ": Path("/proc/self/environ").read_bytes(),
        "cmdline": Path("/proc/self/cmdline").read_bytes(),
    }
    for fd in sorted(os.listdir("/proc/self/fd"), key=int):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)
            try:
                files[f"fd {fd} {target}"] = os.read(reader, 1 << 20)
            except OSError:
                files[f"fd {fd} {target}"] = b""
            finally:
                os.close(reader)
    return files


def process_memory(pid: int | str) -> bytes:
    """The writable private memory of process ``pid`` (heap, anonymous mappings, stacks; freed
    memory included); raises OSError if it may not be read."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            path = fields[5] if len(fields) > 5 else ""
            if not fields[1].startswith("rw") or (path and not path.startswith("[")):
                continue
            start, end = (int(a, 16) for a in fields[0].split("-"))
            with contextlib.suppress(OSError, ValueError, OverflowError):
                mem.seek(start)
                chunks.append(mem.read(end - start))
    return b"\0".join(chunks)


def memory() -> bytes:
    """The process's writable private memory (heap, anonymous mappings, stacks)."""
    return process_memory("self")


def expose(ctx: Any, out: str, other_job: str) -> None:
    """Dump what the driver holds; find the job's own key and try it on ``other_job``."""
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    (target / "strings.bin").write_bytes(b"\n".join(reachable_strings()))
    for name, data in process_files().items():
        safe = "".join(c if c.isalnum() else "_" for c in name)
        (target / f"file-{safe}.bin").write_bytes(data)
    configs = [o for o in gc.get_objects() if type(o).__name__ == "StoreConfig"]
    keys = [o for o in gc.get_objects() if type(o).__name__ == "JobKey"]
    storages = [o for o in gc.get_objects() if type(o).__name__ == "StateStorage"]
    for config in configs:
        print("a StoreConfig in the driver: signing_key =", config.signing_key, flush=True)
    found = {
        "configs": len(configs),
        "signing_keys": [c.signing_key.hex() for c in configs if c.signing_key is not None],
        "job_keys": [[k.job_id, k.key.hex()] for k in keys],
    }
    try:
        storage = storages[0]
        cluster_id = keys[0].cluster_id if keys else "default"
        storage.write(f"{cluster_id}/jobs/{other_job}/definition", b"forged")
        found["write_other"] = "written"
    except Exception as exc:  # what happened is the finding
        found["write_other"] = f"{type(exc).__name__}: {exc}"
    (target / "found.json").write_text(json.dumps(found))
    (target / "memory.bin").write_bytes(memory())


def scan_processes(ctx: Any, out: str, gate: str) -> None:
    """Once ``gate`` exists, read what this process may of every process of the host: its
    ``cmdline``, ``environ`` and writable memory (``maps`` and ``mem``), as hostile job code
    would. Writes each read to ``<out>/<pid>-<what>.bin`` and ``<out>/scan.json``: per process,
    its name, its real user and, for each entry, ``read`` or the error that refused it."""
    import time

    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 300
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the gate {gate} never opened")
        time.sleep(0.02)
    found: dict[str, dict[str, Any]] = {}
    for entry in sorted(Path("/proc").glob("[0-9]*"), key=lambda p: int(p.name)):
        pid = entry.name
        seen: dict[str, Any] = {}
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue  # gone meanwhile
        for line in status.splitlines():
            if line.startswith("Name:"):
                seen["name"] = line.split(":", 1)[1].strip()
            if line.startswith("Uid:"):
                seen["uid"] = int(line.split()[1])
        for what in ("cmdline", "environ", "mem"):
            try:
                data = process_memory(pid) if what == "mem" else (entry / what).read_bytes()
            except OSError as exc:
                seen[what] = f"{type(exc).__name__}: {exc.strerror}"
                continue
            seen[what] = "read"
            (target / f"{pid}-{what}.bin").write_bytes(data)
        found[pid] = seen
    (target / "scan.json").write_text(json.dumps({"self": os.getpid(), "processes": found}))


def _mark(out: str, name: str, data: dict[str, Any]) -> None:
    """Write ``<out>/<name>`` atomically (the test may read it at any moment)."""
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    temporary = target / f".{name}.{os.getpid()}"
    temporary.write_text(json.dumps(data))
    temporary.replace(target / name)


def _who() -> dict[str, Any]:
    """Who this process is and where: its user, its working directory's owner and mode."""
    import pwd
    import stat

    here = Path.cwd()
    found = os.stat(here)
    return {
        "pid": os.getpid(),
        "uid": os.getuid(),
        "user": pwd.getpwuid(os.getuid()).pw_name,
        "home": os.environ.get("HOME"),
        "cwd": str(here),
        "cwd_uid": found.st_uid,
        "cwd_mode": stat.S_IMODE(found.st_mode),
    }


def spark_identity(ctx: Any, out: str) -> None:
    """Run a Spark action and record who the driver and its JVM are, what the JVM was started
    with (system properties, command line, environment) and what this process's environment
    holds; attempt 1 then waits to be killed, a later one returns."""
    context = ctx.spark.sparkContext
    total = context.parallelize(range(100), 2).map(lambda i: i * i).sum()
    properties = context._jvm.System.getProperties()
    names = list(properties.stringPropertyNames())
    jvm: dict[str, str] = {}
    for entry in Path("/proc").glob("[0-9]*"):  # the JVM: a child of this driver
        with contextlib.suppress(OSError, ValueError):
            stat_line = (entry / "stat").read_text()
            if int(stat_line[stat_line.rfind(")") + 2 :].split()[1]) == os.getpid():
                command = (entry / "cmdline").read_bytes()
                if b"java" in command:
                    environ = (entry / "environ").read_bytes()
                    jvm = {"cmdline": command.decode(errors="replace")}
                    jvm["environ"] = environ.decode(errors="replace")
    print(f"attempt {ctx.attempt} runs as {_who()['user']}", flush=True)
    _mark(
        out,
        f"attempt-{ctx.attempt}",
        {
            **_who(),
            "total": int(total),
            "spark_user": context.sparkUser(),
            "properties": {str(n): str(properties.getProperty(n)) for n in names},
            "environ": dict(os.environ),
            "jvm": jvm,
        },
    )
    if ctx.attempt == 1:
        import threading

        threading.Event().wait()


def neighbour(ctx: Any, out: str, other: str) -> None:
    """Record who this driver is, then try to list and read the working directory of the
    attempt of job ``other`` (beside its own) once it exists, and record what happened; start a
    child in the driver's process group; wait to be ended."""
    import subprocess
    import threading
    import time

    (Path.cwd() / "mine.txt").write_text("this job's own file")
    theirs = Path.cwd().parent / f"{other}-attempt-1"
    deadline = time.monotonic() + 120
    while not theirs.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    tries: dict[str, str] = {}
    for what in ("list", "read"):
        try:
            found = os.listdir(theirs) if what == "list" else (theirs / "mine.txt").read_text()
            tries[what] = f"read: {found!r}"
        except OSError as exc:
            tries[what] = type(exc).__name__
    # In the driver's process group: a SIGTERM to the driver leaves it, a SIGKILL of the group
    # ends it.
    child = subprocess.Popen(["sleep", "600"])
    _mark(out, ctx.job_id, {**_who(), "theirs": str(theirs), "tries": tries, "child": child.pid})
    threading.Event().wait()


def reach_out(ctx: Any, out: str, victim: str) -> None:
    """What job code can do with its driver's ZooKeeper credentials, found in its own memory:
    open a session of its own and try to write outside its job (another job's status and
    running node, a result, an outbox entry, a schedule, a handle, the leader's and the
    fleet's records). Writes ``{what: "written" | "denied" | error}`` to ``out``."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    from zkstore.config import StoreConfig

    configs = [o for o in gc.get_objects() if isinstance(o, StoreConfig)]
    found: dict[str, Any] = {
        "cluster_credentials": any(c.zk_auth is not None for c in configs),
        "driver_identity": any(c.zk_driver for c in configs),
    }
    config = next(c for c in configs if c.zk_driver)
    auth = [
        ("digest", str(config.zk_driver[key]).removeprefix("digest:"))  # type: ignore[index]
        for key in ("drivers", "job")
    ]
    client = KazooClient(hosts=config.zk_hosts, auth_data=auth)
    client.start(timeout=20)
    base = config.base_path
    attempts = {
        "victim status": lambda: client.set(f"{base}/jobs/{victim}/status", b"{}"),
        "victim running": lambda: client.create(f"{base}/jobs/{victim}/running", b"{}"),
        "victim result": lambda: client.create(f"{base}/results/{victim}", b"{}"),
        "outbox entry": lambda: client.create(
            f"{base}/notifications/{victim}~1~FAILED~x", b"{}", makepath=True
        ),
        "schedule": lambda: client.create(f"{base}/schedules/planted", b"{}"),
        "own handle": lambda: client.set(f"{base}/currentJobs/{ctx.job_id}", b"{}"),
        "a new job": lambda: client.create(f"{base}/currentJobs/planted", b"{}"),
        "fleet": lambda: client.set(f"{base}/fleet", b"{}"),
        "victim lock": lambda: client.create(f"{base}/currentJobs/{victim}/locks/x", b""),
        "own spark record": lambda: (
            client.set(f"{base}/jobs/{ctx.job_id}/outcome", b"{}")
            if client.exists(f"{base}/jobs/{ctx.job_id}/outcome")
            else client.create(f"{base}/jobs/{ctx.job_id}/spark", b"{}", ephemeral=True)
        ),
    }
    for what, attempt in attempts.items():
        try:
            attempt()
            found[what] = "written"
        except NoAuthError:
            found[what] = "denied"
        except Exception as exc:  # a node absent or present: says nothing of the rights
            found[what] = type(exc).__name__
    client.stop()
    client.close()
    Path(out).write_text(json.dumps(found))


def _wait_for_file(path: str, seconds: float = 180.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)


def plant(ctx: Any, out: str, gate: str) -> None:
    """Job A: leave what outlives a job in the places every user may write: a set-user-ID copy
    of this Python in /tmp, a file in /dev/shm, a directory of its own in /var/tmp; record
    where, then wait for ``gate``."""
    import shutil

    name = f"zkstore-left-{ctx.job_id}-{os.getpid()}"
    planted = f"/tmp/{name}"
    shutil.copy(os.path.realpath(sys.executable), planted)
    os.chmod(planted, 0o4755)
    Path(f"/dev/shm/{name}").write_text("left in shared memory")
    Path(f"/var/tmp/{name}").mkdir()
    Path(f"/var/tmp/{name}/inside").write_text("left in a directory of its own")
    places = [planted, f"/dev/shm/{name}", f"/var/tmp/{name}"]
    _mark(out, ctx.job_id, {**_who(), "planted": planted, "places": places})
    _wait_for_file(gate)


def run_planted(ctx: Any, out: str, planted: str, gate: str) -> None:
    """Job C: once ``planted`` (job A's set-user-ID Python) exists, run it and record the user
    it ran as; then wait for ``gate``."""
    import subprocess

    _wait_for_file(planted)
    done = subprocess.run(
        [planted, "-c", "import os; print(os.geteuid(), os.getuid())"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    ran = {"code": done.returncode, "out": done.stdout.strip(), "err": done.stderr[-500:]}
    _mark(out, ctx.job_id, {**_who(), "ran": ran})
    _wait_for_file(gate)


def look_for(ctx: Any, out: str, places: list[str]) -> None:
    """Job V: record who it runs as and which of ``places`` it can find."""
    _mark(out, ctx.job_id, {**_who(), "found": [p for p in places if os.path.lexists(p)]})


def leave_a_process(ctx: Any, out: str) -> None:
    """Start a process out of the driver's session (a daemon of the job's), record its pid."""
    import subprocess

    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    _mark(out, ctx.job_id, {**_who(), "left": child.pid})


def catch_starting(ctx: Any, out: str, gate: str, needles: list[str]) -> None:
    """Poll /proc for every process that appears with ``zkstore`` on its command line and try
    at once what the probe of issue 54 did: read its ``environ``, open its ``mem`` (a
    descriptor opened early keeps reading after the process turns undumpable) and read it
    again later at the addresses of its ``maps``. Until ``gate``; writes what happened per
    process, the ``environ`` read and which of ``needles`` the memory read holds."""
    import base64
    import time
    import zlib

    seen: set[str] = set()
    caught: dict[str, dict[str, Any]] = {}
    held: dict[str, tuple[str, int]] = {}
    deadline = time.monotonic() + 240
    _mark(out, "ready", _who())
    while not os.path.exists(gate) and time.monotonic() < deadline:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:  # a pid and its start: pids are reused (pid_max may be 32768) in a long run
                with open(f"/proc/{pid}/stat") as stat:
                    started = stat.read().rsplit(")", 1)[1].split()[19]
            except (OSError, IndexError):
                continue
            try:  # read again at each pass: a child shows its parent's until its exec
                with open(f"/proc/{pid}/cmdline", "rb") as file:
                    cmdline = file.read()
            except OSError:
                continue
            # and seen again after its exec (the same pid and start): a fork of a process
            # whose command line says zkstore (pytest's, by a test's name) is caught as its
            # parent first, then as what it runs
            key = f"{pid}@{started}:{zlib.crc32(cmdline):08x}"
            if key in seen or b"zkstore" not in cmdline or int(pid) == os.getpid():
                continue
            seen.add(key)
            found: dict[str, Any] = {"cmdline": cmdline.decode(errors="replace")}
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{pid}/status") as status:
                    uids = [line for line in status if line.startswith("Uid:")]
                found["uid"] = int(uids[0].split()[1])
            try:
                with open(f"/proc/{pid}/environ", "rb") as file:
                    found["environ"] = base64.b64encode(file.read()).decode()
            except OSError as exc:
                found["environ_error"] = type(exc).__name__
            try:
                held[key] = (pid, os.open(f"/proc/{pid}/mem", os.O_RDONLY))
                found["mem"] = "opened"
            except OSError as exc:
                found["mem_error"] = type(exc).__name__
            caught[key] = found
        time.sleep(0.001)
    for key, (pid, fd) in held.items():  # read through the early descriptors, later
        hits: set[str] = set()
        with contextlib.suppress(OSError), open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                start, end = (int(a, 16) for a in line.split()[0].split("-"))
                if "rw" in line.split()[1] and end - start < 64 << 20:
                    with contextlib.suppress(OSError):
                        chunk = os.pread(fd, end - start, start)
                        hits.update(n for n in needles if n.encode() in chunk)
        caught[key]["mem_holds"] = sorted(hits)
        os.close(fd)
    _mark(out, ctx.job_id, {**_who(), "caught": caught})
