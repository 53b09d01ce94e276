"""A mixin for objects that hold a session or a connection: ``with obj:`` closes it."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["Closeable"]


class Closeable:
    """``with obj:`` returns ``obj`` and calls ``obj.close()`` on the way out, whatever happens."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
