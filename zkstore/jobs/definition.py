"""Job definitions: what to run, how, what it needs, and who wrote it.

A definition is either an unmodified PySpark script (its source, run as ``__main__``) or a
function with its arguments, called as ``function(ctx, *args)``. It also carries the bytes of the
files the job needs (its local modules, ``--py-files``, ``--files``, ``--jars``), so that any
host can run it. The whole definition is one payload, verified (size, sha256, HMAC) before it is
unpickled; the handle carries a small summary (name, kind, entry, submitted, max_attempts,
python, files) so that listing jobs never reads or unpickles a payload.

A function job's function and arguments are cloudpickled on their own inside the definition:
they may refer to the job's shipped modules, so the driver unpickles them only after it has put
those modules on its path (:meth:`JobDefinition.load_function`). They come from the same verified
payload. From fleet protocol 2 on the function (``code``) and its arguments (``arguments``) are
two pickles, so that new code can take a job's arguments over without anybody but the driver
unpickling them (``zkstore jobs resume --definition``); before, ``code`` held both.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, Unpack

import cloudpickle

from zkstore.config import validate_id
from zkstore.errors import ConfigError, IncompatiblePayload, SerializationError
from zkstore.jobs.runoptions import LifecycleOptions
from zkstore.jobs.runspec import RunOptions, RunSpec
from zkstore.jobs.shown import args_text, conf_text, zipped_modules
from zkstore.layout import validate_job_id
from zkstore.payloads.serializers import python_version
from zkstore.records.fleet_records import LABEL
from zkstore.records.handle import SummaryValue
from zkstore.records.strict import utc_now

__all__ = [
    "DEFAULT_MAX_LOST_ATTEMPTS",
    "FILE_ROLES",
    "FUNCTION",
    "MAX_ATTEMPTS_LIMIT",
    "MAX_ENTRY_BYTES",
    "MAX_NAME_CHARS",
    "MAX_REQUIRE_CHARS",
    "MAX_SUMMARY_FILES_CHARS",
    "ORIGIN",
    "SCRIPT",
    "FileRole",
    "JobDefinition",
    "JobKind",
    "JobOptions",
    "ShippedFile",
    "origin",
]

JobKind = Literal["script", "function"]
FileRole = Literal["modules", "py-file", "file", "jar"]

SCRIPT: JobKind = "script"
FUNCTION: JobKind = "function"
#: The zip of the job's own modules (found beside its file), then spark-submit's three options.
FILE_ROLES: tuple[FileRole, ...] = ("modules", "py-file", "file", "jar")
MAX_NAME_CHARS = 100
#: The ``entry`` shown in listings (``file.py:function``) is cut to this many UTF-8 bytes, so
#: that a handle fits whatever the file is called.
MAX_ENTRY_BYTES = 120
MAX_ATTEMPTS_LIMIT = 1000
#: Attempts lost to the infrastructure (a host or session lost, the driver killed) before the job
#: is given up as FAILED; they do not count against ``max_attempts``, the job's own failures.
DEFAULT_MAX_LOST_ATTEMPTS = 10
MAX_SUMMARY_FILES_CHARS = 100
#: ``require`` travels in the summary (the leader places without reading payloads)
MAX_REQUIRE_CHARS = 120
#: The summary key of where the job's code came from: the file given at submit (or at
#: ``jobs resume --definition``), resolved, with its function; each attempt's history names it.
ORIGIN = "origin"
#: An origin is cut to its last this many characters (the file's name is at the end).
MAX_ORIGIN_CHARS = 200


@dataclass(frozen=True)
class ShippedFile:
    """One file a job needs, by value: ``name`` is its file name in the attempt's directory."""

    name: str
    role: FileRole
    data: bytes = field(repr=False)

    def __post_init__(self) -> None:
        try:
            validate_id(self.name, "shipped file name")
        except ConfigError as exc:
            raise ConfigError(f"{exc} (rename the file to ship it)") from None
        if self.role not in FILE_ROLES:
            raise ConfigError(f"unknown role {self.role!r} of shipped file {self.name}")
        if not isinstance(self.data, bytes):
            raise ConfigError(f"shipped file {self.name} must be bytes")

    @property
    def on_python_path(self) -> bool:
        """True for what Python imports from: the job's modules and ``--py-files``."""
        return self.role in ("modules", "py-file")


