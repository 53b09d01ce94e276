"""The HA runtime of zkstore: leader election, the recovery daemon, job drivers, HA submission.

The Python API of submission is :class:`Client` and :func:`submit`; jobs written as functions
receive a :class:`JobContext` and may raise or catch :class:`JobCancelled`.
"""

from recovery.client import Client, submit
from recovery.context import JobCancelled, JobContext
from recovery.shipping import Dependencies
from zkstore.errors import JobNotFound, WaitTimeout

__all__ = [
    "Client",
    "Dependencies",
    "JobCancelled",
    "JobContext",
    "JobNotFound",
    "WaitTimeout",
    "submit",
]
