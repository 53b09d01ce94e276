"""Job definitions: what to run, how, and who wrote it.

A definition is either an unmodified PySpark script (its source, run as ``__main__``) or a
function serialized with cloudpickle, called as ``function(ctx, *args)``. The whole definition is
one payload; the handle carries a small summary (name, kind, submitted, max_attempts, python) so
that listing jobs never reads or unpickles a payload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import cloudpickle

from zkstore.errors import ConfigError
from zkstore.handle import SummaryValue
from zkstore.layout import validate_job_id
from zkstore.serializers import python_version
from zkstore.strict import utc_now

JobKind = Literal["script", "function"]

SCRIPT: JobKind = "script"
FUNCTION: JobKind = "function"
MAX_NAME_CHARS = 100
#: The ``entry`` shown in listings (``file.py:function``) is cut to this many UTF-8 bytes, so
#: that a handle fits whatever the file is called.
MAX_ENTRY_BYTES = 120
MAX_ATTEMPTS_LIMIT = 1000
#: Attempts lost to the infrastructure (a host or session lost, the driver killed) before the job
#: is given up as FAILED; they do not count against ``max_attempts``, the job's own failures.
DEFAULT_MAX_LOST_ATTEMPTS = 10


@dataclass(frozen=True)
class JobDefinition:
    """Everything a driver needs to run a job, and nothing it has to look up elsewhere."""

    job_id: str
    name: str
    kind: JobKind
    args: tuple[Any, ...] = ()
    source: str | None = None
    filename: str | None = None
    function: Callable[..., Any] | None = None
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    max_attempts: int = 3
    max_lost_attempts: int = DEFAULT_MAX_LOST_ATTEMPTS
    submitted: str = field(default_factory=utc_now)
    python: str = field(default_factory=python_version)
    cloudpickle: str = cloudpickle.__version__

    def __post_init__(self) -> None:
        validate_job_id(self.job_id)
        if not isinstance(self.name, str) or not 0 < len(self.name) <= MAX_NAME_CHARS:
            raise ConfigError(f"job name must be 1-{MAX_NAME_CHARS} characters")
        if not self.name.isprintable():
            raise ConfigError("job name must be printable")
        if self.kind == SCRIPT:
            if not isinstance(self.source, str) or self.function is not None:
                raise ConfigError("a script job needs its source and no function")
        elif self.kind == FUNCTION:
            if not callable(self.function) or self.source is not None:
                raise ConfigError("a function job needs a callable and no source")
        else:
            raise ConfigError(f"unknown job kind {self.kind!r}")
        if (
            not isinstance(self.max_attempts, int)
            or not 1 <= self.max_attempts <= MAX_ATTEMPTS_LIMIT
        ):
            raise ConfigError(f"max attempts must be between 1 and {MAX_ATTEMPTS_LIMIT}")
        if (
            not isinstance(self.max_lost_attempts, int)
            or not 1 <= self.max_lost_attempts <= MAX_ATTEMPTS_LIMIT
        ):
            raise ConfigError(f"max lost attempts must be between 1 and {MAX_ATTEMPTS_LIMIT}")
        for key, value in self.spark_conf.items():
            if not isinstance(key, str) or not isinstance(value, str) or not key:
                raise ConfigError(f"Spark configuration must map strings to strings: {key!r}")

    @classmethod
    def for_script(
        cls,
        job_id: str,
        source: str,
        *,
        filename: str,
        args: Sequence[str] = (),
        name: str | None = None,
        spark_conf: Mapping[str, str] | None = None,
        max_attempts: int = 3,
    ) -> JobDefinition:
        """An unmodified PySpark script, run as ``__main__`` with ``sys.argv[1:] = args``."""
        return cls(
            job_id=job_id,
            name=name or job_id,
            kind=SCRIPT,
            args=tuple(args),
            source=source,
            filename=filename,
            spark_conf=dict(spark_conf or {}),
            max_attempts=max_attempts,
        )

    @classmethod
    def for_function(
        cls,
        job_id: str,
        function: Callable[..., Any],
        *,
        args: Sequence[Any] = (),
        name: str | None = None,
        spark_conf: Mapping[str, str] | None = None,
        max_attempts: int = 3,
    ) -> JobDefinition:
        """A function called as ``function(ctx, *args)``; it travels by value with cloudpickle."""
        return cls(
            job_id=job_id,
            name=name or str(getattr(function, "__name__", job_id)),
            kind=FUNCTION,
            args=tuple(args),
            function=function,
            filename=getattr(getattr(function, "__code__", None), "co_filename", None),
            spark_conf=dict(spark_conf or {}),
            max_attempts=max_attempts,
        )

    @property
    def entry_point(self) -> str:
        """What runs, for people: ``file.py`` or ``file.py:function``."""
        base = (self.filename or "?").rsplit("/", 1)[-1]
        if self.kind == FUNCTION:
            return f"{base}:{getattr(self.function, '__name__', '?')}"
        return base

    def summary(self) -> dict[str, SummaryValue]:
        """What listing shows, stored in the handle beside the payload reference."""
        return {
            "job_id": self.job_id,
            "name": self.name[:MAX_NAME_CHARS],
            "kind": self.kind,
            "entry": _clip(self.entry_point, MAX_ENTRY_BYTES),
            "submitted": self.submitted,
            "max_attempts": self.max_attempts,
            "max_lost": self.max_lost_attempts,
            "python": self.python,
        }


def _clip(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` of UTF-8, at a character boundary."""
    return text.encode()[:max_bytes].decode(errors="ignore")
