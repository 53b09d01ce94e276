"""A job's run options as the leader and the daemons decide by them: one typed, frozen value.

:class:`RunSpec` holds what a job's handle says of how it runs and that somebody decides by:
the labels a daemon must have (``--require``, read at every placement), the job's Spark
settings (``--conf``, read by a daemon to decide whether its attempt may take a warm driver
JVM), its pool (``--pool``), its lifecycle options (``--timeout``, the ``--retry-*`` pacing,
``--notify``: :class:`~zkstore.jobs.runoptions.LifecycleOptions`, read by the leader at each
decision) and its dependencies (``--after``, read by the leader before it places the job). It
is parsed once, at the boundary (:meth:`RunSpec.from_summary`, cached on the job's snapshot);
what people read (``jobs show``'s ``conf``, ``require``, limits, retry options and redacted
URL) is derived from it (:meth:`RunSpec.conf_shown`, :func:`~zkstore.jobs.shown.
run_options_shown`) and never read back.

In the handle (fleet protocol 4, :data:`zkstore.protocol.RUN_SPEC`) it is one summary field,
``run``: compact JSON text (a handle's summary holds scalars, which every release reads)::

    {"require": {"zone": "a"},
     "spark": {"spark.master": "local[2]",            # a value kept in clear
               "spark.ssl.password": null,            # a secret: never kept
               "spark.driver.extraJavaOptions":       # longer than MAX_VALUE_BYTES: its start
                   {"start": "-XX:+UseG1GC -Dx", "sha256": "<32 hex>"}},   # and its digest
     "more": 2,                                       # settings left out (past the budget)
     "pool": "etl",                                   # --pool (none: the default pool)
     "lifecycle": {"timeout": 3600.0, "notify": "https://hooks.example.com/x"},
     "after": {"extract-1": "SUCCEEDED"}}             # --after JOB:STATE

The JVM-level settings and ``spark.master`` (what the warm-driver decision reads) are kept
first, whatever their length (a long value as its digest, which compares exactly); the others
while the field stays under :data:`MAX_RUN_BYTES`. Before protocol 4 the handle carried the
same options as display text (``require``: ``k=v,k=v``; ``conf``: :func:`~zkstore.jobs.shown.
conf_text`, cut, redacted; the lifecycle options and ``after`` as flat keys):
:meth:`RunSpec.from_summary` reads that older form into the same value (a cut value is known
by its start only).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from zkstore.errors import ConfigError
from zkstore.jobs.dependencies import AFTER, Dependency, parse_summary
from zkstore.jobs.runoptions import LifecycleOptions
from zkstore.jobs.shown import ELLIPSIS, MAX_CONF_BYTES, REDACT, REDACTED, cut, read_conf_text
from zkstore.records.fleet_records import LABEL
from zkstore.records.handle import RUN_FIELD, SummaryValue

__all__ = [
    "DECIDING_KEYS",
    "DEFAULT_POOL",
    "MAX_RUN_BYTES",
    "MAX_VALUE_BYTES",
    "POOL_NAME",
    "RUN",
    "RunOptions",
    "RunSpec",
    "SparkSetting",
    "digest",
]

#: The pool of a job submitted without ``--pool`` (no limit unless one is set for it).
DEFAULT_POOL = "default"
#: What a pool may be called.
POOL_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
#: The summary field that holds the run options (fleet protocol 4; a handle that has it is
#: of format :data:`~zkstore.records.handle.RUN_FORMAT`, which a reader of an older protocol
#: refuses).
RUN = RUN_FIELD
#: A Spark value longer than this (UTF-8) is kept as its start and its digest.
MAX_VALUE_BYTES = 64
#: How much of a long value's start is kept (for people).
START_BYTES = 24
#: The ``run`` field's size (its JSON text, escaped as the handle stores it) past which the
#: settings nobody decides by are left out.
MAX_RUN_BYTES = 560
#: The settings fixed when a driver JVM starts, and ``spark.master``: what decides whether an
#: attempt may take a warm driver (kept in full, first). See recovery.shared.jvm_settings.JVM_LEVEL.
DECIDING_KEYS = frozenset(
    {
        "spark.master",
        "spark.driver.memory",
        "spark.driver.extraClassPath",
        "spark.driver.defaultJavaOptions",
        "spark.driver.extraJavaOptions",
        "spark.driver.extraLibraryPath",
        "spark.driver.userClassPathFirst",
        "spark.jars",
        "spark.jars.packages",
        "spark.jars.excludes",
        "spark.jars.repositories",
        "spark.jars.ivy",
        "spark.jars.ivySettings",
        "spark.submit.deployMode",
        "spark.kerberos.principal",
        "spark.kerberos.keytab",
    }
)
_HEX32 = frozenset("0123456789abcdef")


def digest(value: str) -> str:
    """What a long Spark value is kept as: the sha256 of its trimmed text, 32 hex digits."""
    return hashlib.sha256(value.strip().encode()).hexdigest()[:32]


class RunOptions(TypedDict, total=False):
    """What a submitter chooses about how a job runs, beside its code and its files: the
    keywords that ``recovery.Client.submit_function``, ``submit_script``, ``submit_file`` and
    ``definition_for_file`` pass on unchanged to the definition (a new option is a key here, a
    field of :class:`RunSpec` here, and a field of :class:`~zkstore.jobs.definition.
    JobDefinition`)."""

    max_attempts: int
    max_lost_attempts: int
    #: labels a daemon must have (``--require``)
    require: Mapping[str, str] | None
    #: the pool the job runs in (``--pool``); None: ``default``
    pool: str | None
    #: the lifecycle options' summary keys (:data:`~zkstore.jobs.runoptions.LIFECYCLE_KEYS`)
    lifecycle: Mapping[str, SummaryValue]


@dataclass(frozen=True)
class SparkSetting:
    """One Spark setting of a job, as far as the handle knows its value: in clear (``value``),
    by its start and digest (a long one), by its start only (an older handle's cut text), or
    not at all (``secret``: a key Spark redacts, whose value is never stored in the handle)."""

    key: str
    value: str | None = None
    start: str | None = None
    sha256: str | None = None
    secret: bool = False

    @classmethod
    def of(cls, key: str, value: str) -> SparkSetting:
        if REDACT.search(key):
            return cls(key, secret=True)
        if len(value.encode()) <= MAX_VALUE_BYTES:
            return cls(key, value)
        start = value.encode()[:START_BYTES].decode(errors="ignore")
        return cls(key, start=start, sha256=digest(value))

    def differs(self, other: str) -> bool | None:
        """Whether this setting's value differs from ``other`` (both trimmed, as Spark trims
        them); None if the handle does not know (a secret, or a start that ``other`` begins
        with)."""
        if self.value is not None:
            return self.value.strip() != other.strip()
        if self.sha256 is not None:
            return self.sha256 != digest(other)
        if self.start is not None:
            return not other.strip().startswith(self.start.lstrip()) or None
        return None

    def shown(self) -> str:
        """The value for people: secrets redacted, a long value's start and an ellipsis."""
        if self.secret:
            return REDACTED
        if self.value is not None:
            return self.value
        return f"{self.start or ''}{ELLIPSIS}"

    def to_json(self) -> Any:
        if self.value is not None:
            return self.value
        if self.secret:
            return None
        return {"start": self.start or "", "sha256": self.sha256}


