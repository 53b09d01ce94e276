"""Executor-side job resources: what runs in Spark's Python workers.

A job declares a resource on the driver (``ref = ctx.resource(name, open, close)``) and its tasks
call ``ref.get()``. In each Python worker process the resource is opened once per job attempt, on
first use, shared by every task and stage that runs there, and closed exactly once: when it has
been idle for its timeout, when the worker exits, when the worker is told to stop, and at the end
of each task when workers are not reused. The pieces::

    ref.py        the picklable :class:`ResourceRef` tasks carry
    registry.py   the per-process registry that opens once and closes once
    hooks.py      when a process closes (idle, exit, SIGHUP/SIGTERM)
    tasks.py      the task scope of ``ctx.task``: decorators, tagged logs

These modules import nothing heavy (no ZooKeeper client): every Python worker imports them.
"""

from recovery.executor.ref import DEFAULT_IDLE_TIMEOUT, ResourceRef
from recovery.executor.tasks import TaskFunction, TaskInfo, TaskLogFilter, current_task_info

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "ResourceRef",
    "TaskFunction",
    "TaskInfo",
    "TaskLogFilter",
    "current_task_info",
]
