"""The one validated configuration object, built at the edge and passed down explicitly.

Precedence: explicit values (command-line flags, keyword arguments) win over the environment
(``ZKSTORE_*``), which wins over the defaults. Nothing here reads the environment at import time.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from zkstore.errors import ConfigError
from zkstore.signing import JobKey, Signer, derive_job_key

__all__ = [
    "DEFAULT_CLUSTER_ID",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "DEFAULT_ROOT",
    "DEFAULT_SESSION_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "DEFAULT_ZK",
    "DIGEST",
    "ENV_VARS",
    "MAX_STORAGE_URL_BYTES",
    "SASL",
    "SECRET_ENV_VARS",
    "TEST_MINIMUMS_ENV",
    "LoweredMinimums",
    "StoreConfig",
    "ZkAuth",
    "check_artifact_root",
    "default_storage_url",
    "loopback_only",
    "parse_read_acl",
    "parse_storage_options",
    "split_pair",
    "validate_id",
]

DEFAULT_ZK = "127.0.0.1:2181"
DEFAULT_ROOT = "/zkstore"
DEFAULT_CLUSTER_ID = "default"
DEFAULT_SESSION_TIMEOUT = 10.0
DEFAULT_TIMEOUT = 5.0
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024 * 1024
#: Every handle names its payload by its full URL, under the storage root: the bound on the root
#: keeps the longest handle (longest ids and name) within the handle size limit.
MAX_STORAGE_URL_BYTES = 300

#: Environment variable of each setting, the only place these names are spelled.
ENV_VARS: Mapping[str, str] = {
    "zk_hosts": "ZKSTORE_ZK",
    "root": "ZKSTORE_ROOT",
    "cluster_id": "ZKSTORE_CLUSTER_ID",
    "storage_url": "ZKSTORE_STORAGE",
    "spark_master": "ZKSTORE_SPARK_MASTER",
    "signing_key": "ZKSTORE_SIGNING_KEY",
    "zk_auth": "ZKSTORE_ZK_AUTH",
    "zk_read_acl": "ZKSTORE_ZK_READ_ACL",
    "http": "ZKSTORE_HTTP",
    "api_token": "ZKSTORE_API_TOKEN",
    "api_read_token": "ZKSTORE_API_READ_TOKEN",
    "http_allowed_hosts": "ZKSTORE_HTTP_ALLOWED_HOSTS",
    "artifact_roots": "ZKSTORE_ARTIFACT_ROOTS",
    "driver_users": "ZKSTORE_DRIVER_USERS",
}

#: Variables that hold secrets: never passed on to drivers or jobs, never logged or shown.
SECRET_ENV_VARS = frozenset(
    {
        ENV_VARS["signing_key"],
        ENV_VARS["zk_auth"],
        ENV_VARS["api_token"],
        ENV_VARS["api_read_token"],
    }
)

# -- test-only: lowered product minimums (docs/testing.md) ------------------------------------
#: The variable that lowers product minimums for the test suite: ``name=seconds,...`` with the
#: names of :class:`LoweredMinimums`. Never a flag, never in ``--help``; refused unless every
#: ZooKeeper server is a loopback address (one host: never an HA deployment), and a daemon that
#: applies it says so at start (WARNING). It changes no default: it only lets a test ask for
#: less than a product minimum.
TEST_MINIMUMS_ENV = "ZKSTORE_TEST_MINIMUMS"


@dataclass(frozen=True)
class LoweredMinimums:
    """Product minimums lowered for the tests (:data:`TEST_MINIMUMS_ENV`); None keeps the
    product's. ``progress_timeout``: the least ``--progress-timeout`` accepted (the product's
    30 s); ``heartbeat_interval``: the least time between a driver's heartbeat writes (5 s).
    A lowered value above the product's changes nothing (the product's applies)."""

    progress_timeout: float | None = None
    heartbeat_interval: float | None = None

    def __post_init__(self) -> None:
        for name, value in self.lowered().items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigError(f"{TEST_MINIMUMS_ENV}: {name} must be a positive number")

    def lowered(self) -> dict[str, float]:
        """The minimums lowered (name -> seconds), for the daemon's warning."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def parse(cls, text: str) -> LoweredMinimums:
        """``progress_timeout=2,heartbeat_interval=0.5``; :class:`ConfigError` naming the
        variable for anything else."""
        values: dict[str, float] = {}
        for pair in (p.strip() for p in text.split(",")):
            name, sep, raw = pair.partition("=")
            if not sep or name.strip() not in cls.__dataclass_fields__:
                known = ", ".join(cls.__dataclass_fields__)
                raise ConfigError(f"{TEST_MINIMUMS_ENV}: want NAME=SECONDS,... (NAME: {known})")
            try:
                values[name.strip()] = float(raw)
            except ValueError:
                raise ConfigError(f"{TEST_MINIMUMS_ENV}: {name.strip()} is not a number") from None
        return cls(**values)


