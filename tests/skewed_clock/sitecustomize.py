"""A host whose clock is off, for one process tree: put this directory on ``PYTHONPATH`` and set
``SKEWED_CLOCK_SECONDS`` (negative: behind). Python imports ``sitecustomize`` at its start, before
anything else: ``time.time`` is moved by that many seconds, and ``datetime`` is made to use its
pure-Python implementation (the C one reads the system clock itself), whose ``now`` reads
``time.time``. Monotonic clocks stay true, as they do when a host's wall clock is wrong. Test-only
(``tests/chaos_faults/test_clock_skew.py``): libfaketime does the same for any program, but is not
installed here.
"""

from __future__ import annotations

import os
import sys
import time

_SKEW = float(os.environ.get("SKEWED_CLOCK_SECONDS", "0"))

if _SKEW:
    # the C modules that take datetime's C interface have pure-Python twins too
    for _name in ("_datetime", "_zoneinfo"):
        sys.modules[_name] = None  # type: ignore[assignment]
    _real_time, _real_time_ns = time.time, time.time_ns
    time.time = lambda: _real_time() + _SKEW
    time.time_ns = lambda: _real_time_ns() + int(_SKEW * 1e9)
