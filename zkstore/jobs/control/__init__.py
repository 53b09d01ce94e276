"""A job's control plane: the desired configuration, what the live attempt applied, the keys
the job declared, and the history of changes.

::

    R/jobs/<job>/control        desired: flat keys, JSON scalar values (anybody, compare-and-set)
    R/jobs/<job>/control-ack    acknowledged: applied version, values in effect, per-key states
                                (the live attempt's driver, fenced on its attempt)
    R/jobs/<job>/control-keys   declared keys and their types (the driver, fenced)
    S/<cluster>/jobs/<job>/control-history/<version>-<uuid>.json   one change each (bounded)

:class:`ControlStore` is the Python API (``zkstore control`` and the HTTP API use it);
:func:`read_view` the picture ``control get`` shows. The job's side is ``recovery.driver.control``.
"""

from zkstore.jobs.control.history import ControlHistory, HistoryEntry, gaps
from zkstore.jobs.control.records import (
    APPLIED,
    NEEDS_RESTART,
    REJECTED,
    ControlAck,
    ControlKeys,
    KeyDecision,
)
from zkstore.jobs.control.store import ControlChange, ControlStore, Declared, Desired
from zkstore.jobs.control.values import (
    CHECKPOINT,
    LOG_LEVEL,
    PAUSE,
    DeclaredKey,
    job_values,
    log_level,
    value_error,
)
from zkstore.jobs.control.view import (
    CONTROL_REQUEST_FIELD,
    CONTROL_VERSION_FIELD,
    KEY_PENDING,
    ControlView,
    read_view,
)

__all__ = [
    "APPLIED",
    "CHECKPOINT",
    "CONTROL_REQUEST_FIELD",
    "CONTROL_VERSION_FIELD",
    "KEY_PENDING",
    "LOG_LEVEL",
    "NEEDS_RESTART",
    "PAUSE",
    "REJECTED",
    "ControlAck",
    "ControlChange",
    "ControlHistory",
    "ControlKeys",
    "ControlStore",
    "ControlView",
    "Declared",
    "DeclaredKey",
    "Desired",
    "HistoryEntry",
    "KeyDecision",
    "gaps",
    "job_values",
    "log_level",
    "read_view",
    "value_error",
]