def loopback_only(zk_hosts: str) -> bool:
    """Whether every server of a connect string is a loopback address (``127.0.0.1``,
    ``[::1]``, ``localhost``): names are not resolved, so a name that resolves to loopback
    does not count."""
    for host in zk_hosts.split("/", 1)[0].split(","):
        name = host.strip().rsplit(":", 1)[0].strip("[]")
        if name != "localhost":
            try:
                if not ipaddress.ip_address(name).is_loopback:
                    return False
            except ValueError:
                return False
    return True


_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_HOST_RE = re.compile(r"[A-Za-z0-9._\-\[\]:]+:\d{1,5}")


def validate_id(value: str, what: str = "id") -> str:
    """Return ``value`` if it is a safe name (``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``), else raise.

    A safe name is a single path segment in ZooKeeper and in object storage: no ``/``, no ``..``,
    no spaces, at most 128 characters.
    """
    if not isinstance(value, str) or not _ID_RE.fullmatch(value) or value in {".", ".."}:
        shown = value if isinstance(value, str) and len(value) <= 60 else f"{str(value)[:57]}..."
        raise ConfigError(
            f"invalid {what} {shown!r}: use 1-128 characters from [A-Za-z0-9._-], "
            "starting with a letter or digit"
        )
    return value


def default_storage_url() -> str:
    """The local directory used when no storage is configured: ``$XDG_DATA_HOME/zkstore``."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local/share")
    return "file://" + os.path.join(base, "zkstore", "storage")


def split_pair(pair: str, option: str) -> tuple[str, str]:
    """Split ``KEY=VALUE`` at the first ``=``; the error names the option it came from."""
    key, sep, value = pair.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"{option} {pair!r} is not KEY=VALUE")
    return key, value


def parse_storage_options(pairs: Iterable[str]) -> dict[str, Any]:
    """Parse ``key=value`` pairs into fsspec storage options (``--storage-option``).

    Values are JSON when they parse as JSON (``anon=true``, ``retries=3``), strings otherwise.
    Dotted keys nest: ``config_kwargs.s3.addressing_style=path``. (Spark configuration and
    control values have parsers of their own: they are flat.)
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        key, raw = split_pair(pair, "--storage-option")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        target = options
        *parents, leaf = key.split(".")
        for part in parents:
            child = target.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"storage option {key!r} conflicts with {part!r}")
            target = child
        target[leaf] = value
    return options


_ROOT_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\x00-\x20\x7f]+")


def check_artifact_root(url: str) -> str:
    """Return ``url`` if it can be an artifact root: ``protocol://`` and a path below the
    protocol's root (never ``file:///`` or a bare ``s3://``), no ``.``/``..`` segments, no spaces
    or control characters; else :class:`ConfigError`."""
    if not isinstance(url, str) or not _ROOT_URL_RE.fullmatch(url):
        raise ConfigError(f"artifact root {str(url)[:80]!r} is not a URL such as s3://bucket/dir")
    if len(url.encode()) > MAX_STORAGE_URL_BYTES:
        raise ConfigError(f"artifact root {url[:80]!r}... is over {MAX_STORAGE_URL_BYTES} bytes")
    parts = url.split("://", 1)[1].rstrip("/").split("/")
    if any(part in {".", ".."} for part in parts) or not [p for p in parts if p]:
        raise ConfigError(f"artifact root {url!r}: name a directory below the top, without . or ..")
    return url


