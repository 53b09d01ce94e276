"""Serializers turn states into payload bytes and back: cloudpickle for code, JSON for data.

A pickled payload starts with a small JSON header naming the Python minor version and the
cloudpickle version that wrote it, so that a payload from another Python is refused with a clear
error before any unpickling. Unpickling only ever happens after storage verified the payload.
"""

from __future__ import annotations

import json
import pickle
import sys
from typing import Any, Generic, Protocol, TypeVar

import cloudpickle

from zkstore.errors import (
    CorruptPayload,
    ForeignPython,
    IncompatiblePayload,
    SerializationError,
)

__all__ = ["PICKLE_MAGIC", "JsonSerializer", "PickleSerializer", "Serializer", "python_version"]

T = TypeVar("T")

PICKLE_MAGIC = b"ZKSTORE-PICKLE\n"


def python_version() -> str:
    """This interpreter's ``major.minor``, the unit of pickle compatibility."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


class Serializer(Protocol[T]):
    """Turns a state into bytes and back. ``loads`` runs only on verified payloads."""

    suffix: str

    def dumps(self, state: T) -> bytes: ...

    def loads(self, data: bytes) -> T: ...

    def check(self, data: bytes) -> None:
        """Raise if ``data`` could not be loaded here, without running any of it."""
        ...


class PickleSerializer(Generic[T]):
    """cloudpickle with a version header; code defined in ``__main__`` or files travels by value."""

    suffix = ".pkl"

    def dumps(self, state: T) -> bytes:
        header = json.dumps(
            {"python": python_version(), "cloudpickle": cloudpickle.__version__}
        ).encode()
        try:
            body: bytes = cloudpickle.dumps(state, protocol=pickle.DEFAULT_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:
            raise SerializationError(f"cannot serialize {type(state).__name__}: {exc}") from exc
        return PICKLE_MAGIC + header + b"\n" + body

    @staticmethod
    def header(data: bytes) -> dict[str, Any]:
        """The writer's versions, read without unpickling; raises if the payload has none."""
        if not data.startswith(PICKLE_MAGIC):
            raise IncompatiblePayload("payload is not a zkstore pickle (no header)")
        line, sep, _ = data[len(PICKLE_MAGIC) :].partition(b"\n")
        try:
            header = json.loads(line) if sep else None
        except ValueError:
            header = None
        if not isinstance(header, dict) or not isinstance(header.get("python"), str):
            raise IncompatiblePayload("payload has an unreadable zkstore pickle header")
        return header

    def check(self, data: bytes) -> None:
        header = self.header(data)
        if header["python"] != python_version():
            raise ForeignPython(
                f"payload was written by Python {header['python']} "
                f"(cloudpickle {header.get('cloudpickle', '?')}); this is Python "
                f"{python_version()}: run it with Python {header['python']} or resubmit it"
            )

    @staticmethod
    def body(data: bytes) -> bytes:
        """The pickle after the header (call :meth:`check` first)."""
        return data[len(PICKLE_MAGIC) + data[len(PICKLE_MAGIC) :].index(b"\n") + 1 :]

    def loads(self, data: bytes) -> T:
        self.check(data)
        body = self.body(data)
        try:
            state: T = pickle.loads(body)
        # Unpickling runs code from the payload's writer (verified first), so any exception can
        # come out of it; all of them mean "this environment cannot load it".
        except Exception as exc:
            raise IncompatiblePayload(
                f"cannot unpickle payload: {type(exc).__name__}: {exc}"
            ) from exc
        return state


class JsonSerializer:
    """JSON, for data such as checkpoint metadata: never executes anything on load."""

    suffix = ".json"

    def dumps(self, state: Any) -> bytes:
        try:
            return json.dumps(state, separators=(",", ":"), sort_keys=True).encode()
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"not JSON-serializable: {exc}") from exc

    def check(self, data: bytes) -> None:
        self.loads(data)

    def loads(self, data: bytes) -> Any:
        try:
            return json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise CorruptPayload(f"payload is not UTF-8 JSON: {exc}") from exc