@dataclass(frozen=True)
class RunSpec:
    """How a job runs, as its handle says: required labels, Spark settings (sorted by key)."""

    require: tuple[tuple[str, str], ...] = ()
    spark: tuple[SparkSetting, ...] = ()
    #: Spark settings left out of the handle (past :data:`MAX_RUN_BYTES`); an older handle's
    #: cut text counts 1 for "some"
    more: int = 0
    #: the pool the job runs in (``--pool``, fleet protocol 4 feature ``pools``); None: the
    #: ``default`` pool
    pool: str | None = None
    #: the lifecycle options the job gave (``--timeout``, ``--retry-*``, ``--notify``)
    lifecycle: LifecycleOptions = field(default_factory=LifecycleOptions)
    #: the jobs it runs after (``--after JOB:STATE``), in the order given
    after: tuple[Dependency, ...] = ()

    @classmethod
    def of(
        cls,
        spark_conf: Mapping[str, str],
        require: Mapping[str, str],
        pool: str | None = None,
        *,
        lifecycle: Mapping[str, Any] | None = None,
        after: tuple[Dependency, ...] = (),
    ) -> RunSpec:
        """A submission's options, as its handle keeps them (see the module); ValueError for
        one that is not valid."""
        first = sorted(k for k in spark_conf if k in DECIDING_KEYS)
        rest = sorted(k for k in spark_conf if k not in DECIDING_KEYS)
        settings = tuple(SparkSetting.of(k, spark_conf[k]) for k in first)
        base = cls(
            _labels(require),
            settings,
            len(rest),
            _pool(pool),
            LifecycleOptions.of(lifecycle or {}),
            tuple(after),
        )
        spec, extra = base, base.stored_bytes() - _bare(base)
        for index, key in enumerate(rest):
            wider = replace(
                spec,
                spark=(*spec.spark, SparkSetting.of(key, spark_conf[key])),
                more=len(rest) - index - 1,
            )
            if wider.stored_bytes() - extra > MAX_RUN_BYTES:
                break
            spec = wider
        return replace(spec, spark=_sorted(spec.spark))

    def with_after(self, after: tuple[Dependency, ...]) -> RunSpec:
        """These options, run after ``after`` (a submission's ``--after``, a schedule's run that
        replaces the one before)."""
        return replace(self, after=tuple(d for d in after if d.schedule is None))

    # -- the handle ----------------------------------------------------------------------------

    def to_json(self) -> str:
        record: dict[str, Any] = {}
        if self.require:
            record["require"] = dict(self.require)
        if self.spark:
            record["spark"] = {s.key: s.to_json() for s in self.spark}
        if self.more:
            record["more"] = self.more
        if self.pool is not None:
            record["pool"] = self.pool
        if self.lifecycle.given():
            record["lifecycle"] = self.lifecycle.given()
        if self.after:
            record["after"] = {d.job_id: d.state for d in self.after}
        return json.dumps(record, separators=(",", ":"), sort_keys=True, ensure_ascii=False)

    def stored_bytes(self) -> int:
        """The ``run`` field's size in the handle (its text, escaped)."""
        return len(json.dumps(self.to_json(), ensure_ascii=False).encode())

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        """The ``run`` field read back; raises ValueError for anything :meth:`to_json` would
        not have written."""
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("run options are not a JSON object")
        require = raw.get("require", {})
        if not isinstance(require, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in require.items()
        ):
            raise ValueError("'require' is not a map of text")
        spark = raw.get("spark", {})
        if not isinstance(spark, dict):
            raise ValueError("'spark' is not an object")
        more = raw.get("more", 0)
        if type(more) is not int or more < 0:
            raise ValueError("'more' is not a count")
        pool = raw.get("pool")
        if pool is not None and not isinstance(pool, str):
            raise ValueError("'pool' is not text")
        settings = tuple(_setting(k, v) for k, v in spark.items())
        lifecycle = LifecycleOptions.from_json(raw.get("lifecycle", {}))
        after = raw.get("after", {})
        if not isinstance(after, dict):
            raise ValueError("'after' is not an object")
        return cls(_labels(require), _sorted(settings), more, _pool(pool), lifecycle, _after(after))

    def summary_fields(self, *, typed: bool = True) -> dict[str, SummaryValue]:
        """The handle's summary fields of these options: the ``run`` field (fleet protocol 4),
        or with ``typed`` False, as protocol 3 kept the ones it had in the handle: the
        lifecycle options and ``after`` flat (``require`` and ``conf``, display texts, are the
        definition's to write)."""
        if not typed:
            flat: dict[str, SummaryValue] = dict(self.lifecycle.given())
            if self.after:
                flat[AFTER] = ",".join(str(d) for d in self.after)
            return flat
        wanted = (
            self.require
            or self.spark
            or self.more
            or self.pool is not None
            or self.lifecycle.given()
            or self.after
        )
        return {RUN: self.to_json()} if wanted else {}

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> RunSpec:
        """The run options a handle's summary carries: its ``run`` field, else (a handle
        written before fleet protocol 4) its ``require`` and ``conf`` texts. Raises ValueError
        for a field that is garbled."""
        run = summary.get(RUN)
        if run is not None:
            if not isinstance(run, str):
                raise ValueError("'run' is not text")
            return cls.from_json(run)
        require: dict[str, str] = {}
        labels = summary.get("require")
        for pair in labels.split(",") if isinstance(labels, str) and labels else ():
            key, sep, value = pair.partition("=")
            if not sep:
                raise ValueError(f"requirement {pair[:80]!r} is not key=value")
            require[key] = value
        conf = summary.get("conf")
        settings: list[SparkSetting] = []
        more = 0
        if isinstance(conf, str) and conf:
            pairs, cut_key = read_conf_text(conf)
            for key, value in pairs.items():
                if value == REDACTED:
                    settings.append(SparkSetting(key, secret=True))
                elif key == cut_key:
                    settings.append(SparkSetting(key, start=value))
                else:
                    settings.append(SparkSetting(key, value))
            more = 1 if conf.endswith(ELLIPSIS) else 0
        return cls(
            _labels(require),
            _sorted(tuple(settings)),
            more,
            None,
            LifecycleOptions.from_flat(summary),
            parse_summary(summary.get(AFTER)),
        )

    # -- what it says ----------------------------------------------------------------------------

    @property
    def pool_name(self) -> str:
        """The pool the job waits and runs in: its ``--pool``, else ``default``."""
        return self.pool if self.pool is not None else DEFAULT_POOL

    @property
    def labels(self) -> dict[str, str]:
        """The labels a daemon must have to run the job."""
        return dict(self.require)

    def setting(self, key: str) -> SparkSetting | None:
        return next((s for s in self.spark if s.key == key), None)

    def require_shown(self) -> str | None:
        """``k=v,k=v``, as ``jobs show`` says it."""
        return ",".join(f"{k}={v}" for k, v in self.require) or None

    def conf_shown(self) -> str | None:
        """``key=value, ...`` for people: secrets redacted, long values cut, the text cut to
        :data:`~zkstore.jobs.shown.MAX_CONF_BYTES`. Derived, never read back."""
        if not self.spark:
            return None
        text = ", ".join(f"{s.key}={s.shown()}" for s in self.spark)
        if self.more:
            text += f", {ELLIPSIS}"
        return cut(text, MAX_CONF_BYTES)


