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


def memory() -> bytes:
    """The process's writable private memory (heap, anonymous mappings, stacks)."""
    chunks = []
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            addresses, perms = fields[0], fields[1]
            path = fields[5] if len(fields) > 5 else ""
            if not perms.startswith("rw") or (path and not path.startswith("[")):
                continue
            start, end = (int(a, 16) for a in addresses.split("-"))
            with contextlib.suppress(OSError, ValueError):
                mem.seek(start)
                chunks.append(mem.read(end - start))
    return b"\0".join(chunks)


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
