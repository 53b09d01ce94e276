"""``ctx.artifacts``: what a job registers before it writes it, so that nothing it leaves leaks.

::

    staging = ctx.artifacts.register("staging")                  # attempt scope, default place
    parts = ctx.artifacts.register("parts", scope="job")          # reused by a resumed attempt
    out = ctx.artifacts.register("report", "s3://bucket/reports/2026-11-21", scope="job",
                                 keep=True)                       # kept if the job succeeds
    ...write...
    ctx.artifacts.finish("report")
    ctx.artifacts.release("staging")                              # done with it

Every write is fenced on this attempt (see :mod:`zkstore.jobs.job_artifacts` for the records and
what a crash at any step leaves). The checkpoint directory of ``ctx.spark`` is an artifact too
(``spark-checkpoints``, attempt scope), registered when the SparkSession is built.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from recovery.driver.signals import AttemptSuperseded, JobCancelled
from zkstore.errors import FenceLost
from zkstore.jobs.job_artifacts import ATTEMPT, FINISHED, Artifact, ArtifactStore
from zkstore.zookeeper.ops import Fence

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SPARK_CHECKPOINTS", "JobArtifacts", "hadoop_url"]

logger = logging.getLogger(__name__)

SPARK_CHECKPOINTS = "spark-checkpoints"

T = TypeVar("T")


class JobArtifacts:
    """The job's artifacts, as ``ctx.artifacts`` (thread-safe: every call is one or a few
    conditional ZooKeeper writes)."""

    def __init__(
        self,
        store: ArtifactStore,
        *,
        attempt: int,
        fence: Fence,
        cancelled: threading.Event,
    ) -> None:
        self._store = store
        self._attempt = attempt
        self._fence = fence
        self._cancelled = cancelled

    def register(
        self, name: str, uri: str | None = None, *, scope: str = ATTEMPT, keep: bool = False
    ) -> str:
        """Record the artifact ``name`` before creating it; returns the URI to write to.

        ``uri`` is any fsspec URL (or absolute local path) under the artifact roots: the job's
        own prefix in the storage root (the default place, when ``uri`` is None) and every
        ``zkstore daemon --artifact-root``; anything else raises a ConfigError naming them.
        ``scope="attempt"`` (a staging directory) is released before the next attempt starts;
        ``scope="job"`` (intermediate results) outlives attempts: registering it again in a
        resumed attempt returns the same URI, and :meth:`finished` says whether it was
        completed. ``keep=True`` keeps it when the job succeeds (listed in the job's result).
        """
        return self._fenced(
            lambda: self._store.register(
                name, uri, scope=scope, keep=keep, attempt=self._attempt, fence=self._fence
            )
        ).uri

    def finish(self, name: str) -> None:
        """Mark the artifact complete (a resumed attempt may trust it; a kept output is kept).

        If the job was cancelled, the artifact is released instead and
        :class:`~recovery.driver.context.JobCancelled` is raised: a cancelled job keeps nothing.
        """
        done = self._fenced(
            lambda: self._store.finish(name, attempt=self._attempt, fence=self._fence)
        )
        if done is not None:
            return
        self._cancelled.set()
        raise JobCancelled(f"job {self._store.job_id} was cancelled: artifact {name!r} released")

    def release(self, name: str) -> None:
        """Delete the artifact's data, then its record (the job is done with it); idempotent."""
        self._fenced(lambda: self._store.release(name, fence=self._fence))

    def get(self, name: str) -> Artifact | None:
        """The artifact's record (``uri``, ``scope``, ``attempt``, ``state``, ``keep``)."""
        return self._store.get(name)

    def finished(self, name: str) -> bool:
        """True if the artifact is registered and was marked finished (by any attempt)."""
        found = self._store.get(name)
        return found is not None and found.state == FINISHED

    def list(self) -> list[Artifact]:
        """Every artifact of the job, by name."""
        return self._store.all()[0]

    def use_for_spark_checkpoints(self, spark: SparkSession) -> str | None:
        """Make an attempt-scoped artifact Spark's checkpoint directory (``setCheckpointDir``),
        unless the job set ``spark.checkpoint.dir`` itself. Returns the URI, or None."""
        context = spark.sparkContext
        if context.getConf().get("spark.checkpoint.dir"):
            return None
        uri = self.register(SPARK_CHECKPOINTS)
        try:
            context.setCheckpointDir(hadoop_url(uri))
        except Exception as exc:  # noqa: BLE001 - a Py4J error: Spark cannot write there
            logger.warning("Spark cannot use %s for checkpoints (%s): not set", uri, exc)
            self.release(SPARK_CHECKPOINTS)
            return None
        logger.info("Spark checkpoint directory: %s (released with the attempt)", uri)
        return uri

    def _fenced(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except FenceLost as exc:
            raise AttemptSuperseded(f"attempt {self._attempt}: {exc}") from exc


def hadoop_url(uri: str) -> str:
    """The URL Spark's Hadoop filesystems know for an fsspec URL (``s3://`` is ``s3a://``)."""
    return "s3a://" + uri.removeprefix("s3://") if uri.startswith("s3://") else uri
