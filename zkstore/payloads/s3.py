"""What an S3 storage's client is made with: bounded timeouts, and what a process can share.

s3fs makes, for every filesystem, a botocore session (its 120 event handlers, each checked with
``inspect``), and its first request parses botocore's S3 model, endpoint rules and partitions
and loads the CA bundle into a new TLS context. Every
:class:`~zkstore.payloads.storage.StateStorage` is a filesystem of its own (``skip_instance_cache``:
its options are its own), so every storage paid all of that, and every driver on S3 paid it for each
of its storages: about 0.1 s of CPU per driver on the CI machine, the CA bundle alone about 0.06 s
(``python -m benchmarks.bench_cost --s3``). Now a process has one session per set of session
options (:func:`share_session`) and one TLS context per verification setting
(:class:`SharedContextSession`), and a fork server makes both before it forks drivers
(:func:`warm`), so a driver inherits them made.

What stays each filesystem's own: its client (its key, endpoint, region and retries) and its
connection pool. Sharing is sound: a session holds parsed data, handlers and, for a storage given
no key, the credentials its provider chain finds, the same for the same options; a TLS context
is made to be shared by connections (Python's ``ssl``), and a context that a client certificate
or a proxy would change is made for that client alone, as before. Every filesystem of a process
runs on fsspec's one event loop; a forked child inherits what its fork server made without a
request, so nothing in it is bound to a loop.

Imported only for an S3 storage (it imports aiobotocore).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Mapping
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.httpsession import AIOHTTPSession
from aiobotocore.session import AioSession

_LOCK = threading.Lock()
#: This process's botocore sessions, by their session options (JSON).
_SESSIONS: dict[str, AioSession] = {}
#: This process's TLS contexts for an endpoint, by the client's ``verify`` setting.
_CONTEXTS: dict[bool | str, ssl.SSLContext] = {}


class SharedContextSession(AIOHTTPSession):  # type: ignore[misc]
    """aiobotocore's HTTP session, with the process's TLS context for its ``verify`` setting
    (the CA bundle loaded once per process, not once per client). A client certificate or a
    proxy changes the context: those get one of their own, made as aiobotocore makes it."""

    def _build_ssl_contexts(
        self, proxy_url: str | None
    ) -> tuple[ssl.SSLContext, ssl.SSLContext | None]:
        if self._cert_file or proxy_url:
            return super()._build_ssl_contexts(proxy_url)  # type: ignore[no-any-return]
        key = self._verify
        with _LOCK:
            context = _CONTEXTS.get(key)
            if context is None:
                context = _CONTEXTS[key] = self._build_verify_context()
        return context, None


def _takes_session_class() -> bool:
    """Whether this aiobotocore's client configuration takes ``http_session_cls`` (3.x does;
    with one that does not, every client makes its TLS context as before)."""
    try:
        AioConfig(http_session_cls=SharedContextSession)
    except TypeError:
        return False
    return True


_SESSION_CLASS = {"http_session_cls": SharedContextSession} if _takes_session_class() else {}


def client_options(timeout: float) -> dict[str, Any]:
    """The storage options every S3 storage starts from (its own options win): timeouts and
    retries bounded, so that an unreachable S3 fails within the deadline, and the HTTP session
    that shares the TLS context."""
    return {
        "config_kwargs": {
            "connect_timeout": timeout,
            "read_timeout": max(timeout, 30.0),
            "retries": {"max_attempts": 2, "mode": "standard"},
            **_SESSION_CLASS,
        },
    }


def session(options: Mapping[str, Any]) -> AioSession:
    """The process's botocore session for these session options (a profile, say): made at the
    first storage that names them, shared by every later one."""
    key = json.dumps(options, sort_keys=True, default=repr)
    with _LOCK:
        made = _SESSIONS.get(key)
        if made is None:
            made = _SESSIONS[key] = AioSession(**options)
        return made


def share_session(fs: Any) -> None:
    """Give an s3fs filesystem the process's session for its session options (s3fs keeps them
    in ``fs.kwargs``) instead of the one s3fs would make for it alone. A filesystem given a
    session (the ``session`` storage option) keeps it."""
    options = getattr(fs, "kwargs", None)
    if getattr(fs, "session", False) is None and isinstance(options, dict):
        fs.session = session(options)


def warm() -> None:
    """Make the default session, its S3 data parsed, and the TLS context its clients use, in
    this process (a fork server, before it forks drivers). A client is made as a storage's is
    and closed, never used: no request, no connection, no thread left."""
    made = session({})

    async def build() -> None:
        async with made.create_client(
            "s3",
            region_name="us-east-1",
            aws_access_key_id="warm",
            aws_secret_access_key="warm",
            config=AioConfig(**client_options(5.0)["config_kwargs"]),
        ) as client:
            # its verify setting as botocore resolved it (the CA bundle's path, say)
            http = getattr(getattr(client, "_endpoint", None), "http_session", None)
            if isinstance(http, SharedContextSession):
                http._build_ssl_contexts(None)

    asyncio.run(build())
