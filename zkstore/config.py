"""The one validated configuration object, built at the edge and passed down explicitly.

Precedence: explicit values (command-line flags, keyword arguments) win over the environment
(``ZKSTORE_*``), which wins over the defaults. Nothing here reads the environment at import time.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from zkstore.errors import ConfigError

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
    "http": "ZKSTORE_HTTP",
    "api_token": "ZKSTORE_API_TOKEN",
}

#: Variables that hold secrets: never passed on to drivers or jobs, never logged or shown.
SECRET_ENV_VARS = frozenset({ENV_VARS["signing_key"], "ZKSTORE_ZK_AUTH", ENV_VARS["api_token"]})

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


def parse_storage_options(pairs: Iterable[str]) -> dict[str, Any]:
    """Parse ``key=value`` pairs into fsspec storage options.

    Values are JSON when they parse as JSON (``anon=true``, ``retries=3``), strings otherwise.
    Dotted keys nest: ``config_kwargs.s3.addressing_style=path``.
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"storage option {pair!r} is not key=value")
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


@dataclass(frozen=True)
class StoreConfig:
    """Where the store lives and how long any one operation may take.

    ``timeout`` is the deadline of one ZooKeeper or storage operation: past it, the operation
    raises :class:`~zkstore.errors.StoreUnavailable` instead of hanging.
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

    @property
    def base_path(self) -> str:
        """The ZooKeeper root of this cluster: ``<root>/<cluster-id>``."""
        return f"{self.root}/{self.cluster_id}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **explicit: Any) -> StoreConfig:
        """Build a config from explicit values (``None`` means "not given"), then ``ZKSTORE_*``."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name in ("zk_hosts", "root", "cluster_id", "storage_url", "signing_key"):
            value = explicit.pop(name, None)
            if value is None and env.get(ENV_VARS[name]):
                value = env[ENV_VARS[name]]
            if value is not None:
                values[name] = value
        if isinstance(values.get("signing_key"), str):
            values["signing_key"] = values["signing_key"].encode()
        values.update({k: v for k, v in explicit.items() if v is not None})
        return cls(**values)

    def to_json(self) -> str:
        """The config as JSON, to hand to a child process (the signing key hex-encoded)."""
        values = asdict(self)
        values["storage_options"] = dict(self.storage_options)
        values["signing_key"] = self.signing_key.hex() if self.signing_key is not None else None
        return json.dumps(values)

    @classmethod
    def from_json(cls, text: str) -> StoreConfig:
        try:
            values = json.loads(text)
            if values.get("signing_key") is not None:
                values["signing_key"] = bytes.fromhex(values["signing_key"])
            return cls(**values)
        except (ValueError, TypeError, AttributeError) as exc:
            raise ConfigError(f"invalid store configuration: {exc}") from exc

    def with_changes(self, **changes: Any) -> StoreConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)
