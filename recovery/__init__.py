"""The HA runtime of zkstore: leader election, the recovery daemon, job drivers, HA submission.

The Python API of submission is :class:`Client` and :func:`submit`; jobs written as functions
receive a :class:`JobContext` and may raise or catch :class:`JobCancelled`.

The names are imported on first use: Spark's Python workers import ``recovery.executor`` for
every job resource, and must not pay for the ZooKeeper client they never use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recovery.client.client import Client, submit
    from recovery.client.shipping import Dependencies
    from recovery.driver.context import JobCancelled, JobContext
    from zkstore.errors import JobNotFound, WaitTimeout

# Imported on first use: Spark's Python workers import this package to unpickle job code, and
# must not pay for the ZooKeeper client's imports.
_HOMES = {
    "Client": "recovery.client.client",
    "submit": "recovery.client.client",
    "Dependencies": "recovery.client.shipping",
    "JobCancelled": "recovery.driver.signals",
    "JobContext": "recovery.driver.context",
    "JobNotFound": "zkstore.errors",
    "WaitTimeout": "zkstore.errors",
}

__all__ = [
    "Client",
    "Dependencies",
    "JobCancelled",
    "JobContext",
    "JobNotFound",
    "WaitTimeout",
    "submit",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'recovery' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
