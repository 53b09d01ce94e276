"""A job's control plane: the desired configuration, what the live attempt applied, the keys
the job declared, and the history of changes.

::

    R/jobs/<job>/control        desired: flat keys, JSON scalar values (anybody, compare-and-set)
    R/jobs/<job>/control-ack    acknowledged: applied version, values in effect, per-key states
                                (the live attempt's driver, fenced on its attempt)
    R/jobs/<job>/control-keys   declared keys and their types (the driver, fenced)
    S/<cluster>/jobs/<job>/control-history/<version>-<uuid>.json   one change each (bounded)

:class:`ControlStore` is the Python API (``zkstore control`` and the HTTP API use it);
:func:`read_view` the picture ``control get`` shows. The job's side is
``recovery.driver.job_control``. The modules::

    values.py           what a control object may hold: flat keys, scalar values, built-ins, types
    control_records.py  what the driver writes beside it: the acknowledgement, the declared keys
    control_store.py    :class:`ControlStore`: set (compare-and-set), acknowledge, declare
    control_history.py  the history of changes: one small object per change, in storage
    control_view.py     desired against applied, per key: what ``control get`` shows
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zkstore.jobs.control.control_history import ControlHistory, HistoryEntry, gaps
    from zkstore.jobs.control.control_records import (
        APPLIED,
        NEEDS_RESTART,
        REJECTED,
        ControlAck,
        ControlKeys,
        KeyDecision,
    )
    from zkstore.jobs.control.control_store import ControlChange, ControlStore, Declared, Desired
    from zkstore.jobs.control.control_view import (
        CONTROL_REQUEST_FIELD,
        CONTROL_VERSION_FIELD,
        KEY_PENDING,
        ControlView,
        read_view,
    )
    from zkstore.jobs.control.values import (
        CHECKPOINT,
        LOG_LEVEL,
        PAUSE,
        DeclaredKey,
        job_values,
        log_level,
        value_error,
    )

# Each name is imported from its module on first use: the snapshot reader needs the records only,
# and must not pay for the history's storage (issue 27: `zkstore jobs list` answers at once).
_HOMES = {
    "ControlHistory": "zkstore.jobs.control.control_history",
    "HistoryEntry": "zkstore.jobs.control.control_history",
    "gaps": "zkstore.jobs.control.control_history",
    "APPLIED": "zkstore.jobs.control.control_records",
    "NEEDS_RESTART": "zkstore.jobs.control.control_records",
    "REJECTED": "zkstore.jobs.control.control_records",
    "ControlAck": "zkstore.jobs.control.control_records",
    "ControlKeys": "zkstore.jobs.control.control_records",
    "KeyDecision": "zkstore.jobs.control.control_records",
    "ControlChange": "zkstore.jobs.control.control_store",
    "ControlStore": "zkstore.jobs.control.control_store",
    "Declared": "zkstore.jobs.control.control_store",
    "Desired": "zkstore.jobs.control.control_store",
    "CHECKPOINT": "zkstore.jobs.control.values",
    "LOG_LEVEL": "zkstore.jobs.control.values",
    "PAUSE": "zkstore.jobs.control.values",
    "DeclaredKey": "zkstore.jobs.control.values",
    "job_values": "zkstore.jobs.control.values",
    "log_level": "zkstore.jobs.control.values",
    "value_error": "zkstore.jobs.control.values",
    "CONTROL_REQUEST_FIELD": "zkstore.jobs.control.control_view",
    "CONTROL_VERSION_FIELD": "zkstore.jobs.control.control_view",
    "KEY_PENDING": "zkstore.jobs.control.control_view",
    "ControlView": "zkstore.jobs.control.control_view",
    "read_view": "zkstore.jobs.control.control_view",
}


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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
