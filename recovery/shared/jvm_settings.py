"""The Spark settings fixed when a driver JVM starts, and whether an attempt may use a warm one.

Spark's configuration page says it of the driver's ``spark.driver.memory``,
``spark.driver.extraClassPath``, ``spark.driver.defaultJavaOptions``,
``spark.driver.extraJavaOptions`` and ``spark.driver.extraLibraryPath``: "In client mode, this
config must not be set through the SparkConf directly in your application, because the driver
JVM has already started at that point" (they become the JVM's ``-Xmx``, ``-cp``, options and
``-Djava.library.path``). ``spark-submit`` acts on others before the driver's code runs, in the
JVM it started: the jars of ``spark.jars`` and the packages of ``spark.jars.packages``
(resolved with Ivy: ``.excludes``, ``.repositories``, ``.ivy``, ``.ivySettings``) are put on the
class loader of the application (``spark.driver.userClassPathFirst`` picks its order), a
Kerberos principal and keytab are logged in with, and ``spark.submit.deployMode`` says where
the driver runs at all. A JVM started without them cannot take them later: an attempt that sets
any of them to a value other than the warm drivers' (the daemon's defaults: its
``spark-defaults.conf``, else Spark's) starts its own JVM, cold.

A warm driver serves the masters whose scheduler the context makes by itself: local mode and a
standalone master (``spark://``). YARN and Kubernetes have ``spark-submit`` prepare more in
client mode (credentials, the application's staging) than a context can redo.

Whether an attempt's JVM-level settings match is the driver's decision: only it reads the job's
sealed definition. Its daemon, which never opens it, reads a hint as it launches the attempt:
the job's run options as its handle keeps them (:func:`run_reason`: typed, parsed once; a
long value kept as its digest). A job whose handle keeps one that differs is launched without a
warm JVM (none taken, none started beside it); a handle that lies can only make a job that
could have used one start cold, or hand over one its driver lets go.

Pure: the caller reads the files and the environment. Also here, as the member and the driver
both use them: :class:`WarmOffer`, what a driver is given of the warm JVM its attempt took, and
:func:`quote_option`.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from recovery.settings import is_warm_master
from zkstore.jobs.runspec import RunSpec

__all__ = [
    "ARCHIVE_ENV",
    "ASK",
    "CLASS_PATH",
    "JVM_LEVEL",
    "PROPERTIES_ENV",
    "UNSET_MEANS",
    "WARM_ENV",
    "SubmitArgs",
    "WarmAsk",
    "WarmOffer",
    "class_path_reason",
    "jvm_reason",
    "master_reason",
    "parse_properties",
    "parse_submit_args",
    "quote_option",
    "run_reason",
]

#: The settings a driver JVM is started with, and what each is there.
JVM_LEVEL: dict[str, str] = {
    "spark.driver.memory": "the driver JVM's heap",
    "spark.driver.extraClassPath": "the driver JVM's class path",
    "spark.driver.defaultJavaOptions": "the driver JVM's options",
    "spark.driver.extraJavaOptions": "the driver JVM's options",
    "spark.driver.extraLibraryPath": "the driver JVM's library path",
    "spark.driver.userClassPathFirst": "the order of the driver's class loaders",
    "spark.jars": "jars spark-submit puts on the driver's class loader",
    "spark.jars.packages": "packages spark-submit resolves and loads",
    "spark.jars.excludes": "packages spark-submit resolves and loads",
    "spark.jars.repositories": "packages spark-submit resolves and loads",
    "spark.jars.ivy": "packages spark-submit resolves and loads",
    "spark.jars.ivySettings": "packages spark-submit resolves and loads",
    "spark.submit.deployMode": "where spark-submit runs the driver",
    "spark.kerberos.principal": "the identity spark-submit logs in with",
    "spark.kerberos.keytab": "the identity spark-submit logs in with",
}
#: What an unset JVM-level setting means (a job that sets it to this changes nothing).
UNSET_MEANS: dict[str, str] = {
    "spark.submit.deployMode": "client",
    "spark.driver.userClassPathFirst": "false",
}
#: Variables a daemon sets in its drivers' environment (paths, no secret): the class-data
#: archive their JVMs map (once the daemon has verified it), and the deployment's
#: ``spark-defaults.conf`` (given to spark-submit as ``--properties-file``).
ARCHIVE_ENV = "ZKSTORE_SPARK_ARCHIVE"
PROPERTIES_ENV = "ZKSTORE_SPARK_PROPERTIES"
#: The number of warm drivers the daemon keeps (for what a driver that starts cold says).
WARM_ENV = "ZKSTORE_DRIVER_WARM"
#: The setting that changes the class path an archive was made with.
CLASS_PATH = "spark.driver.extraClassPath"


def master_reason(master: str) -> str | None:
    """Why an attempt on ``master`` cannot use a warm driver, or None if it can."""
    if is_warm_master(master.strip()):
        return None
    return f"master {master[:80]}: spark-submit prepares its client-mode driver at launch"


def jvm_reason(attempt: Mapping[str, str], defaults: Mapping[str, str]) -> str | None:
    """Why an attempt whose Spark settings are ``attempt`` cannot use a driver JVM started with
    ``defaults`` (the deployment's ``spark-defaults.conf``), or None if it can: the first
    JVM-level setting whose value differs."""
    for key in sorted(JVM_LEVEL):
        if key not in attempt:
            continue
        unset = UNSET_MEANS.get(key, "")
        wanted = attempt[key].strip() or unset
        started = defaults.get(key, "").strip() or unset
        if wanted != started:
            shown = f"{wanted[:60]!r}" if wanted else "empty"
            had = f"{started[:60]!r}" if started else "unset"
            return (
                f"{key}={shown} ({JVM_LEVEL[key]}) is fixed at JVM launch; warm drivers have {had}"
            )
    return None


def run_reason(run: RunSpec | None, defaults: Mapping[str, str]) -> str | None:
    """Why a job whose handle keeps its run options as ``run`` (:mod:`zkstore.jobs.runspec`)
    cannot use a warm driver JVM started with ``defaults``, or None if nothing it keeps says
    so. For the daemon, which never opens the definition: a JVM-level value is kept in clear
    or as its digest (compared exactly); a secret says nothing, nor an older handle's value
    cut short whose start the warm JVMs' value begins with."""
    if run is None:
        return None
    master = run.setting("spark.master")
    if master is not None and master.value is not None:
        reason = master_reason(master.value)
        if reason is not None:
            return reason
    for key in sorted(JVM_LEVEL):
        setting = run.setting(key)
        if setting is None:
            continue
        unset = UNSET_MEANS.get(key, "")
        started = defaults.get(key, "").strip() or unset
        if setting.value is not None:
            reason = jvm_reason({key: setting.value}, defaults)
        elif setting.differs(started):
            had = f"{started[:60]!r}" if started else "unset"
            reason = (
                f"{key}={setting.shown()[:60]!r} ({JVM_LEVEL[key]}) is fixed at JVM launch; "
                f"warm drivers have {had}"
            )
        else:
            reason = None
        if reason is not None:
            return reason
    return None


def class_path_reason(attempt: Mapping[str, str], defaults: Mapping[str, str]) -> str | None:
    """Why an attempt's JVM cannot map the archive (made with the class path of ``defaults``),
    or None if it can."""
    wanted = attempt.get(CLASS_PATH, defaults.get(CLASS_PATH, "")).strip()
    if wanted != defaults.get(CLASS_PATH, "").strip():
        return f"{CLASS_PATH} changes the class path the class-data archive was made with"
    return None


@dataclass(frozen=True)
class SubmitArgs:
    """What a driver's ``PYSPARK_SUBMIT_ARGS`` hands ``spark-submit``."""

    master: str | None = None
    name: str | None = None
    conf: dict[str, str] = field(default_factory=dict)
    properties_file: str | None = None
    #: any other option (``--driver-memory``, ``--jars``...): fixed at JVM launch
    others: tuple[str, ...] = ()


def parse_submit_args(text: str) -> SubmitArgs:
    """``PYSPARK_SUBMIT_ARGS`` as pyspark hands it to ``spark-submit`` (shell words, ending in
    ``pyspark-shell``). Raises ValueError for words a shell would not split."""
    words = shlex.split(text)
    master = name = properties = None
    conf: dict[str, str] = {}
    others: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        value = words[i + 1] if i + 1 < len(words) else None
        if word in ("--master", "--name", "--conf", "--properties-file") and value is not None:
            if word == "--master":
                master = value
            elif word == "--name":
                name = value
            elif word == "--properties-file":
                properties = value
            elif "=" in value:
                key, _, setting = value.partition("=")
                conf[key.strip()] = setting
            i += 2
            continue
        if word != "pyspark-shell":
            others.append(word)
        i += 1
    return SubmitArgs(master, name, conf, properties, tuple(others))


def parse_properties(text: str) -> dict[str, str]:
    """A ``spark-defaults.conf`` (a Java properties file: ``key value``, ``key=value`` or
    ``key:value`` per line, ``#`` and ``!`` comments, a trailing backslash continuing a line),
    values trimmed as Spark trims them. Escapes other than the continuation are kept as they
    are: only the JVM-level keys are compared, and their values are paths and options."""
    found: dict[str, str] = {}
    logical: list[str] = []
    lines = text.splitlines()
    for raw in lines:
        line = raw.lstrip() if not logical else raw.strip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical.append(line[:-1])
            continue
        logical.append(line)
        whole, logical = "".join(logical), []
        match = re.match(r"([^\s=:]+)\s*[=:\s]\s*(.*)", whole)
        if match is not None:
            found[match.group(1)] = match.group(2).strip()
        elif whole.strip():
            found[whole.strip()] = ""
    return found


def quote_option(option: str) -> str:
    """One JVM option as Spark's launcher reads ``SPARK_SUBMIT_OPTS`` (split as a shell would:
    double quotes, backslashes), whatever its path holds."""
    return '"' + option.replace("\\", "\\\\").replace('"', '\\"') + '"'


#: What a driver writes on its channel to its daemon to take a warm JVM at first use.
ASK = b"take\n"


@dataclass(frozen=True)
class WarmAsk:
    """What a driver is given at its launch, through its configuration pipe, when it may ask its
    daemon for a warm JVM the first time its job asks for Spark (the descriptor ``--warm-fd`` is
    then its end of a socket to its daemon, :mod:`recovery.member.warm_jvms.asks`): the
    JVM-level settings the warm JVMs were started with, to decide whether to ask at all. Nothing
    of a JVM: which one, its port and its secret come only with the answer."""

    defaults: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"ask": {"defaults": self.defaults}}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WarmAsk | None:
        """The hint, None if ``text`` is not one (an offer); ValueError for garbage."""
        raw = json.loads(text)
        if not isinstance(raw, dict) or "ask" not in raw:
            return None
        ask = raw["ask"]
        defaults = ask.get("defaults") if isinstance(ask, dict) else None
        if not isinstance(defaults, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in defaults.items()
        ):
            raise ValueError("'defaults' is not a map of text")
        return cls(dict(defaults))


