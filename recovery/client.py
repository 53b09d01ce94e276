"""The HA submit wrapper, from Python: ``Client`` and ``submit``.

A submission is accepted as soon as it is durable in the store (payload written, handle
published), whether or not a leader is up; the leader starts it when there is one. A job id that
ever had a result can never run again.

::

    from recovery import Client

    with Client() as client:                           # ZKSTORE_* environment or defaults
        job_id = client.submit_file("etl.py:run", args=["2026-11-21"])
        result = client.wait(job_id)                   # JobResult: outcome, attempts, error
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import cloudpickle

from zkstore.closing import Closeable
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import ConfigError, JobFinished, JobNotFound, JobQuarantined, WaitTimeout
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.records import CancelRequest, JobResult
from zkstore.jobs.snapshot import JobSnapshot, read_snapshots

logger = logging.getLogger(__name__)


def default_job_id(stem: str) -> str:
    """``<stem>-<8 hex>``, with the stem cleaned into a valid job id."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:100] or "job"
    return f"{clean}-{uuid.uuid4().hex[:8]}"


def parse_target(target: str) -> tuple[Path, str | None]:
    """Split ``FILE.py[:FUNCTION]``; the file must exist."""
    path_text, function = target, None
    head, sep, tail = target.rpartition(":")
    if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", tail):
        path_text, function = head, tail
    path = Path(path_text)
    if not path.is_file():
        raise ConfigError(f"{path_text}: no such file")
    return path, function


def load_function(path: Path, name: str) -> tuple[Callable[..., Any], ModuleType]:
    """Import ``path`` as a module (not as ``__main__``) and return ``name`` from it."""
    module_name = f"zkstore_job_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}_{uuid.uuid4().hex[:6]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from exc
    except Exception as exc:
        raise ConfigError(f"{path}: importing it failed: {type(exc).__name__}: {exc}") from exc
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigError(f"{path} defines no function {name!r}")
    return function, module


