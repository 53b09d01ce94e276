"""One connection to a zkstore cluster: its ZooKeeper session, its storage and every store.

This is where the pieces meet: built from a :class:`~zkstore.config.StoreConfig`, it opens the
session, makes sure the cluster's base paths exist, and hands out the job graph, result, state,
quarantine, checkpoint and artifact stores, all sharing one instance id.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from zkstore.closing import Closeable
from zkstore.cluster import fleet_protocol as fleet
from zkstore.config import StoreConfig
from zkstore.errors import HandleExists
from zkstore.jobs.checkpoints import DEFAULT_RETAIN, CheckpointStore
from zkstore.jobs.claims import ArtifactClaims
from zkstore.jobs.control import ControlStore
from zkstore.jobs.graph import JobGraphStore
from zkstore.jobs.job_artifacts import ArtifactStore
from zkstore.jobs.job_state_store import JobStateStore
from zkstore.jobs.outputs.output_store import OutputStore
from zkstore.jobs.quarantine import QuarantineStore
from zkstore.jobs.results import JobResultStore
from zkstore.layout import Layout, StorageLayout
from zkstore.payloads.artifacts import ArtifactSpace
from zkstore.payloads.entries import new_instance_id
from zkstore.payloads.storage import StateStorage
from zkstore.protocol import PINNED_REQUESTS
from zkstore.zookeeper.ops import Create
from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["Cluster"]


class Cluster(Closeable):
    """The stores of one cluster over one ZooKeeper session (use :meth:`open` or ``with``)."""

    def __init__(
        self,
        config: StoreConfig,
        *,
        zk: ZooKeeper | None = None,
        instance_id: str | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self._on_step = on_step
        self.instance_id = instance_id or new_instance_id()
        self.layout = Layout(config.base_path)
        self.storage_layout = StorageLayout(config.cluster_id)
        self.storage = StateStorage(
            config.storage_url,
            config.storage_options,
            signer=config.signer,
            max_payload_bytes=config.max_payload_bytes,
            timeout=config.timeout,
        )
        self._owns_zk = zk is None
        self.zk = zk or ZooKeeper.from_config(config)
        self.jobs = JobGraphStore(
            self.zk,
            self.layout,
            self.storage,
            self.storage_layout,
            instance_id=self.instance_id,
            on_step=on_step,
        )
        self.results = JobResultStore(self.zk, self.layout)
        #: the fleet's protocol, as last read: which records this connection may write
        self.fleet = fleet.FleetReading(self.zk, self.layout)
        self.state = JobStateStore(self.zk, self.layout, pinned=self.pins_requests)
        self.quarantine = QuarantineStore(self.zk, self.layout, self.jobs.handles)
        self.artifact_space = ArtifactSpace(
            self.storage,
            self.storage_layout,
            config.artifact_roots,
            options=config.storage_options,
            timeout=config.timeout,
        )
        self.claims = ArtifactClaims(self.zk, self.layout)

    @classmethod
    def open(cls, config: StoreConfig, **kwargs: object) -> Cluster:
        """Connect (raising :class:`~zkstore.errors.StoreUnavailable` within the timeout)."""
        cluster = cls(config, **kwargs)  # type: ignore[arg-type]
        try:
            cluster.start()
        except BaseException:
            cluster.close()
            raise
        return cluster

    def start(self, *, ensure_layout: bool = True) -> Cluster:
        """Connect (if this cluster made its own client) and make the layout's top-level parents
        that are missing (their existence asked in one pipelined round). A driver passes
        ``ensure_layout=False``: every node it writes is under its job's, which the leader made,
        or its transaction fails."""
        if self._owns_zk:
            self.zk.start()
        if ensure_layout:
            paths = list(self.layout.base_paths())
            missing = [
                p for p, stat in zip(paths, self.zk.exists_many(paths), strict=True) if not stat
            ]
            if self.layout.current_jobs in missing:
                self._make_new_cluster()
            for path in missing:
                self.zk.ensure_path(path)
        return self

    def _make_new_cluster(self) -> None:
        """A cluster without ``currentJobs`` is new: make it with its fleet record at this
        code's protocol, in one transaction (nothing older can have written anything in it).
        Another process making it at the same moment wins; so does an existing record."""
        self.zk.ensure_path(self.layout.base)
        # made meanwhile (or a fleet record without currentJobs): the rest is ensured after
        with contextlib.suppress(HandleExists):
            self.zk.commit([Create(self.layout.current_jobs), *fleet.new_cluster_ops(self.layout)])

    def pins_requests(self) -> bool:
        """Whether a cancel, stop or end written now gets its pin
        (:mod:`zkstore.jobs.request_pins`): once the fleet is finalized at protocol 5."""
        return self.fleet.allows(PINNED_REQUESTS)

    def step(self, name: str) -> None:
        """Between two steps of a multi-step write: tests inject crashes here."""
        if self._on_step is not None:
            self._on_step(name)

    def checkpoints(self, job_id: str, *, retain: int = DEFAULT_RETAIN) -> CheckpointStore:
        return CheckpointStore(
            self.zk,
            self.layout,
            self.storage,
            self.storage_layout,
            job_id,
            retain=retain,
            instance_id=self.instance_id,
            on_step=self._on_step,
        )

    def control(self, job_id: str) -> ControlStore:
        """The job's control plane: desired, acknowledged, declared, history."""
        return ControlStore(
            self.zk,
            self.layout,
            self.storage,
            self.storage_layout,
            job_id,
            on_step=self._on_step,
        )

    def artifacts(self, job_id: str) -> ArtifactStore:
        """The artifact records of one job, releasing data under this config's roots only."""
        return ArtifactStore(
            self.zk, self.layout, self.artifact_space, job_id, on_step=self._on_step
        )

    def outputs(self, job_id: str) -> OutputStore:
        """The outputs of one job: committed with its checkpoints, read from their manifest."""
        return OutputStore(self.zk, self.layout, self.artifact_space, job_id)

    def close(self) -> None:
        """Close the session if this object opened it (its ephemeral nodes go with it)."""
        if self._owns_zk:
            self.zk.stop()
