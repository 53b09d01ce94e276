"""How a job's code is pickled: what travels by value (the submitter's own modules) and what by
reference (what is installed where the job runs). The client pickles a job's function this way,
and the driver an executor resource's callables: one rule for both."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from types import ModuleType

import cloudpickle

__all__ = ["is_user_module", "pickled_by_value"]

_BY_VALUE_LOCK = threading.Lock()


@contextlib.contextmanager
def pickled_by_value(module: ModuleType | None) -> Iterator[None]:
    """Within the block, cloudpickle serializes ``module``'s code by value (if one is given)."""
    if module is None:
        yield
        return
    # cloudpickle's registry is process-wide: submissions from several threads take turns.
    with _BY_VALUE_LOCK:
        cloudpickle.register_pickle_by_value(module)
        try:
            yield
        finally:
            cloudpickle.unregister_pickle_by_value(module)


def is_user_module(module: ModuleType) -> bool:
    """True for code that the driver's host may not have: not installed in site-packages."""
    origin = getattr(module, "__file__", None)
    if module.__name__ == "__main__" or origin is None:
        return module.__name__ == "__main__"
    return "site-packages" not in origin and "dist-packages" not in origin
