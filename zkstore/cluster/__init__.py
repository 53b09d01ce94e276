"""One cluster as a whole: the connection that hands out every store, and the operations that
span several stores of one job.

::

    connection.py
                 :class:`Cluster`: one ZooKeeper session, the storage and every job store
    fleet_protocol.py
                 the fleet's protocol: ``R/fleet``, the gate on newer features, a daemon's
                 admission, finalization
    cluster_settings.py
                 ``R/settings``: the bounds and policies the leader enforces, published
    pools.py     ``R/pools``: named limits and priorities of the jobs that run at once
    cleanup.py   a finished job's cleanup (DIRTY -> CLEAN): artifacts, checkpoints, records
    quotas.py    the quota ZooKeeper enforces on each job's node, and the probe that tells
                 whether the ensemble enforces quotas at all
    triage.py    what an operator does with a job the runtime will not finish: release, purge,
                 cancel, forget

These sit above :mod:`zkstore.jobs` (one store per kind of record) and never below it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zkstore.cluster.connection import Cluster

__all__ = ["Cluster"]


def __getattr__(name: str) -> Any:
    """:class:`Cluster` imported on first use: importing one module of the package (its pools,
    its fleet protocol, its settings) does not import every store and the storage with it."""
    if name == "Cluster":
        from zkstore.cluster.connection import Cluster

        return Cluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
