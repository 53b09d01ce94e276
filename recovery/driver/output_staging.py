"""``ctx.outputs``: a step's output, staged by the attempt and committed with its checkpoint.

::

    staging = ctx.outputs.stage("days")                 # this attempt's place for its parts
    df.write.parquet(f"{staging}/day={n}")              # or any file under it
    ctx.checkpoint({"day": n}, commit={"days": [f"{staging}/day={n}"]})
    ...
    spark.read.parquet(*ctx.outputs.paths("days", hadoop=True))   # what was committed

The parts are named in the checkpoint's own ZooKeeper transaction, fenced on the attempt: a
step's parts are committed if and only if its checkpoint is, and an attempt that another
attempt superseded commits nothing (``AttemptSuperseded``; what it staged is deleted). No data
is copied or renamed. An output's place is an artifact of the job (``output.<name>``, job
scope, kept when the job succeeds); what was staged and never committed is deleted with the
attempt's other artifacts. See :mod:`zkstore.jobs.outputs`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from recovery.driver.artifact_registry import JobArtifacts
from recovery.driver.signals import AttemptSuperseded
from zkstore.cluster import fleet_protocol as fleet
from zkstore.errors import ConfigError, FenceLost, HandleNotFound, ZkStoreError
from zkstore.jobs.outputs.manifest import Manifest, hadoop_url
from zkstore.jobs.outputs.output_records import part_problem, staging_dir
from zkstore.jobs.outputs.output_store import OutputStore, artifact_name, validate_output_name
from zkstore.protocol import FEATURES, OUTPUTS
from zkstore.zookeeper.ops import Fence, Op

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["JobOutputs"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class JobOutputs:
    """The job's outputs, as ``ctx.outputs``."""

    def __init__(
        self,
        store: OutputStore,
        artifacts: JobArtifacts,
        *,
        attempt: int,
        fence: Fence,
        spark: Callable[[], SparkSession] | None = None,
    ) -> None:
        self._store = store
        self._artifacts = artifacts
        self._attempt = attempt
        self._fence = fence
        self._spark = spark
        self._places: dict[str, str] = {}
        self._allowed = False

    # -- writing -------------------------------------------------------------------------------

    def stage(self, name: str, uri: str | None = None) -> str:
        """This attempt's place for the parts of output ``name``: write them under it, then
        name them in ``ctx.checkpoint(state, commit={name: [paths]})``.

        The output's own place is ``uri`` (any place :meth:`JobArtifacts.register` accepts;
        default: the job's prefix in the storage root), the same for every attempt; each
        attempt stages under ``<place>/attempt-<n>``. Raises
        :class:`~zkstore.errors.FleetVersionError` until the fleet is finalized at the
        protocol of outputs.
        """
        validate_output_name(name)
        if not self._allowed:
            fleet.require(self._store.zk, self._store.layout, FEATURES[OUTPUTS])
            self._allowed = True
        artifact = artifact_name(name)
        place = self._artifacts.register(artifact, uri, scope="job", keep=True)
        if not self._artifacts.finished(artifact):
            self._artifacts.finish(artifact)  # kept if the job succeeds: its commits are final
        self._fenced(lambda: self._store.declare(name, place, fence=self._fence))
        self._places[name] = place
        staging = f"{place}/{staging_dir(self._attempt)}"
        if staging.startswith("file://"):  # so that plain open() and pandas can write there
            os.makedirs(staging.removeprefix("file://"), exist_ok=True)
        return staging

    def open(self, path: str) -> Any:
        """A binary file object writing ``path`` (under a staging place :meth:`stage`
        returned), through the storage's own filesystem: what a job that writes files
        without Spark uses on S3 as on local disk."""
        for name, place in self._places.items():
            staging = f"{place}/{staging_dir(self._attempt)}"
            if path.startswith(staging + "/"):
                part = self._relative(name, place, staging, path)
                return self._store.space.open_for_writing(self._store.job_id, f"{place}/{part}")
        raise ConfigError(f"{path[:300]!r} is under no staging place of this attempt")

    def uri(self, name: str) -> str:
        """The output's place (where its manifest files are: ``read_paths(uri)``)."""
        return self._place(name)

    def commit_ops(self, commit: Mapping[str, Sequence[str]]) -> Callable[[int], list[Op]]:
        """The ops (given the checkpoint's id) that commit ``commit`` ({output: [paths]}) with
        a checkpoint. Each path is under this attempt's staging place (as :meth:`stage`
        returned it, or relative to it), and must hold data now. Raises
        :class:`~zkstore.errors.ConfigError` otherwise, before anything is written."""
        parts = self.relative(commit)

        def ops(checkpoint_id: int) -> list[Op]:
            found: list[Op] = []
            for name, relative in parts.items():
                found += self._store.commit_ops(name, checkpoint_id, self._attempt, relative)
            return found

        return ops

    def relative(self, commit: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
        """``commit``'s parts relative to each output's place, checked."""
        parts: dict[str, list[str]] = {}
        where: list[tuple[str, str]] = []  # (output, URI) of every part, to look at at once
        for name, paths in commit.items():
            if isinstance(paths, str):
                raise ConfigError(f"commit={{{name!r}: ...}} takes a list of paths, not a string")
            place = self._place(name)
            staging = f"{place}/{staging_dir(self._attempt)}"
            parts[name] = [self._relative(name, place, staging, str(path)) for path in paths]
            where += [(name, f"{place}/{part}") for part in parts[name]]
        there = self._store.space.occupied_many(self._store.job_id, [uri for _, uri in where])
        for (name, uri), occupied in zip(where, there, strict=True):
            if not occupied:
                # swept because this attempt was superseded? Then that is what it hears.
                self._fenced(lambda: self._store.zk.ensure_fence(self._fence))
                raise ConfigError(f"output {name!r}: nothing was written at {uri}")
        return parts

    def _relative(self, name: str, place: str, staging: str, path: str) -> str:
        path = path.rstrip("/")
        if path.startswith("s3a://"):
            path = "s3://" + path.removeprefix("s3a://")
        if path.startswith("/") and place.startswith("file://"):
            path = "file://" + path
        if "://" not in path:
            path = f"{staging}/{path}"
        if not path.startswith(staging + "/"):
            raise ConfigError(
                f"output {name!r}: {path[:300]!r} is not under this attempt's staging place "
                f"{staging}/ (ctx.outputs.stage({name!r}))"
            )
        part = path[len(place) + 1 :]
        problem = part_problem(part, self._attempt)
        if problem is not None:
            raise ConfigError(f"output {name!r}: {problem}")
        return part

    def committed(self, commit: Mapping[str, Sequence[str]]) -> bool:
        """True if every output of ``commit`` has a commit of this attempt with exactly these
        parts (a commit whose answer was lost was applied)."""
        parts = self.relative(commit)
        return all(
            self._store.committed(name, self._attempt, relative) is not None
            for name, relative in parts.items()
        )

    def published(self, names: Sequence[str]) -> None:
        """After a commit: the manifest files of ``names`` (a reader without ZooKeeper sees
        the commit). Never fails the job: the next commit or the job's end writes them."""
        for name in names:
            try:
                self._store.write_manifest(name)
            except ZkStoreError as exc:
                logger.warning("manifest file of output %s not written: %s", name, exc)

    def discard(self, commit: Mapping[str, Sequence[str]]) -> None:
        """This attempt's commit was refused (superseded): delete the parts it staged (no
        other attempt writes under this attempt's staging place)."""
        for name, paths in commit.items():
            place = self._places.get(name)
            if place is None:
                continue
            staging = f"{place}/{staging_dir(self._attempt)}"
            for path in paths:
                try:
                    part = self._relative(name, place, staging, str(path))
                    self._store.space.delete(self._store.job_id, f"{place}/{part}")
                except (ConfigError, ZkStoreError) as exc:
                    logger.warning("staged part %s of output %s not deleted: %s", path, name, exc)

    def delete(self, name: str) -> None:
        """Delete the output: its records (readers no longer see it), then its data."""
        self._fenced(lambda: self._store.remove(name, fence=self._fence))
        self._artifacts.release(artifact_name(name))
        self._places.pop(name, None)

    # -- reading -------------------------------------------------------------------------------

    def manifest(self, name: str) -> Manifest:
        """What was committed to output ``name`` (by any attempt), oldest commit first."""
        return self._store.manifest(name)

    def paths(self, name: str, *, hadoop: bool = False) -> list[str]:
        """The committed parts' URIs; ``hadoop=True`` gives the URLs Spark reads (``s3a://``):
        ``spark.read.parquet(*ctx.outputs.paths("days", hadoop=True))``."""
        found = self.manifest(name).paths
        return [hadoop_url(p) for p in found] if hadoop else found

    def read(self, name: str, format: str = "parquet", **options: Any) -> DataFrame:
        """A DataFrame of the committed parts of ``name`` (``ctx.spark.read``); an output with
        no commit yet is refused (Spark cannot infer a schema from no path)."""
        if self._spark is None:
            raise RuntimeError("this job context has no Spark")
        paths = self.paths(name, hadoop=True)
        if not paths:
            raise HandleNotFound(f"output {name!r} of job {self._store.job_id} has no commit yet")
        return self._spark().read.format(format).options(**options).load(paths)

    def list(self) -> list[str]:
        """The names of the job's outputs."""
        return self._store.names()

    def _place(self, name: str) -> str:
        place = self._places.get(name)
        if place is not None:
            return place
        found = self._store.get(name)
        if found is None:
            raise HandleNotFound(
                f"job {self._store.job_id} has no output {name!r}: ctx.outputs.stage({name!r}) "
                "first",
                path=self._store.layout.output(self._store.job_id, name),
            )
        return found.uri

    def _fenced(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except FenceLost as exc:
            raise AttemptSuperseded(f"attempt {self._attempt}: {exc}") from exc
