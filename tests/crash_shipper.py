"""Run the daemon's log shipper in a child process and die (os._exit) once it has stored its
first chunk, as a SIGKILL would leave it.

``main(spec)`` with keys dir (the shipping directory), storage (a storage URL) and cluster (the
cluster id). Exit code 77 means the process died after the store; 0 that it never stored one.
"""

from __future__ import annotations

import os
from pathlib import Path

from recovery.member.log_shipper import ShipperService
from zkstore.jobs.logs import chunk_name
from zkstore.payloads.storage import StateStorage
from zkstore.records.handle import PayloadRef

CRASHED = 77


class _DiesAfterAChunk(StateStorage):
    def create(self, key: str, data: bytes) -> PayloadRef:
        stored = super().create(key, data)
        if key.endswith("/" + chunk_name(0)):
            os._exit(CRASHED)
        return stored


def main(spec: dict[str, str]) -> int:
    storage = _DiesAfterAChunk(spec["storage"])
    return ShipperService(Path(spec["dir"]), storage, spec["cluster"], interval=0.05).run()