DIGEST = "digest"
SASL = "sasl"
_AUTH_FORMS = (
    "user:password, digest:user:password, sasl:DIGEST-MD5:user:password or sasl:GSSAPI[:principal]"
)
_ACL_SCHEMES = ("digest", "sasl", "ip", "x509", "world", "auth")
_DIGEST_HASH_RE = re.compile(r"[A-Za-z0-9+/]{27}=")


@dataclass(frozen=True)
class ZkAuth:
    """The credentials of the ZooKeeper session. Its ``repr`` and :meth:`describe` never show the
    secret; only :meth:`to_text` (for a child process's environment) and the session do.

    ``scheme`` is ``digest`` (ZooKeeper's built-in user:password scheme) or ``sasl`` (passed
    through to kazoo: ``mechanism`` DIGEST-MD5 with user and secret, or GSSAPI with an optional
    principal and the process's Kerberos ticket cache).
    """

    scheme: str
    user: str
    secret: str = field(default="", repr=False)
    mechanism: str | None = None

    @classmethod
    def parse(cls, text: str) -> ZkAuth:
        """Parse ``ZKSTORE_ZK_AUTH``; the error never repeats the value (it holds a password)."""
        text = text.strip()
        head, _, rest = text.partition(":")
        if head == SASL:
            mechanism, _, rest = rest.partition(":")
            mechanism = mechanism.upper()
            if mechanism == "GSSAPI":
                return cls(SASL, rest, mechanism=mechanism)
            user, _, secret = rest.partition(":")
            if mechanism == "DIGEST-MD5" and user and secret:
                return cls(SASL, user, secret, mechanism)
        else:
            if head == DIGEST:
                text = rest
            user, _, secret = text.partition(":")
            if user and secret:
                return cls(DIGEST, user, secret)
        raise ConfigError(f"{ENV_VARS['zk_auth']} must be {_AUTH_FORMS}")

    def to_text(self) -> str:
        """The form :meth:`parse` reads (it holds the secret: for a child's environment only)."""
        if self.scheme == DIGEST:
            return f"{DIGEST}:{self.user}:{self.secret}"
        if self.mechanism == "GSSAPI":
            return f"{SASL}:GSSAPI:{self.user}" if self.user else f"{SASL}:GSSAPI"
        return f"{SASL}:{self.mechanism}:{self.user}:{self.secret}"

    def describe(self) -> str:
        """Who we are, for messages: ``digest user 'alice'`` (never the secret)."""
        kind = self.scheme if self.mechanism is None else f"{self.scheme} {self.mechanism}"
        return f"{kind} user {self.user!r}" if self.user else f"{kind} (ticket cache)"

    def __repr__(self) -> str:
        return f"ZkAuth({self.describe()})"


def parse_read_acl(text: str | Iterable[str]) -> tuple[str, ...]:
    """ZooKeeper ACL ids (``scheme:id``, comma-separated) granted read-only access to every node.

    The ids are written as ZooKeeper writes them: ``digest:monitor:<base64 sha1>`` (never the
    password: ``zkstore acl digest monitor`` prints the id), ``sasl:monitor``, ``ip:10.0.0.0/8``.
    """
    items = text.split(",") if isinstance(text, str) else list(text)
    ids = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        scheme, _, ident = item.partition(":")
        if scheme not in _ACL_SCHEMES or not ident:
            raise ConfigError(
                f"read ACL id {item[:40]!r} is not scheme:id with a scheme of "
                + ", ".join(_ACL_SCHEMES)
            )
        if scheme == DIGEST and not _DIGEST_HASH_RE.fullmatch(ident.partition(":")[2]):
            raise ConfigError(
                "a digest read ACL id is digest:USER:HASH with the base64 SHA-1 hash, not a "
                "password (zkstore acl digest USER prints it)"
            )
        ids.append(item)
    return tuple(ids)