class JobOptions(RunOptions, total=False):
    """How a job runs, whatever it runs: the keywords :meth:`JobDefinition.for_script` and
    :meth:`JobDefinition.for_function` share (defaults: the definition's own): the
    submitter's :class:`~zkstore.jobs.runoptions.RunOptions`, and what the client adds."""

    spark_conf: Mapping[str, str] | None
    files: Sequence[ShippedFile]
    typed_run: bool


@dataclass(frozen=True)
class JobDefinition:
    """Everything a driver needs to run a job, and nothing it has to look up elsewhere."""

    job_id: str
    name: str
    kind: JobKind
    args: tuple[Any, ...] = ()
    source: str | None = None
    filename: str | None = None
    code: bytes | None = field(default=None, repr=False)
    function_name: str | None = None
    #: a function job's arguments, pickled apart from its function (fleet protocol 2); None:
    #: ``code`` holds both, as ``(function, args)``
    arguments: bytes | None = field(default=None, repr=False)
    files: tuple[ShippedFile, ...] = ()
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    max_attempts: int = 3
    max_lost_attempts: int = DEFAULT_MAX_LOST_ATTEMPTS
    #: labels a daemon must have to run the job (``zkstore submit --require key=value``)
    require: Mapping[str, str] = field(default_factory=dict)
    #: the lifecycle options' summary keys (``--timeout``, ``--retry-*``, ``--notify``...: see
    #: :mod:`zkstore.lifecycle.options`), carried in the handle for the leader
    lifecycle: Mapping[str, SummaryValue] = field(default_factory=dict)
    submitted: str = field(default_factory=utc_now)
    #: a function job's arguments for people (they travel pickled with the function): what
    #: ``jobs show`` says, computed at submission
    args_shown: str | None = None
    python: str = field(default_factory=python_version)
    cloudpickle: str = cloudpickle.__version__
    #: the handle's summary carries the run options as one typed field (:mod:`zkstore.jobs.
    #: runspec`, fleet protocol 4); False: as display texts (``require``, ``conf``), as before
    typed_run: bool = False
    #: the pool the job runs in (``--pool``; fleet protocol 4: kept in ``run`` only)
    pool: str | None = None

    def __post_init__(self) -> None:
        validate_job_id(self.job_id)
        if not isinstance(self.name, str) or not 0 < len(self.name) <= MAX_NAME_CHARS:
            raise ConfigError(f"job name must be 1-{MAX_NAME_CHARS} characters")
        if not self.name.isprintable():
            raise ConfigError("job name must be printable")
        self._check_kind()
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
        for key, value in self.require.items():
            if not LABEL.fullmatch(key) or not LABEL.fullmatch(value):
                raise ConfigError(
                    f"requirement {key!r}={value!r} is not key=value (1-63 characters of "
                    "[A-Za-z0-9._/-] each)"
                )
        if len(_labels(self.require)) > MAX_REQUIRE_CHARS:
            raise ConfigError(f"the requirements take more than {MAX_REQUIRE_CHARS} characters")
        _check_unique([f.name for f in self.files])
        if self.pool is not None and not self.typed_run:
            raise ConfigError("--pool needs the run options typed (fleet protocol 4)")
        try:
            RunSpec.of({}, {}, self.pool, lifecycle=self.lifecycle)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def _check_kind(self) -> None:
        if self.kind == SCRIPT:
            if not isinstance(self.source, str) or self.code is not None:
                raise ConfigError("a script job needs its source and no function")
            if self.arguments is not None:
                raise ConfigError("a script job's arguments are text, in args")
        elif self.kind == FUNCTION:
            if not isinstance(self.code, bytes) or self.source is not None:
                raise ConfigError("a function job needs its pickled function and no source")
            if self.arguments is not None and not isinstance(self.arguments, bytes):
                raise ConfigError("a function job's arguments are pickled bytes")
        else:
            raise ConfigError(f"unknown job kind {self.kind!r}")

    @classmethod
    def for_script(
        cls,
        job_id: str,
        source: str,
        *,
        filename: str,
        args: Sequence[str] = (),
        name: str | None = None,
        **options: Unpack[JobOptions],
    ) -> JobDefinition:
        """An unmodified PySpark script, run as ``__main__`` with ``sys.argv[1:] = args``."""
        return cls(
            job_id=job_id,
            name=name if name is not None else job_id,
            kind=SCRIPT,
            args=tuple(args),
            source=source,
            filename=filename,
            **_run_fields(options),
        )

    @classmethod
    def for_function(
        cls,
        job_id: str,
        function: Callable[..., Any],
        *,
        args: Sequence[Any] = (),
        name: str | None = None,
        apart: bool = True,
        kept: JobDefinition | None = None,
        **options: Unpack[JobOptions],
    ) -> JobDefinition:
        """``function(ctx, *args)``; both are cloudpickled now (:class:`SerializationError` if
        they cannot be), by value for code that cloudpickle was told to ship by value. With
        ``apart`` (fleet protocol 2) the arguments are a pickle of their own; without, one
        pickle holds both, as every release reads. ``kept``: the job whose arguments (pickled
        apart) the new code takes over, never unpickled here; ``args`` are then ignored."""
        function_name = str(getattr(function, "__name__", "function"))
        arguments: bytes | None = None
        try:
            if kept is not None:
                if kept.arguments is None:
                    raise ConfigError(
                        f"job {kept.job_id}'s arguments travel inside its old code (it was "
                        "submitted before fleet protocol 2), which only its driver unpickles: "
                        "give them again after --"
                    )
                code = cloudpickle.dumps(function, protocol=pickle.DEFAULT_PROTOCOL)
                arguments, args_shown = kept.arguments, kept.args_shown
            elif apart:
                code = cloudpickle.dumps(function, protocol=pickle.DEFAULT_PROTOCOL)
                arguments = cloudpickle.dumps(tuple(args), protocol=pickle.DEFAULT_PROTOCOL)
                args_shown = args_text(args, script=False)
            else:
                code = cloudpickle.dumps((function, tuple(args)), protocol=pickle.DEFAULT_PROTOCOL)
                args_shown = args_text(args, script=False)
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:
            raise SerializationError(f"cannot serialize function {function_name}: {exc}") from exc
        return cls(
            job_id=job_id,
            name=name if name is not None else function_name,
            kind=FUNCTION,
            code=code,
            arguments=arguments,
            function_name=function_name,
            filename=getattr(getattr(function, "__code__", None), "co_filename", None),
            args_shown=args_shown,
            **_run_fields(options),
        )

    def load_function(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """The function and its arguments, unpickled. Call it once the job's modules are
        importable; raises :class:`IncompatiblePayload` if they cannot be loaded here."""
        if self.kind != FUNCTION:
            raise ConfigError(f"job {self.job_id} is a {self.kind}, not a function")
        if not isinstance(self.code, bytes):
            raise IncompatiblePayload(
                f"job {self.job_id} has no pickled code: written by an older zkstore; resubmit it"
            )
        try:
            if self.arguments is None:
                function, args = pickle.loads(self.code)
            else:
                function, args = pickle.loads(self.code), pickle.loads(self.arguments)
        # Unpickling imports the modules the function refers to: any error means "this
        # environment cannot load it" (a module neither shipped nor installed, most often).
        except Exception as exc:
            raise IncompatiblePayload(
                f"cannot load function {self.function_name} of job {self.job_id}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not callable(function) or not isinstance(args, tuple):
            raise IncompatiblePayload(f"job {self.job_id}: its code is not a function call")
        return function, args

    @property
    def entry_point(self) -> str:
        """What runs, for people: ``file.py`` or ``file.py:function``."""
        base = (self.filename or "?").rsplit("/", 1)[-1]
        if self.kind == FUNCTION:
            return f"{base}:{self.function_name or '?'}"
        return base

    def summary(self) -> dict[str, SummaryValue]:
        """What listing shows, stored in the handle beside the payload reference."""
        typed = getattr(self, "typed_run", False)  # unpickled from before the field: False
        summary: dict[str, SummaryValue] = {
            "name": self.name[:MAX_NAME_CHARS],
            "kind": self.kind,
            "entry": _clip(self.entry_point, MAX_ENTRY_BYTES),
            "submitted": self.submitted,
            "max_attempts": self.max_attempts,
            "max_lost": self.max_lost_attempts,
            **({"require": _labels(self.require)} if self.require and not typed else {}),
            "python": self.python,
        }
        if self.files:
            names = ",".join(f.name for f in self.files)
            if len(names) > MAX_SUMMARY_FILES_CHARS:
                names = names[: MAX_SUMMARY_FILES_CHARS - 3] + "..."
            summary["files"] = names
        shown = {
            "args": self.args_shown if self.kind == FUNCTION else args_text(self.args, script=True),
            "conf": None if typed else conf_text(self.spark_conf),
            "modules": next(
                (zipped_modules(f.data) for f in self.files if f.role == "modules"), None
            ),
        }
        summary.update({k: v for k, v in shown.items() if v is not None})
        summary.update(self.run.summary_fields(typed=typed))
        return summary

    @property
    def run(self) -> RunSpec:
        """The run options the handle keeps (:mod:`zkstore.jobs.runspec`)."""
        lifecycle = dict(getattr(self, "lifecycle", None) or {})  # unpickled from before it
        try:
            return RunSpec.of(
                self.spark_conf, self.require, getattr(self, "pool", None), lifecycle=lifecycle
            )
        except ValueError:
            # a definition pickled by an older release that wrote a value it reads tolerantly
            return RunSpec.of(
                self.spark_conf,
                self.require,
                getattr(self, "pool", None),
                lifecycle=LifecycleOptions.from_flat(lifecycle).given(),
            )

    def run_options(self) -> RunOptions:
        """The submitter's run options of this definition (a redefinition keeps them)."""
        return RunOptions(
            max_attempts=self.max_attempts,
            max_lost_attempts=self.max_lost_attempts,
            require=dict(self.require),
            pool=getattr(self, "pool", None),
            lifecycle=dict(getattr(self, "lifecycle", None) or {}),
        )


class _RunFields(TypedDict):
    files: tuple[ShippedFile, ...]
    spark_conf: dict[str, str]
    max_attempts: int
    max_lost_attempts: int
    require: dict[str, str]
    lifecycle: dict[str, SummaryValue]
    typed_run: bool
    pool: str | None


def _run_fields(options: JobOptions) -> _RunFields:
    """The definition's fields of ``options``, with the definition's defaults."""
    return _RunFields(
        files=tuple(options.get("files", ())),
        spark_conf=dict(options.get("spark_conf") or {}),
        max_attempts=options.get("max_attempts", 3),
        max_lost_attempts=options.get("max_lost_attempts", DEFAULT_MAX_LOST_ATTEMPTS),
        require=dict(options.get("require") or {}),
        lifecycle=dict(options.get("lifecycle") or {}),
        typed_run=options.get("typed_run", False),
        pool=options.get("pool"),
    )


def _check_unique(names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigError(
                f"two shipped files are named {name!r}: every file lands in the job's working "
                "directory under its own name"
            )
        seen.add(name)


def origin(path: str, function: str | None = None) -> str:
    """The :data:`ORIGIN` of code loaded from ``path`` (resolved by the caller), with its
    function: ``/home/ann/etl/v2/orders.py:run``; a long path keeps its end."""
    text = f"{path}:{function}" if function else path
    if len(text) > MAX_ORIGIN_CHARS:
        text = "..." + text[-(MAX_ORIGIN_CHARS - 3) :]
    return text


def _clip(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` of UTF-8, at a character boundary."""
    return text.encode()[:max_bytes].decode(errors="ignore")


def _labels(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
