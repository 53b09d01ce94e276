"""``ctx.config``: the job's desired configuration as this attempt applied it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["DynamicConfig"]


class DynamicConfig(Mapping[str, Any]):
    """A read-only mapping over the job's ``control`` node, refreshed when it changes."""

    def __init__(self, load: Callable[[], dict[str, Any]]) -> None:
        self._load = load
        self._values: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def invalidate(self) -> None:
        with self._lock:
            self._values = None

    def _current(self) -> dict[str, Any]:
        with self._lock:
            if self._values is None:
                self._values = self._load()
            return self._values

    def __getitem__(self, key: str) -> Any:
        return self._current()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._current()))

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return f"DynamicConfig({self._current()!r})"