@dataclass(frozen=True)
class StoreConfig:
    """Where the store lives and how long any one operation may take.

    ``timeout`` is the deadline of one ZooKeeper or storage operation: past it, the operation
    raises :class:`~zkstore.errors.StoreUnavailable` instead of hanging. ``signing_key`` is the
    cluster's; a driver's configuration holds ``job_key`` instead, its own job's key only
    (:meth:`for_job`, :mod:`zkstore.signing`).
    """

    zk_hosts: str = DEFAULT_ZK
    root: str = DEFAULT_ROOT
    cluster_id: str = DEFAULT_CLUSTER_ID
    storage_url: str = field(default_factory=default_storage_url)
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    signing_key: bytes | None = field(default=None, repr=False)
    session_timeout: float = DEFAULT_SESSION_TIMEOUT
    timeout: float = DEFAULT_TIMEOUT
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    zk_auth: ZkAuth | None = field(default=None, repr=False)
    zk_read_acl: tuple[str, ...] = ()
    #: where jobs may register artifacts besides the storage root (``--artifact-root``); also
    #: the only places the runtime and ``handles cleanup`` ever delete artifact data
    artifact_roots: tuple[str, ...] = ()
    job_key: JobKey | None = field(default=None, repr=False)
    #: a driver's ZooKeeper identity in place of ``zk_auth`` (the drivers' and its job's
    #: credentials, :class:`zkstore.zookeeper.identity.DriverIdentity` as JSON; :meth:`for_job`)
    zk_driver: Mapping[str, Any] | None = field(default=None, repr=False)
    #: test-only (:data:`TEST_MINIMUMS_ENV`): product minimums lowered; None in production
    lowered_minimums: LoweredMinimums | None = None

    def __post_init__(self) -> None:
        hosts = self.zk_hosts.split("/", 1)[0]
        if not hosts or not all(_HOST_RE.fullmatch(h.strip()) for h in hosts.split(",")):
            raise ConfigError(
                f"invalid ZooKeeper connect string {self.zk_hosts!r}: want host:port[,host:port...]"
            )
        if not self.root.startswith("/") or self.root != "/" + "/".join(
            s for s in self.root.split("/") if s
        ):
            raise ConfigError(f"invalid root {self.root!r}: want an absolute path like /zkstore")
        for segment in self.root.split("/")[1:]:
            validate_id(segment, "root segment")
        validate_id(self.cluster_id, "cluster id")
        if not self.storage_url:
            raise ConfigError("storage URL is empty")
        if len(self.storage_url.encode()) > MAX_STORAGE_URL_BYTES:
            raise ConfigError(
                f"storage URL of {len(self.storage_url.encode())} bytes is over "
                f"{MAX_STORAGE_URL_BYTES}: payload URLs must stay short enough for their handles"
            )
        if not 1.0 <= self.session_timeout <= 600.0:
            raise ConfigError(f"session timeout {self.session_timeout} s is outside 1..600 s")
        if not 0.0 < self.timeout <= 600.0:
            raise ConfigError(f"timeout {self.timeout} s is outside (0, 600] s")
        if self.max_payload_bytes <= 0:
            raise ConfigError("max payload size must be positive")
        for url in self.artifact_roots:
            check_artifact_root(url)
        if self.job_key is not None and (
            self.signing_key is not None or self.job_key.cluster_id != self.cluster_id
        ):
            raise ConfigError("a job's signing key replaces the cluster's, for its own cluster")
        if self.zk_read_acl and self.zk_auth is None:
            raise ConfigError(
                f"{ENV_VARS['zk_read_acl']} needs {ENV_VARS['zk_auth']}: without credentials "
                "every node is open anyway"
            )
        if self.lowered_minimums is not None and not loopback_only(self.zk_hosts):
            raise ConfigError(
                f"{TEST_MINIMUMS_ENV} is for the test suite only: refused with a ZooKeeper that "
                "is not on this host's loopback"
            )

    @property
    def signer(self) -> Signer:
        """What signs and checks this configuration's payloads."""
        return Signer(self.signing_key, self.job_key)

    def for_job(self, job_id: str, *, zk_driver: Mapping[str, Any] | None = None) -> StoreConfig:
        """The configuration a driver of ``job_id`` gets: the cluster's signing key replaced by
        the key derived for that job (without a signing key, none); with ``zk_driver`` (the
        job's ZooKeeper identity, :func:`zkstore.zookeeper.identity.driver_identity`), the cluster's
        ZooKeeper credentials replaced by it."""
        changed = self
        if zk_driver is not None:
            changed = replace(changed, zk_auth=None, zk_read_acl=(), zk_driver=dict(zk_driver))
        if self.signing_key is None:
            return changed
        key = derive_job_key(self.signing_key, self.cluster_id, validate_id(job_id, "job id"))
        return replace(changed, signing_key=None, job_key=JobKey(self.cluster_id, job_id, key))

    @property
    def base_path(self) -> str:
        """The ZooKeeper root of this cluster: ``<root>/<cluster-id>``."""
        return f"{self.root}/{self.cluster_id}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **explicit: Any) -> StoreConfig:
        """Build a config from explicit values (``None`` means "not given"), then ``ZKSTORE_*``.

        ``zk_auth`` may be given as text (``ZKSTORE_ZK_AUTH``'s form), ``zk_read_acl`` and
        ``artifact_roots`` as comma-separated strings.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name in (
            "zk_hosts",
            "root",
            "cluster_id",
            "storage_url",
            "signing_key",
            "zk_auth",
            "zk_read_acl",
            "artifact_roots",
        ):
            value = explicit.pop(name, None)
            if value is None and env.get(ENV_VARS[name]):
                value = env[ENV_VARS[name]]
            if value is not None:
                values[name] = value
        if isinstance(values.get("signing_key"), str):
            values["signing_key"] = values["signing_key"].encode()
        if isinstance(values.get("zk_auth"), str):
            values["zk_auth"] = ZkAuth.parse(values["zk_auth"])
        if "zk_read_acl" in values:
            values["zk_read_acl"] = parse_read_acl(values["zk_read_acl"])
        if isinstance(values.get("artifact_roots"), str):
            roots = values["artifact_roots"].split(",")
            values["artifact_roots"] = tuple(r.strip() for r in roots if r.strip())
        values.update({k: v for k, v in explicit.items() if v is not None})
        if env.get(TEST_MINIMUMS_ENV) and "lowered_minimums" not in values:
            values["lowered_minimums"] = LoweredMinimums.parse(env[TEST_MINIMUMS_ENV])
        return cls(**values)

    def to_json(self) -> str:
        """The config as JSON, to hand to a child process through a pipe (keys hex-encoded; it
        holds the secrets, so never log it, put it in an environment or on a command line)."""
        values = asdict(self)
        values["storage_options"] = dict(self.storage_options)
        values["signing_key"] = self.signing_key.hex() if self.signing_key is not None else None
        values["zk_auth"] = self.zk_auth.to_text() if self.zk_auth is not None else None
        values["zk_read_acl"] = list(self.zk_read_acl)
        values["artifact_roots"] = list(self.artifact_roots)
        values["zk_driver"] = dict(self.zk_driver) if self.zk_driver is not None else None
        values["job_key"] = (
            {"job_id": self.job_key.job_id, "key": self.job_key.key.hex()}
            if self.job_key is not None
            else None
        )
        return json.dumps(values)

    @classmethod
    def from_json(cls, text: str) -> StoreConfig:
        try:
            values = json.loads(text)
            if values.get("signing_key") is not None:
                values["signing_key"] = bytes.fromhex(values["signing_key"])
            if values.get("zk_auth") is not None:
                values["zk_auth"] = ZkAuth.parse(values["zk_auth"])
            values["zk_read_acl"] = tuple(values.get("zk_read_acl") or ())
            values["artifact_roots"] = tuple(values.get("artifact_roots") or ())
            if values.get("lowered_minimums") is not None:
                values["lowered_minimums"] = LoweredMinimums(**values["lowered_minimums"])
            if values.get("job_key") is not None:
                job = values["job_key"]
                values["job_key"] = JobKey(
                    str(values.get("cluster_id")), job["job_id"], bytes.fromhex(job["key"])
                )
            return cls(**values)
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            raise ConfigError(f"invalid store configuration: {exc}") from exc

    def with_changes(self, **changes: Any) -> StoreConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)