class Client(Closeable):
    """Submit, follow and cancel jobs. Use as a context manager, or call :meth:`close`."""

    def __init__(self, config: StoreConfig | None = None, *, cluster: Cluster | None = None):
        self._owns = cluster is None
        self.cluster = cluster or Cluster.open(config or StoreConfig.from_env())

    def close(self) -> None:
        if self._owns:
            self.cluster.close()

    # -- submitting ----------------------------------------------------------------------------

    def submit(self, definition: JobDefinition) -> str:
        """Store ``definition``; returns its job id once it is durable."""
        self.cluster.jobs.submit(definition)
        logger.info("submitted %s (%s)", definition.job_id, definition.entry_point)
        return definition.job_id

    def submit_function(
        self,
        function: Callable[..., Any],
        *args: Any,
        job_id: str | None = None,
        name: str | None = None,
        conf: Mapping[str, str] | None = None,
        max_attempts: int = 3,
    ) -> str:
        """Submit ``function(ctx, *args)``. Its module travels by value unless installed."""
        module = sys.modules.get(getattr(function, "__module__", "") or "")
        with _pickled_by_value(module if module is not None and _is_user_module(module) else None):
            return self.submit(
                JobDefinition.for_function(
                    job_id or default_job_id(getattr(function, "__name__", "job")),
                    function,
                    args=args,
                    name=name,
                    spark_conf=conf,
                    max_attempts=max_attempts,
                )
            )

    def submit_script(
        self,
        path: str | os.PathLike[str],
        args: Sequence[str] = (),
        *,
        job_id: str | None = None,
        name: str | None = None,
        conf: Mapping[str, str] | None = None,
        max_attempts: int = 3,
    ) -> str:
        """Submit an unmodified PySpark script (restarted from scratch after a failure)."""
        script = Path(path)
        try:
            source = script.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{script}: cannot read it: {exc}") from exc
        try:
            compile(source, str(script), "exec")
        except SyntaxError as exc:
            raise ConfigError(f"{script}:{exc.lineno}: syntax error: {exc.msg}") from exc
        return self.submit(
            JobDefinition.for_script(
                job_id or default_job_id(script.stem),
                source,
                filename=str(script.resolve()),
                args=list(args),
                name=name or script.name,
                spark_conf=conf,
                max_attempts=max_attempts,
            )
        )

    def submit_file(
        self,
        target: str,
        args: Sequence[str] = (),
        *,
        job_id: str | None = None,
        name: str | None = None,
        conf: Mapping[str, str] | None = None,
        max_attempts: int = 3,
    ) -> str:
        """Submit ``FILE.py`` (a script) or ``FILE.py:FUNCTION`` (``FUNCTION(ctx, *args)``)."""
        path, function_name = parse_target(target)
        if function_name is None:
            return self.submit_script(
                path, args, job_id=job_id, name=name, conf=conf, max_attempts=max_attempts
            )
        function, module = load_function(path, function_name)
        try:
            return self.submit_function(
                function,
                *args,
                job_id=job_id or default_job_id(f"{path.stem}-{function_name}"),
                name=name or f"{path.name}:{function_name}",
                conf=conf,
                max_attempts=max_attempts,
            )
        finally:
            sys.modules.pop(module.__name__, None)

    # -- following -----------------------------------------------------------------------------

    def status(self, job_id: str) -> JobSnapshot:
        """What the store says about the job now; :class:`JobNotFound` if nothing."""
        snapshot = read_snapshots(self.cluster.zk, self.cluster.layout, [job_id]).get(job_id)
        if snapshot is None:
            raise JobNotFound(f"no job {job_id!r} in this cluster")
        return snapshot

    def wait(
        self,
        job_id: str,
        *,
        timeout: float | None = None,
        on_change: Callable[[JobSnapshot], None] | None = None,
    ) -> JobResult:
        """Block until the job has a result and return it.

        ``on_change`` sees every change of the job's state (for progress output). Raises
        :class:`WaitTimeout` after ``timeout`` seconds, :class:`JobNotFound` if the job vanished
        without a result, and :class:`JobQuarantined` if it went to quarantine (it will never
        end by itself).
        """
        changed = threading.Event()
        layout, zk = self.cluster.layout, self.cluster.zk
        paths = [layout.result(job_id), layout.running(job_id), layout.status(job_id)]
        end = None if timeout is None else time.monotonic() + timeout
        last_state: tuple[str, int | None] | None = None

        def wake(event: object) -> None:
            changed.set()

        while True:
            changed.clear()
            zk.exists_many(paths, watch=wake)
            snapshot = self.status(job_id)
            if on_change is not None and (snapshot.state, snapshot.attempt) != last_state:
                last_state = (snapshot.state, snapshot.attempt)
                on_change(snapshot)
            if snapshot.result is not None:
                return snapshot.result
            if snapshot.quarantine is not None:
                raise JobQuarantined(
                    f"job {job_id} is quarantined and will not run: {snapshot.quarantine.reason}"
                )
            remaining = None if end is None else end - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise WaitTimeout(f"job {job_id} did not finish within {timeout:g} s")
            # Watches make this immediate; the bound covers a watch lost to a reconnect.
            changed.wait(5.0 if remaining is None else min(5.0, remaining))

    def cancel(self, job_id: str, *, reason: str | None = None) -> CancelRequest:
        """Ask the job to stop. Raises :class:`JobNotFound`, or :class:`JobFinished` if it has
        a result already."""
        snapshot = self.status(job_id)
        if snapshot.result is not None:
            raise JobFinished(f"job {job_id} already finished ({snapshot.result.outcome})")
        return self.cluster.state.request_cancel(job_id, by=_who(), reason=reason)


_BY_VALUE_LOCK = threading.Lock()


@contextlib.contextmanager
def _pickled_by_value(module: ModuleType | None) -> Iterator[None]:
    """Within the block, cloudpickle serializes ``module``'s code by value (if one is given)."""
    if module is None:
        yield
        return
    # cloudpickle's registry is process-wide: submissions from several threads take turns.
    with _BY_VALUE_LOCK:
        cloudpickle.register_pickle_by_value(module)
        try:
            yield
        finally:
            cloudpickle.unregister_pickle_by_value(module)


def _is_user_module(module: ModuleType) -> bool:
    """True for code that the driver's host may not have: not installed in site-packages."""
    origin = getattr(module, "__file__", None)
    if module.__name__ == "__main__" or origin is None:
        return module.__name__ == "__main__"
    return "site-packages" not in origin and "dist-packages" not in origin


def _who() -> str:
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def submit(
    target: str | Callable[..., Any],
    *args: Any,
    wait: bool = False,
    config: StoreConfig | None = None,
    **options: Any,
) -> str | JobResult:
    """Submit ``"FILE.py[:FUNCTION]"`` or a function; with ``wait``, return its result."""
    with Client(config) as client:
        if callable(target):
            job_id = client.submit_function(target, *args, **options)
        else:
            job_id = client.submit_file(target, [str(a) for a in args], **options)
        return client.wait(job_id) if wait else job_id
