"""A daemon's own memory, cheap enough to read at every scrape: its resident set (``/proc``)
and the blocks Python's allocator holds (objects and their small buffers; what grows when a
daemon keeps something per job, issue 62).

Both go to ``/metrics`` (``zkstore_daemon_resident_memory_bytes``,
``zkstore_daemon_python_heap_blocks``) and, every :data:`REPORT_EVERY` seconds, into the
daemon's member record, which ``zkstore daemons list`` shows.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

__all__ = ["REPORT_EVERY", "OwnMemory", "own_memory"]

#: Seconds between two reports of a daemon's memory in its member record (a write each).
REPORT_EVERY = 30.0

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class OwnMemory:
    """This process's resident set in bytes (None where ``/proc`` does not say) and the
    memory blocks its Python allocator holds."""

    rss: int | None
    heap_blocks: int


def own_memory() -> OwnMemory:
    """Read now: a read of ``/proc/self/statm`` and a count Python keeps (microseconds)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            rss: int | None = int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        rss = None
    return OwnMemory(rss=rss, heap_blocks=sys.getallocatedblocks())