@dataclass(frozen=True)
class WarmOffer:
    """What a driver is given of the warm JVM its attempt took, through its configuration pipe
    (never its environment or command line): where the JVM's gateway listens and its secret,
    the JVM's process, and the JVM-level settings it was started with (the deployment's
    defaults: the driver decides whether its job's match, this module)."""

    warm_id: str
    pid: int
    start_ticks: int | None
    port: int
    secret: str = field(repr=False)
    defaults: dict[str, str] = field(default_factory=dict)
    warmed: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WarmOffer:
        """Raises ValueError for anything a daemon would not have written."""
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        if not isinstance(raw.get("defaults"), dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in raw["defaults"].items()
        ):
            raise ValueError("'defaults' is not a map of text")
        for name, kind in {"warm_id": str, "pid": int, "port": int, "secret": str}.items():
            if type(raw.get(name)) is not kind:
                raise ValueError(f"{name!r} has the wrong type")
        ticks = raw.get("start_ticks")
        if ticks is not None and type(ticks) is not int:
            raise ValueError("'start_ticks' has the wrong type")
        warmed = raw.get("warmed", 0.0)
        if type(warmed) not in (int, float):
            raise ValueError("'warmed' has the wrong type")
        return cls(
            raw["warm_id"],
            raw["pid"],
            ticks,
            raw["port"],
            raw["secret"],
            dict(raw["defaults"]),
            float(warmed),
        )