def _labels(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Required labels, checked as ``--require`` checks them (ValueError if not)."""
    for key, value in labels.items():
        if not LABEL.fullmatch(key) or not LABEL.fullmatch(value):
            raise ValueError(f"requirement {key[:80]!r}={value[:80]!r} is not a label")
    return tuple(sorted(labels.items()))


def _bare(spec: RunSpec) -> int:
    """The stored size of ``spec``'s labels and Spark settings alone: the budget of
    :data:`MAX_RUN_BYTES` is theirs (the lifecycle options and ``after`` have their own
    bounds)."""
    return replace(spec, lifecycle=LifecycleOptions(), after=()).stored_bytes()


def _after(raw: Mapping[Any, Any]) -> tuple[Dependency, ...]:
    """The ``after`` object of a ``run`` field (job -> state); ValueError for garbage."""
    found = []
    for job_id, state in raw.items():
        if not isinstance(job_id, str) or not isinstance(state, str):
            raise ValueError("'after' is not a map of job ids to states")
        try:
            found.append(Dependency(job_id, state))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    return tuple(found)


def _pool(name: str | None) -> str | None:
    """A pool's name, checked (ValueError if not one); ``default`` is kept as None."""
    if name is None or name == DEFAULT_POOL:
        return None
    if not POOL_NAME.fullmatch(name):
        raise ValueError(f"pool {name[:80]!r} is not a pool name (1-63 of [a-z0-9_-])")
    return name


def _sorted(settings: tuple[SparkSetting, ...] | list[SparkSetting]) -> tuple[SparkSetting, ...]:
    return tuple(sorted(settings, key=lambda s: s.key))


def _setting(key: object, value: object) -> SparkSetting:
    if not isinstance(key, str) or not key:
        raise ValueError("a Spark setting's key is not text")
    if value is None:
        return SparkSetting(key, secret=True)
    if isinstance(value, str):
        return SparkSetting(key, value)
    if isinstance(value, dict) and set(value) == {"start", "sha256"}:
        start, sha = value["start"], value["sha256"]
        if (
            isinstance(start, str)
            and isinstance(sha, str)
            and len(sha) == 32
            and set(sha) <= _HEX32
        ):
            return SparkSetting(key, start=start, sha256=sha)
    raise ValueError(f"Spark setting {key[:80]!r} has a value of no known form")
