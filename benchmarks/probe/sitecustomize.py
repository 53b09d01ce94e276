"""A measurement probe of ``benchmarks/bench_cost.py``: inert unless ``ZKSTORE_BENCH_PROBE``.

The cost benchmark puts this directory on ``PYTHONPATH`` of the daemons it starts, so that every
Python process of their tree (the daemon, its fork server, the drivers and log shippers they
start) imports it at start-up. It is a tool of the benchmark, never imported by the product.

With ``ZKSTORE_BENCH_PROBE=FILE`` it appends one JSON line to FILE per event:

- ``{"event": "reaped", "by": PARENT, "pid": PID, "cpu": SECONDS}``: a child reaped by
  ``os.waitpid`` (made ``os.wait4`` here), with the CPU it used in its whole life (user +
  system, from the kernel's rusage: exact, however short the child lived). The fork server reaps
  its drivers and log shippers this way.
- ``{"event": "nice", "pid": PID}``: a process lowered its own priority. Only the log shippers
  do (the fork server's child code calls ``os.nice`` for them), which tells them from drivers.

With ``ZKSTORE_BENCH_ZKCALLS=1`` as well, every process counts the ZooKeeper requests it sends
(kazoo's ``_call``: the request's type and its path, job ids and roots made generic) and appends
``{"event": "zkcalls", "pid": PID, "role": ROLE, "calls": {"Type path": N}}`` when it ends (at
exit, or at ``os._exit`` for the fork server's children): the role is ``daemon``,
``fork server``, ``driver`` or ``shipper``.

With ``ZKSTORE_BENCH_CPROFILE=DIR`` as well, every driver and log shipper forked by a fork server
runs its ``main`` under :mod:`cProfile`, timed by the main thread's CPU clock (other threads are
not seen), and leaves ``DIR/<kind>-<pid>.prof``.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import sys
from collections import Counter
from typing import Any

_FILE = os.environ.get("ZKSTORE_BENCH_PROBE")
_PROFILE_DIR = os.environ.get("ZKSTORE_BENCH_CPROFILE")
_ORIGIN = os.getpid()
_KINDS = {"recovery.driver.driver": "driver", "recovery.member.log_shipper": "shipper"}
_ROLE = (
    "daemon"  # started as a module, or through the installed script (as LocalCluster does)
    if "recovery.cli.main" in sys.orig_argv
    or any(arg.endswith("/zkstore") for arg in sys.orig_argv[1:2])
    else "fork server"
    if "recovery.member.forkserver" in sys.orig_argv
    else "other"
)
_CALLS: Counter[str] = Counter()
#: a path's job id (the benchmark's ``<batch>-<n>`` and ``warm-up``) and root made generic
_GENERIC = [
    (re.compile(r"^/bench-[0-9a-f]{8}/[^/]+"), "R"),
    (re.compile(r"/(b\d+-\d{4}|warm-up)(?=/|$)"), "/JOB"),
    (re.compile(r"-n_\d{10}$"), "-n_SEQ"),
    (re.compile(r"/\d{19}$"), "/CHECKPOINT"),
]


def _record(event: dict[str, Any]) -> None:
    assert _FILE is not None
    line = (json.dumps(event) + "\n").encode()
    fd = os.open(_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)  # one write of a short line to an O_APPEND file: never interleaved
    finally:
        os.close(fd)


def _install() -> None:
    real_wait4, real_nice = os.wait4, os.nice

    def waitpid(pid: int, options: int) -> tuple[int, int]:
        child, status, usage = real_wait4(pid, options)
        if child:
            cpu = usage.ru_utime + usage.ru_stime
            _record({"event": "reaped", "by": os.getpid(), "pid": child, "cpu": cpu})
        return child, status

    def nice(increment: int) -> int:
        _record({"event": "nice", "pid": os.getpid()})
        return real_nice(increment)

    os.waitpid = waitpid
    os.nice = nice


def _generic(path: str) -> str:
    for pattern, replacement in _GENERIC:
        path = pattern.sub(replacement, path)
    return path


def _describe(request: Any) -> str:
    name = type(request).__name__
    path = getattr(request, "path", None)
    if path is None and hasattr(request, "operations"):  # a transaction: its ops' paths
        ops = ",".join(
            f"{type(op).__name__}:{_generic(getattr(op, 'path', '?'))}" for op in request.operations
        )
        return f"{name}[{ops}]"
    return f"{name} {_generic(path)}" if isinstance(path, str) else name


def _flush_calls() -> None:
    if _CALLS:
        _record({"event": "zkcalls", "pid": os.getpid(), "role": _ROLE, "calls": dict(_CALLS)})
        _CALLS.clear()


def _install_zkcalls() -> None:
    from kazoo.client import KazooClient

    real_call, real_exit = KazooClient._call, os._exit

    def call(self: KazooClient, request: Any, async_object: Any) -> Any:
        _CALLS[_describe(request)] += 1
        return real_call(self, request, async_object)

    def exit_(code: int) -> None:
        _flush_calls()
        real_exit(code)

    KazooClient._call = call
    os._exit = exit_  # type: ignore[assignment]
    atexit.register(_flush_calls)


def _install_cprofile(directory: str | None) -> None:
    """Wrap ``importlib.import_module`` so that a forked driver's (or shipper's) ``main`` knows
    its role, and runs under cProfile if ``directory`` is given: the fork server's child code
    calls ``import_module(NAME).main(argv)``."""
    import importlib

    real_import = importlib.import_module

    class _Profiled:
        def __init__(self, module: Any, kind: str) -> None:
            self._module, self._kind = module, kind

        def main(self, argv: list[str]) -> Any:
            global _ROLE  # noqa: PLW0603 - this process has just become a driver or shipper
            _ROLE = self._kind
            _CALLS.clear()  # what the fork server counted before the fork is its own
            if directory is None:
                return self._module.main(argv)
            import cProfile
            import time

            profile = cProfile.Profile(time.thread_time)  # the main thread's CPU, not waits
            try:
                return profile.runcall(self._module.main, argv)
            finally:
                profile.dump_stats(os.path.join(directory, f"{self._kind}-{os.getpid()}.prof"))

    def import_module(name: str, package: str | None = None) -> Any:
        module = real_import(name, package)
        if os.getpid() != _ORIGIN and name in _KINDS:
            return _Profiled(module, _KINDS[name])
        return module

    importlib.import_module = import_module


if _FILE:
    _install()
    if os.environ.get("ZKSTORE_BENCH_ZKCALLS"):
        _install_zkcalls()
    if _ROLE == "fork server" and (_PROFILE_DIR or os.environ.get("ZKSTORE_BENCH_ZKCALLS")):
        _install_cprofile(_PROFILE_DIR)
