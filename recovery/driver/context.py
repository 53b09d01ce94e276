"""The job context: what ``FUNCTION(ctx, *args)`` gets.

``ctx.spark`` builds the SparkSession on first use (a job that never touches Spark costs no JVM);
``ctx.latest_checkpoint()`` and ``ctx.checkpoint(metadata)`` let a resubmitted job resume instead of
starting over; ``ctx.config`` is the job's dynamic configuration (``zkstore control set``), as
this attempt applied it: ``ctx.on_config_change``, ``ctx.declare_config``, ``ctx.pause_point``,
``ctx.checkpoint_requested`` and ``ctx.checkpoint_config_version`` are its control
(:mod:`recovery.driver.job_control`). Every checkpoint records the control version in effect.
``ctx.artifacts`` tracks what the job writes (:mod:`recovery.driver.artifact_registry`), Spark's
checkpoint directory included; ``ctx.outputs`` stages a step's output and ``ctx.checkpoint(state,
commit=...)`` commits it with the checkpoint, exactly once (:mod:`recovery.driver.output_staging`).
Checkpoint writes are fenced on this attempt: once another attempt may have started, they fail.
A checkpoint that cannot reach ZooKeeper or storage waits for them while the attempt's session
lease lasts, so that a short outage does not fail the attempt.
``ctx.resource``, ``ctx.decorate`` and ``ctx.task`` give tasks executor-side resources shared per
worker process (:mod:`recovery.driver.resource_declaring`, :mod:`recovery.executor`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from recovery.driver.applied_config import DynamicConfig
from recovery.driver.heartbeat import HeartbeatGate
from recovery.driver.resource_declaring import JobResources
from recovery.driver.signals import AttemptSuperseded, JobCancelled
from recovery.executor import DEFAULT_IDLE_TIMEOUT, ResourceRef, TaskFunction
from recovery.executor.tasks import Decorator
from zkstore.errors import FenceLost, StoreUnavailable
from zkstore.jobs.checkpoints import Checkpoint, CheckpointStore
from zkstore.jobs.resources import ResourceReports
from zkstore.zookeeper.ops import Fence
from zkstore.zookeeper.retry import WHILE_STANDING, TryAgain

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from recovery.driver.artifact_registry import JobArtifacts
    from recovery.driver.configchange import Handler
    from recovery.driver.job_control import JobControl
    from recovery.driver.lease import SessionLease
    from recovery.driver.output_staging import JobOutputs

__all__ = ["AttemptSuperseded", "DynamicConfig", "JobCancelled", "JobContext"]

T = TypeVar("T")

logger = logging.getLogger(__name__)


class JobContext:
    """Handed to a job function as ``ctx``. Thread-safe where it matters (``cancelled``)."""

    def __init__(
        self,
        *,
        job_id: str,
        name: str,
        attempt: int,
        spark_master: str,
        spark_conf: Mapping[str, str],
        checkpoints: CheckpointStore,
        fence: Fence,
        config: DynamicConfig,
        cancelled: threading.Event,
        lease: SessionLease | None = None,
        resource_reports: ResourceReports | None = None,
        control: JobControl | None = None,
        artifacts: JobArtifacts | None = None,
        heartbeat: HeartbeatGate | None = None,
        outputs: JobOutputs | None = None,
    ) -> None:
        self.job_id = job_id
        self._heartbeat = heartbeat
        self.name = name
        self.attempt = attempt
        self.config: Mapping[str, Any] = config
        self.log = logging.getLogger(f"zkstore.job.{job_id}")
        self._spark_master = spark_master
        self._spark_conf = dict(spark_conf)
        self._checkpoints = checkpoints
        self._fence = fence
        self._cancelled = cancelled
        self._lease = lease
        self._control = control
        self._spark: SparkSession | None = None
        self._spark_lock = threading.Lock()
        #: the job's artifacts (recovery/driver/artifact_registry.py): register before writing, then
        #: finish
        self.artifacts = artifacts
        #: the job's outputs (recovery/driver/output_staging.py): stage, then commit with a
        #: checkpoint
        self.outputs = outputs
        self._resources = JobResources(
            job_id, attempt, lambda: self.spark.sparkContext, reports=resource_reports, fence=fence
        )

    @property
    def app_name(self) -> str:
        return f"{self.name} [zkstore {self.job_id} #{self.attempt}]"

    @property
    def spark(self) -> SparkSession:
        """The SparkSession of this attempt, created on first use with the configured master."""
        with self._spark_lock:
            if self._spark is None:
                from pyspark.sql import SparkSession

                builder = SparkSession.builder.master(
                    self._spark_conf.get("spark.master", self._spark_master)
                ).appName(self.app_name)
                for key, value in self._spark_conf.items():
                    builder = builder.config(key, value)
                self._spark = builder.getOrCreate()
                logger.info("SparkSession up (master %s)", self._spark.sparkContext.master)
                if self._control is not None:
                    self._control.sync_spark()  # the log level set with zkstore control
                if self.artifacts is not None:
                    self.artifacts.use_for_spark_checkpoints(self._spark)
            return self._spark

    @property
    def spark_started(self) -> bool:
        return self._spark is not None

    @property
    def cancelled(self) -> bool:
        """True once a cancel was requested: stop at the next convenient point."""
        return self._cancelled.is_set()

    def raise_if_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise JobCancelled(f"job {self.job_id} was cancelled")

    def heartbeat(self) -> None:
        """Say the job makes progress, for a job submitted with ``--progress-timeout`` (an
        attempt that neither checkpoints nor calls this for that long is ended and restarted
        from its checkpoint). As often as you like: it costs a clock read; the driver writes
        at most one small ZooKeeper node per 5 to 60 seconds, and none for a job without a
        progress timeout."""
        if self._heartbeat is not None:
            self._heartbeat.beat(time.monotonic())

    def latest_checkpoint(self) -> Any | None:
        """The metadata of the newest checkpoint of this job (from any attempt), or None."""
        checkpoint = self._checkpoints.latest()
        return None if checkpoint is None else checkpoint.metadata

    def checkpoint(
        self, metadata: Any, *, commit: Mapping[str, Sequence[str]] | None = None
    ) -> int:
        """Durably record progress (JSON metadata); returns the checkpoint id. The checkpoint
        records the control version in effect (and answers a checkpoint request); once it is
        written, the job blocks here while it is paused (:meth:`pause_point`).

        ``commit`` ({output: [paths]}) commits parts staged under ``ctx.outputs.stage(output)``
        in the checkpoint's own transaction: the parts are committed if and only if the
        checkpoint is, exactly once (see :mod:`recovery.driver.output_staging`).

        Raises :class:`JobCancelled` if a cancel was requested, :class:`AttemptSuperseded` if
        this attempt may no longer write (then nothing was written, and the parts of ``commit``
        are deleted), and :class:`~zkstore.errors.StoreUnavailable` if ZooKeeper or storage stay
        unreachable past the attempt's session lease (until then it waits and retries).
        """
        summary = self._control.checkpoint_summary() if self._control is not None else {}
        with_ops = None
        outputs = self.outputs
        if commit:
            if outputs is None:
                raise RuntimeError("this job context has no outputs (not run by a driver)")
            with_ops = outputs.commit_ops(commit)
        tried = False

        def add() -> Checkpoint | None:
            nonlocal tried
            # A lost answer may have published it: then the retry publishes the same metadata
            # under the next id, which is harmless; not the same parts, which would be twice.
            if tried and commit and outputs is not None and outputs.committed(commit):
                return None
            tried = True
            return self._checkpoints.add(
                metadata, fence=self._fence, summary=summary, with_ops=with_ops
            )

        try:
            checkpoint = self._retrying("checkpoint", add)
        except AttemptSuperseded:
            if commit and outputs is not None:
                outputs.discard(commit)
            raise
        if commit and outputs is not None:
            outputs.published(list(commit))
        if self._control is not None:
            self._control.checkpoint_taken(summary)
        if self._heartbeat is not None:
            self._heartbeat.checkpointed(time.monotonic())
        checkpoint_id = checkpoint.checkpoint_id if checkpoint is not None else self._newest_id()
        self.log.info("checkpoint %d: %s", checkpoint_id, metadata)
        self.pause_point()
        return checkpoint_id

    def _newest_id(self) -> int:
        ids = self._checkpoints.ids()
        return ids[-1] if ids else 0

    def _retrying(self, what: str, write: Callable[[], T]) -> T:
        """``write()``, waiting for ZooKeeper and storage while the attempt's lease lasts;
        :class:`AttemptSuperseded` once the attempt lost its standing."""
        lease = self._lease
        longest = time.monotonic() + (lease.length if lease is not None else 0.0)

        def write_once() -> T:
            self.raise_if_cancelled()
            try:
                return write()
            except FenceLost as exc:
                raise AttemptSuperseded(f"attempt {self.attempt} of {self.job_id}: {exc}") from exc
            except StoreUnavailable as exc:
                self.log.warning("%s waits for the store: %s", what, exc)
                raise TryAgain(str(exc)) from exc

        return WHILE_STANDING.call(
            write_once,
            what=what,
            give_up=lambda: lease is None or lease.remaining() <= 0 or time.monotonic() > longest,
            error=StoreUnavailable,
        )

    # -- control (recovery/driver/job_control.py) --------------------------------------------------

    def _controlled(self) -> JobControl:
        if self._control is None:
            raise RuntimeError("this job context has no control (not run by a driver)")
        return self._control

    def on_config_change(self, handler: Handler) -> Handler:
        """Call ``handler(change)`` for each change of ``ctx.config`` (also as a decorator).

        ``change.old`` and ``change.new`` are the configuration in effect and the desired one,
        ``change.keys`` the keys to decide: ``change.reject(key, reason)`` keeps the old value
        (``zkstore control get`` shows the reason), ``change.needs_restart(key)`` leaves it to
        the next attempt; a key left alone is applied. Handlers run on the driver's control
        thread, one change at a time: keep them short (the next change, pause and resume wait
        for them). Register them first thing: a change that arrives before is applied as read.
        Without a handler, every valid change is applied as read.
        """
        self._controlled().on_change(handler)
        return handler

    def declare_config(
        self, keys: Mapping[str, type | str], *, needs_restart: Iterable[str] = ()
    ) -> None:
        """Declare the keys this job understands, with their types (``int``, ``float``,
        ``str``, ``bool``): from then on ``zkstore control set`` refuses an unknown key or a
        value of the wrong type before it is stored, and a value in effect that does not fit
        is rejected (``ctx.config`` drops it). Keys in ``needs_restart`` take effect in the next
        attempt only. Stored in ZooKeeper (fenced on this attempt), so that the command line
        checks it without loading the job's code.
        """
        control = self._controlled()
        self._retrying("declaring the config keys", lambda: control.declare(keys, needs_restart))

    def pause_point(self) -> None:
        """Block here while the job is paused (``zkstore control pause``): its state shows
        PAUSED until ``zkstore control resume``. ``ctx.checkpoint`` pauses too, once the
        checkpoint is written. Raises :class:`JobCancelled` if the job is cancelled meanwhile."""
        if self._control is not None:
            self._control.pause_point()
        self.raise_if_cancelled()

    @property
    def config_version(self) -> int | None:
        """The control version in effect (``None``: no control values were ever set)."""
        return self._controlled().version

    @property
    def checkpoint_config_version(self) -> int | None:
        """The control version the newest checkpoint was taken under (``None``: no checkpoint,
        or one taken before any control values were set). A resumed attempt compares it with
        :attr:`config_version` to tell whether its configuration changed since."""
        return self._controlled().checkpoint_version

    @property
    def checkpoint_requested(self) -> bool:
        """True while a checkpoint was asked for (``zkstore control checkpoint``) and none
        was written since: poll it, and call :meth:`checkpoint` at the next opportunity."""
        return self._controlled().checkpoint_requested

    # -- executor-side resources (recovery/driver/resource_declaring.py, recovery/executor/) -------

    def resource(
        self,
        name: str,
        open: Callable[[], Any],  # shadows the builtin: the word users read in the API
        close: Callable[[Any], object] | None = None,
        *,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        counts: bool = True,
    ) -> ResourceRef:
        """Declare a resource that tasks get with ``ref.get()``: opened by ``open()`` at most
        once per Spark Python worker process and attempt, shared by its tasks and stages, and
        closed once (``close(value)``; or, with no ``close``, the context manager ``open()``
        returned is exited): after ``idle_timeout`` seconds unused, when the worker exits or is
        stopped, and after each task when workers are not reused. With ``counts`` (the default)
        each task reports its opens, closes and uses through an accumulator (``ref.counts()``,
        ``zkstore jobs show``). See the README's section "Resources on executors".
        """
        return self._resources.declare(name, open, close, idle_timeout=idle_timeout, counts=counts)

    def decorate(self, decorator: Decorator) -> None:
        """Run ``decorator(task_info)``, a context manager, around every ``ctx.task`` task."""
        self._resources.decorate(decorator)

    def task(self, function: Callable[..., Any]) -> TaskFunction:
        """Wrap a partition function (mapPartitions, foreachPartition, mapInPandas...): it runs
        with the job's decorators and with log records tagged job, attempt, stage, partition."""
        return self._resources.task(function)

    def close(self) -> None:
        """Called by the driver once the job function is over: the final resource counts."""
        self._resources.finish()
