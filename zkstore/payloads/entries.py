"""What the state handle store hands out: live entries, broken ones, and its instance ids."""

from __future__ import annotations

import os
import re
import socket
import uuid
from dataclasses import dataclass
from typing import Generic, TypeVar

from zkstore.errors import ZkStoreError
from zkstore.records.handle import Handle

__all__ = ["Broken", "Entry", "GetAllResult", "new_instance_id"]

T = TypeVar("T")


_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9._-]")


def new_instance_id() -> str:
    """A store instance id: host, pid and a random part, usable as a znode name."""
    host = _NOT_IN_A_NAME.sub("-", socket.gethostname())[:40] or "host"
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A live entry: its name, deserialized state and handle (whose ``version`` is the znode's)."""

    name: str
    state: T
    handle: Handle

    @property
    def version(self) -> int:
        assert self.handle.version is not None
        return self.handle.version


@dataclass(frozen=True)
class Broken:
    """An entry that cannot be read or verified, with the reason; its handle if it parsed."""

    name: str
    path: str
    error: ZkStoreError
    handle: Handle | None = None

    @property
    def reason(self) -> str:
        return f"{type(self.error).__name__}: {self.error}"


@dataclass(frozen=True)
class GetAllResult(Generic[T]):
    """What :meth:`ZooKeeperStateHandleStore.get_all` found: live entries and broken ones."""

    entries: list[Entry[T]]
    broken: list[Broken]
