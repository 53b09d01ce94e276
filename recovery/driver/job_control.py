"""The job's side of its control: the desired configuration applied and acknowledged, and the
built-in controls every job gets (pause, log level, checkpoint requests).

A driver runs one :class:`JobControl`. Its control thread wakes when the job's ``control`` node
changes (a watch, and every half minute in case a watch was lost), decides on the new desired
values (:mod:`recovery.driver.configchange`; the job's handlers run on this thread), updates what
``ctx.config`` shows, applies the built-ins, and writes the acknowledgement fenced on the attempt.
A failed write is retried; a lost fence ends the thread (the attempt is over anyway).

A crash at any point loses nothing: the acknowledgement is one write, and an attempt that dies
before making it leaves the desired values as they are, which the next attempt applies as it
starts and acknowledges (:func:`recovery.driver.configchange.initial`). What an attempt applied
is never handed to a handler again: a new attempt starts from it,
its handlers see later changes only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from recovery.driver import sparkapp
from recovery.driver.applied_config import DynamicConfig
from recovery.driver.configchange import Applied, Handler, apply_desired, initial, revalidate
from zkstore.errors import ConflictError, CorruptRecord, FenceLost, StoreUnavailable
from zkstore.jobs.checkpoints import CheckpointStore
from zkstore.jobs.control import (
    CHECKPOINT,
    CONTROL_REQUEST_FIELD,
    CONTROL_VERSION_FIELD,
    LOG_LEVEL,
    PAUSE,
    ControlAck,
    ControlKeys,
    ControlStore,
    DeclaredKey,
    Desired,
    job_values,
)
from zkstore.jobs.control.values import is_builtin, key_error, type_name
from zkstore.records.handle import Handle, SummaryValue
from zkstore.records.strict import utc_now
from zkstore.zookeeper.ops import Fence
from zkstore.zookeeper.retry import WHILE_STANDING, TryAgain
from zkstore.zookeeper.watch import NodeWatch

__all__ = ["POLL", "PY_LEVELS", "RETRY", "JobControl"]

logger = logging.getLogger(__name__)

#: Python's level for each of Spark's log levels.
PY_LEVELS = {
    "ALL": 1,
    "TRACE": 5,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}
#: How often the control thread reads the desired values without being woken (a lost watch).
POLL = 30.0
#: How soon a failed read or acknowledgement is tried again.
RETRY = 0.5


class JobControl:
    """The control of one attempt: what ``ctx.config`` shows, pause points, the acknowledgement.

    Thread-safe: the job's threads read the configuration and pause; the control thread decides
    and writes the acknowledgement; the monitor thread keeps Spark's log level in line.
    """

    def __init__(
        self,
        store: ControlStore,
        checkpoints: CheckpointStore,
        *,
        attempt: int,
        fence: Fence,
        cancelled: threading.Event,
    ) -> None:
        self.store = store
        self.checkpoints = checkpoints
        self.attempt = attempt
        self.fence = fence
        self._cancelled = cancelled
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._deciding = threading.RLock()  # one decision at a time (a change, a declaration)
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._applied = Applied()
        self._seen: Desired | None = None
        self._version: int | None = None
        self._declared: dict[str, DeclaredKey] | None = None
        self._handlers: list[Handler] = []
        self._paused_since: str | None = None
        self._answered: str | None = None
        self._checkpoint_version: int | None = None
        self._dirty = False
        self._ack_version: int | None = None
        self._root_level = logging.getLogger().level
        self._spark_lock = threading.Lock()
        self._spark_level: tuple[int, str] | None = None
        self._problem: str | None = None
        self._thread: threading.Thread | None = None
        self._watch: NodeWatch | None = None
        self.config = DynamicConfig(lambda: job_values(self.values()))

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, give_up: Callable[[], bool]) -> JobControl:
        """Take the desired values as this attempt's starting point and start the control thread.

        Blocks while ZooKeeper or storage cannot be reached: a job must not start without its
        configuration (it might be paused). Raises :class:`StoreUnavailable` once ``give_up()``
        says the attempt's lease is over.
        """

        def start_once() -> None:
            try:
                if self._watch is None:  # first the watch, then the read: nothing in between
                    self._watch = NodeWatch(
                        self.store.zk,
                        self.store.path,
                        lambda _: self._wake.set(),
                        report_first=False,
                    )
                # the watch's own look found no control object: nothing to read (one request
                # a run); one made since has fired the watch, and the thread reads it
                desired = Desired({}, None) if self._watch.absent else self.store.desired()
                self._start_from(desired, self._previous_ack(), self.checkpoints.newest_handle())
            except StoreUnavailable as exc:
                logger.warning("control waits for the store: %s", exc)
                raise TryAgain(str(exc)) from exc

        WHILE_STANDING.call(
            start_once,
            what=f"taking the control of {self.store.job_id}",
            give_up=give_up,
            error=StoreUnavailable,
        )
        self._thread = threading.Thread(target=self._run, name="control", daemon=True)
        self._thread.start()
        return self

    def _previous_ack(self) -> ControlAck | None:
        try:
            return self.store.acknowledgement()
        except CorruptRecord as exc:
            logger.warning("the last control acknowledgement is unreadable: %s", exc)
            return None

    def _start_from(
        self, desired: Desired, previous: ControlAck | None, checkpoint: Handle | None
    ) -> None:
        with self._lock:
            self._applied = initial(desired.values, previous)
            self._seen, self._version = desired, desired.version
            self._dirty = desired.version is not None
            summary = checkpoint.summary if checkpoint is not None else {}
            version, token = summary.get(CONTROL_VERSION_FIELD), summary.get(CONTROL_REQUEST_FIELD)
            self._checkpoint_version = version if type(version) is int else None
            self._answered = token if isinstance(token, str) else None
        self.config.invalidate()
        self._set_log_level(self._applied.values.get(LOG_LEVEL))
        logger.info(
            "control version %s in effect: %s", desired.version, job_values(self._applied.values)
        )

    def stop(self) -> None:
        """Stop the control thread (it writes a pending acknowledgement first) and the watch."""
        self._stopped.set()
        self._wake.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._watch is not None:
            self._watch.stop(forget=False)  # the driver's session ends with its job

    # -- the control thread ----------------------------------------------------------------------

    def _run(self) -> None:
        # The first acknowledgement at once, without reading again what start() has just read
        # under the watch: a change since then has woken the thread, and is read.
        delay, fresh = 0.0, True
        while not self._stopped.is_set():
            woken = self._wake.wait(delay)
            self._wake.clear()
            if self._stopped.is_set():  # the job is over: a change now would reach nothing
                break
            delay = self._step(refresh=woken or not fresh)
            fresh = False
            if delay < 0:
                return
        try:
            self._publish()
        except (StoreUnavailable, ConflictError) as exc:
            logger.info("last control acknowledgement not written: %s", exc)

    def _step(self, *, refresh: bool = True) -> float:
        """Read the desired values (with ``refresh``), decide and acknowledge once; the wait
        until the next step (negative: stop)."""
        try:
            if refresh:
                self._refresh()
            self._publish()
        except FenceLost as exc:
            logger.error("attempt %d no longer acknowledges control: %s", self.attempt, exc)
            return -1.0
        except (StoreUnavailable, ConflictError) as exc:
            logger.warning("control: %s (trying again)", exc)
            return RETRY
        except CorruptRecord as exc:
            if str(exc) != self._problem:
                logger.error("control: %s; the job goes on with what it has", exc)
            self._problem = str(exc)
        return POLL

    def _refresh(self) -> None:
        desired = self.store.desired()
        with self._deciding:
            with self._lock:
                if desired == self._seen:
                    return
                current, declared, handlers = self._applied, self._declared, list(self._handlers)
            applied = apply_desired(
                current,
                desired.values,
                version=desired.version or 0,
                declared=declared,
                handlers=handlers,
            )
            with self._changed:
                self._applied, self._seen, self._version = applied, desired, desired.version
                self._dirty = True
                if applied.values.get(PAUSE) is not True:
                    self._paused_since = None  # released: the job is on its way
                self._changed.notify_all()
        self.config.invalidate()
        logger.info("control version %s: %s", desired.version, _summary(applied))
        if current.values.get(LOG_LEVEL) != applied.values.get(LOG_LEVEL):
            self._set_log_level(applied.values.get(LOG_LEVEL))

    def _publish(self) -> None:
        """Write the acknowledgement if something changed since the last one."""
        with self._lock:
            if not self._dirty or self._version is None:
                return
            ack = ControlAck.build(
                attempt=self.attempt,
                applied_version=self._version,
                updated=utc_now(),
                values=self._applied.values,
                decisions=self._applied.reported(),
                paused_since=self._paused_since,
            ).with_version(self._ack_version)
            self._dirty = False
        try:
            written = self.store.acknowledge(ack, fence=self.fence)
        except BaseException:
            with self._lock:
                self._dirty, self._ack_version = True, None
            raise
        self._ack_version = written.version

    # -- what the job sees ---------------------------------------------------------------------

    def values(self) -> dict[str, Any]:
        """The values in effect, built-ins included."""
        with self._lock:
            return dict(self._applied.values)

    @property
    def version(self) -> int | None:
        """The desired version this attempt has applied (None: none was ever set)."""
        return self._version

    @property
    def checkpoint_version(self) -> int | None:
        """The control version the newest checkpoint was taken under."""
        return self._checkpoint_version

    @property
    def checkpoint_requested(self) -> bool:
        with self._lock:
            token = self._applied.values.get(CHECKPOINT)
            return isinstance(token, str) and token != self._answered

    def on_change(self, handler: Handler) -> None:
        with self._lock:
            self._handlers.append(handler)

    def declare(self, keys: Mapping[str, type | str], needs_restart: Iterable[str]) -> None:
        """Store the job's keys and types (fenced), then reject what is in effect against them.

        Raises :class:`ValueError` for a bad declaration, the fence's error or
        :class:`StoreUnavailable` if it cannot be stored.
        """
        restart = set(needs_restart)
        spec = {key: DeclaredKey(type_name(kind), key in restart) for key, kind in keys.items()}
        for key in [*spec, *restart]:
            problem = key_error(key) or ("a built-in key" if is_builtin(key) else None)
            if problem is None and key not in spec:
                problem = "needs a restart but is not declared"
            if problem is not None:
                raise ValueError(f"cannot declare {key!r:.60}: {problem}")
        record = ControlKeys.build(attempt=self.attempt, declared=utc_now(), keys=spec)
        self.store.declare(record, fence=self.fence)
        with self._deciding, self._changed:
            self._declared = spec
            self._applied = revalidate(self._applied, spec)
            self._dirty = True
        self.config.invalidate()
        self._wake.set()
        logger.info("declared control keys: %s", ", ".join(sorted(spec)) or "none")

    def pause_point(self) -> None:
        """Block while the job is paused (and not cancelled); returns at once otherwise."""
        with self._lock:
            if self._applied.values.get(PAUSE) is not True or self._cancelled.is_set():
                return
            self._paused_since, self._dirty = utc_now(), True
        self._wake.set()
        logger.warning("paused (zkstore control resume %s)", self.store.job_id)
        try:
            with self._changed:
                while (
                    self._applied.values.get(PAUSE) is True
                    and not self._cancelled.is_set()
                    and not self._stopped.is_set()
                ):
                    self._changed.wait(0.2)
        finally:
            with self._lock:
                if self._paused_since is not None:
                    self._paused_since, self._dirty = None, True
            self._wake.set()
        logger.warning("resumed")

    # -- checkpoints -------------------------------------------------------------------------

    def checkpoint_summary(self) -> dict[str, SummaryValue]:
        """What a checkpoint records: the control version in effect, the request it answers."""
        with self._lock:
            summary: dict[str, SummaryValue] = {}
            if self._version is not None:
                summary[CONTROL_VERSION_FIELD] = self._version
            token = self._applied.values.get(CHECKPOINT)
            if isinstance(token, str):
                summary[CONTROL_REQUEST_FIELD] = token
            return summary

    def checkpoint_taken(self, summary: Mapping[str, SummaryValue]) -> None:
        with self._lock:
            version, token = summary.get(CONTROL_VERSION_FIELD), summary.get(CONTROL_REQUEST_FIELD)
            self._checkpoint_version = version if type(version) is int else None
            if isinstance(token, str):
                self._answered = token

    # -- log level -------------------------------------------------------------------------------

    def _set_log_level(self, level: object) -> None:
        """The driver's Python logging, then Spark's (if a SparkContext is up)."""
        root = logging.getLogger()
        if isinstance(level, str) and level in PY_LEVELS:
            root.setLevel(PY_LEVELS[level])
            logger.warning("log level %s", level)
        elif root.level != self._root_level:  # a setLevel clears every logger's cache
            root.setLevel(self._root_level)
        self.sync_spark()

    def sync_spark(self) -> None:
        """Give the active SparkContext the log level in effect, once per context and level
        (the driver's monitor calls this: a script's own SparkContext gets it within moments)."""
        level = self.values().get(LOG_LEVEL)
        context = sparkapp.active_context()
        if not isinstance(level, str) or context is None:
            return
        with self._spark_lock:
            if self._spark_level == (id(context), level):
                return
            try:
                context.setLogLevel(level)
            except Exception as exc:  # noqa: BLE001 - starting or stopping: try again later
                logger.info("Spark's log level not set yet: %s", exc)
                return
            self._spark_level = (id(context), level)


def _summary(applied: Applied) -> str:
    return ", ".join(
        f"{key} {decision.state}" + (f" ({decision.reason})" if decision.reason else "")
        for key, decision in sorted(applied.last.items())
    )
