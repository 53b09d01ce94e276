"""The HA runtime of zkstore: leader election, the recovery daemon, job drivers, HA submission.

The Python API of submission is :class:`Client` and :func:`submit`; jobs written as functions
receive a :class:`JobContext` and may raise or catch :class:`JobCancelled`.

The names are imported on first use: Spark's Python workers import ``recovery.executor`` for
every job resource, and must not pay for the ZooKeeper client they never use.

The runtime's pieces, from the top (a module imports only from its own layer and those below:
``make lint``)::

    cli/           the whole ``zkstore`` command line, above both libraries: one module (or
                   package) per noun, every command named in ``cli/main.py``
    dev/           the demo and a local cluster of daemon processes (the chaos and upgrade
                   tests are in the ``zkstore_dev`` package)
    daemon.py      the daemon process: one member, a leader while elected, the HTTP side
    observe/       every daemon's HTTP side: health, a JSON API, metrics, the status page
    leader/        the leader role inside a daemon: election, the acting loop, decisions and
                   their fenced actions
    member/        this daemon as a fleet member: its drivers launched, adopted and ended, their
                   exits recorded and their logs shipped
    driver/        the driver process: one attempt of one job, and the ``ctx`` the job gets
    client/        the submit side: :class:`Client`, :func:`submit`, what a job takes along
    executor/      what runs in Spark's Python workers: a job's executor-side resources
    shared/        what two of the runtime's processes need, below all of them
    settings.py    the daemon's validated settings (every role reads them)
    capacity.py    the default of ``--max-drivers`` from the host's cores and memory
    proctitle.py   process titles naming the role and the job
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recovery.client.api import Client, JobEnd, submit
    from recovery.client.spark_dependencies import Dependencies
    from recovery.driver.context import JobCancelled, JobContext
    from zkstore.errors import JobNotFound, WaitTimeout

# Imported on first use: Spark's Python workers import this package to unpickle job code, and
# must not pay for the ZooKeeper client's imports.
_HOMES = {
    "Client": "recovery.client.api",
    "JobEnd": "recovery.client.api",
    "submit": "recovery.client.api",
    "Dependencies": "recovery.client.spark_dependencies",
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
    "JobEnd",
    "JobNotFound",
    "WaitTimeout",
    "submit",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'recovery' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
