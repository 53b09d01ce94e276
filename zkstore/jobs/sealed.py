"""A job's definition opened with its code sealed: what any process may read of it.

A definition payload is a pickle of :class:`~zkstore.jobs.definition.JobDefinition`, and
unpickling runs whatever its writer put in it: a job's code, or anything a job's code wrote
there in its place (it may replace its own definition, signed with its own key). Only the job's
own driver, which holds nothing but that job's key, may run it (DESIGN.md invariant 14).

Everybody else (the command line, the leader firing a schedule, the member) reads the
definition *sealed*: the outer pickle is read by an unpickler that knows two names only,
``zkstore.jobs.definition.JobDefinition`` and ``ShippedFile``, and gives each a throw-away
class of its own, which builds nothing and calls nothing (a pickle that names any other global,
or calls one, is refused); the fields found are then checked and made into a real
:class:`JobDefinition` by its own constructor. The job's code stays the bytes it is (``code``,
unpickled only by :meth:`JobDefinition.load_function` in the driver), a script's source stays
text. So a forged definition can make this fail, never run.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from zkstore.errors import ConfigError, IncompatiblePayload
from zkstore.jobs.definition import JobDefinition, ShippedFile
from zkstore.payloads.serializers import PickleSerializer

__all__ = ["DefinitionSerializer", "open_sealed"]

_MODULE = "zkstore.jobs.definition"
_DEFINITION_FIELDS = frozenset(f.name for f in fields(JobDefinition))
_FILE_FIELDS = frozenset(f.name for f in fields(ShippedFile))


class _Unpickler(pickle.Unpickler):
    """Knows the definition's two classes, as stand-ins made for this one read: a pickle that
    changes a class's attributes changes a stand-in nobody else sees."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.stand_ins: dict[str, type] = {
            "JobDefinition": type("SealedDefinition", (), {}),
            "ShippedFile": type("SealedFile", (), {}),
        }

    def find_class(self, module: str, name: str) -> Any:
        if module == _MODULE and name in self.stand_ins:
            return self.stand_ins[name]
        raise pickle.UnpicklingError(f"a definition names no {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("a definition has no persistent references")


def open_sealed(body: bytes) -> JobDefinition:
    """The definition pickled in ``body`` (the payload after its version header), without
    running anything of it. Raises :class:`IncompatiblePayload` for anything else."""
    unpickler = _Unpickler(body)
    try:
        found = unpickler.load()
    # A hostile pickle can make the reader fail in many ways (a bad opcode, a stand-in called
    # with arguments, a truncated stream): each means "not a definition", and nothing ran.
    except Exception as exc:
        raise IncompatiblePayload(
            f"not a zkstore job definition: {type(exc).__name__}: {str(exc)[:200]}"
        ) from exc
    if type(found) is not unpickler.stand_ins["JobDefinition"]:
        held = "a file" if type(found) is unpickler.stand_ins["ShippedFile"] else type(found)
        raise IncompatiblePayload(
            f"not a zkstore job definition: the payload holds a "
            f"{held if isinstance(held, str) else held.__name__}"
        )
    return _definition(_state(found, _DEFINITION_FIELDS), unpickler.stand_ins["ShippedFile"])


def _state(found: object, allowed: frozenset[str]) -> dict[str, Any]:
    state = getattr(found, "__dict__", None)
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise IncompatiblePayload("a job definition without its fields")
    return {k: v for k, v in state.items() if k in allowed}  # a newer writer's extra: ignored


def _definition(values: dict[str, Any], file_type: type) -> JobDefinition:
    files = values.get("files", ())
    if not isinstance(files, tuple | list) or not all(type(f) is file_type for f in files):
        raise IncompatiblePayload("a job definition's files are not files")
    values["files"] = tuple(_file(_state(f, _FILE_FIELDS)) for f in files)
    for name in ("spark_conf", "require", "lifecycle"):
        if name in values and not _plain_mapping(values[name]):
            raise IncompatiblePayload(f"a job definition's {name} is not a plain mapping")
    if not isinstance(values.get("args", ()), tuple) or not all(
        _plain(arg) for arg in values.get("args", ())
    ):
        raise IncompatiblePayload("a job definition's arguments are not plain values")
    for name in ("code", "arguments"):
        if values.get(name) is not None and not isinstance(values[name], bytes):
            raise IncompatiblePayload(f"a job definition's {name} is not bytes")
    if not isinstance(values.get("typed_run", False), bool):
        raise IncompatiblePayload("a job definition's typed_run is not a boolean")
    texts = ("job_id", "name", "kind", "source", "filename", "function_name", "submitted")
    for name in (*texts, "args_shown", "python", "cloudpickle"):
        if values.get(name) is not None and not isinstance(values[name], str):
            raise IncompatiblePayload(f"a job definition's {name} is not text")
    try:
        return JobDefinition(**values)
    except (ConfigError, TypeError) as exc:
        raise IncompatiblePayload(f"not a valid job definition: {exc}") from None


def _file(values: dict[str, Any]) -> ShippedFile:
    try:
        return ShippedFile(**values)
    except (ConfigError, TypeError) as exc:
        raise IncompatiblePayload(f"a job definition's file is not valid: {exc}") from None


def _plain(value: Any) -> bool:
    """A value of a definition's own fields: JSON-like scalars, and lists and tuples of them
    (a script's arguments are strings; a function job's travel inside its code)."""
    if value is None or isinstance(value, str | int | float | bool | bytes):
        return True
    if isinstance(value, list | tuple):
        return all(_plain(item) for item in value)
    return _plain_mapping(value)


def _plain_mapping(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and type(value) is dict
        and all(isinstance(k, str) and _plain(v) for k, v in value.items())
    )


class DefinitionSerializer(PickleSerializer[JobDefinition]):
    """Definitions written as they always were (cloudpickle, with the version header: every
    release reads them), read sealed (:func:`open_sealed`): no process runs a job's code by
    reading its definition; the driver runs it, by :meth:`JobDefinition.load_function`."""

    def loads(self, data: bytes) -> JobDefinition:
        self.check(data)
        return open_sealed(self.body(data))
