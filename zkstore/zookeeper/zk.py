"""A kazoo session whose every call has a deadline and raises only zkstore errors.

Why not plain kazoo calls: a synchronous kazoo call made while disconnected is queued and waits
until the client reconnects, which may be never (kazoo #374, patroni #1981). Here every call waits
for a connection at most until its deadline, then waits for its answer at most until the same
deadline. A read that fails on a lost connection is retried within the deadline; a write is not,
because it may have been applied: it raises :class:`OutcomeUnknown` instead.

With credentials (:class:`~zkstore.config.ZkAuth`), the session authenticates (digest, or SASL
through kazoo) and every node it creates carries the ACL of :func:`default_acl`: all rights for
our identity, read for the monitoring ids, nothing for anyone else. kazoo applies that ACL to
transactions, ``create`` and the parents that ``ensure_path``/``makepath`` create alike.
A refusal (``NoAuth``, ``AuthFailed``) raises :class:`AccessDenied` naming the identity, never
its secret.

Transactions are built from the ops of :mod:`zkstore.zookeeper.ops` and committed with
:meth:`ZooKeeper.commit`, which inspects every result (kazoo's context-manager form of a
transaction silently discards failures); a fence makes the whole write conditional on the
writer's own standing (its election node, its attempt's records).

Why one module: every ZooKeeper call of the product passes through :class:`ZooKeeper`, and
what makes a call safe (its deadline, reads retried and writes never, kazoo's errors translated,
the ACL of what it creates, a transaction's every result inspected) is one contract that must
not differ from call to call. Split by kind of call, the next call would again be written
missing one of them.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import kazoo.protocol.connection
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    QuotaExceededError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.serialization import SASL, Auth, int_struct, write_string
from kazoo.protocol.states import KeeperState, ZnodeStat
from kazoo.security import ACL, Id, Permissions, make_digest_acl

from zkstore.config import DIGEST, ENV_VARS, StoreConfig, ZkAuth
from zkstore.errors import (
    AccessDenied,
    ConfigError,
    HandleExists,
    HandleNotFound,
    NotEmpty,
    OutcomeUnknown,
    QuotaExceeded,
    StoreUnavailable,
    TooLarge,
    VersionConflict,
    ZkStoreError,
)
from zkstore.zookeeper.identity import AclPolicy, DriverIdentity
from zkstore.zookeeper.ops import Check, Create, Deadline, Delete, Fence, Op, SetData
from zkstore.zookeeper.polling import PollingHandler
from zkstore.zookeeper.retry import JITTER, TryAgain, within

__all__ = [
    "ENV_AUTH",
    "MAX_ZNODE_BYTES",
    "PIPELINE_WINDOW",
    "TREE_BATCH",
    "ZooKeeper",
    "default_acl",
    "is_own_ephemeral",
]

logger = logging.getLogger(__name__)

# kazoo draws its ping and reconnect jitter from the global ``random`` on every turn of its
# connection loop: in a driver, a job that seeds the generator for reproducible results
# (``random.seed(42)``) drew other numbers whenever a ping fell between its seed and its draws.
# kazoo draws from zkstore's jitter generator instead.
kazoo.protocol.connection.random = JITTER

ENV_AUTH = ENV_VARS["zk_auth"]

T = TypeVar("T")

#: ZooKeeper refuses requests over ``jute.maxbuffer`` (1 MB) by dropping the connection; we stop
#: far below it (invariant 7).
MAX_ZNODE_BYTES = 64 * 1024

#: Requests in flight at once in a pipelined read; each window gets the deadline of one call.
PIPELINE_WINDOW = 1000
#: The most deletes :meth:`ZooKeeper.delete_tree` puts in one transaction (each a path and a
#: version: far under the server's 1 MB request limit).
TREE_BATCH = 500

#: ``removeWatches``' watcher types (ZooKeeper's ``WatcherType``): children, data (and exists)
_CHILD_WATCHES, _DATA_WATCHES = 1, 2


class _RemoveWatches(tuple[str, int]):
    """ZooKeeper's ``removeWatches`` request (opcode 18, 3.5+), which kazoo lacks: the path
    (chrooted) and the watcher type; its answer is a header alone."""

    type = 18

    def __new__(cls, path: str, kind: int) -> _RemoveWatches:
        return super().__new__(cls, (path, kind))

    def serialize(self) -> bytes:
        kind: bytes = int_struct.pack(self[1])
        return bytes(write_string(self[0])) + kind

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> bool:
        return True


def _server_count(hosts: str) -> int:
    """How many servers a connect string names (``h1:p,h2:p/chroot``)."""
    return max(1, len(hosts.split("/", 1)[0].split(",")))


def default_acl(auth: ZkAuth | None, read_ids: Sequence[str] = ()) -> list[ACL] | None:
    """The ACL of every node a session with ``auth`` creates; None (ZooKeeper's open ACL)
    without credentials.

    All rights for our identity (the digest of user:password; for SASL, the authenticated
    principal through ZooKeeper's ``auth`` scheme), read for each of ``read_ids``.
    """
    if auth is None:
        return None
    if auth.scheme == DIGEST:
        acl = [make_digest_acl(auth.user, auth.secret, all=True)]
    elif auth.mechanism == "DIGEST-MD5":
        acl = [ACL(Permissions.ALL, Id("sasl", auth.user))]
    else:
        acl = [ACL(Permissions.ALL, Id("auth", ""))]
    for ident in read_ids:
        scheme, _, name = ident.partition(":")
        acl.append(ACL(Permissions.READ, Id(scheme, name)))
    return acl


def _kazoo_auth(auth: ZkAuth | None) -> dict[str, Any]:
    if auth is None:
        return {}
    if auth.scheme == DIGEST:
        return {"auth_data": [(DIGEST, f"{auth.user}:{auth.secret}")]}
    options: dict[str, Any] = {"mechanism": auth.mechanism}
    if auth.mechanism == "DIGEST-MD5":
        options.update(username=auth.user, password=auth.secret)
    elif auth.user:
        options["principal"] = auth.user
    return {"sasl_options": options}


class _RedactCredentials(logging.Filter):
    """kazoo logs every request it sends at DEBUG, the password of the Auth request included."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, Auth | SASL) for a in record.args):
            record.args = tuple(
                f"{type(a).__name__}(<redacted>)" if isinstance(a, Auth | SASL) else a
                for a in record.args
            )
        return True


def _kazoo_logger() -> logging.Logger:
    """kazoo's own logger, with the credentials filter attached (once)."""
    log = logging.getLogger("kazoo.client")
    if not any(isinstance(f, _RedactCredentials) for f in log.filters):
        log.addFilter(_RedactCredentials())
    return log


_OUTAGES = (
    ConnectionLoss,
    SessionExpiredError,
    ConnectionClosedError,
    OperationTimeoutError,
    KazooTimeoutError,
)


class ZooKeeper:
    """One ZooKeeper session with deadline-bound calls. Thread-safe, as kazoo is.

    ``timeout`` is the default deadline of one call (connection wait included).
    Listeners given to :meth:`add_listener` run on kazoo's I/O thread: they must only set flags
    or enqueue, never block or call ZooKeeper.
    """

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout: float = 10.0,
        timeout: float = 5.0,
        client_id: tuple[int, bytes] | None = None,
        auth: ZkAuth | None = None,
        read_acl: Sequence[str] = (),
        driver: DriverIdentity | None = None,
        acl_policy: AclPolicy | None = None,
    ) -> None:
        self.hosts = hosts
        self.timeout = timeout
        self.session_timeout = session_timeout
        self.auth = auth
        self.driver = driver
        #: the ACL of each node this session creates, by its path (None: :attr:`acl` for all)
        self.acl_policy = acl_policy
        self.acl = default_acl(auth, read_acl)
        self._connected = threading.Event()
        self._listeners: list[Callable[[str], None]] = []
        try:
            self._client = KazooClient(
                hosts=hosts,
                timeout=session_timeout,
                client_id=client_id,
                connection_retry={"max_tries": -1, "max_delay": 1.0},
                default_acl=self.acl,
                # kazoo's own share of the session for the handshake with one server
                handler=PollingHandler(connect_timeout=session_timeout / _server_count(hosts)),
                logger=_kazoo_logger(),
                **(_kazoo_auth(auth) if driver is None else {"auth_data": driver.auth_data()}),
            )
        except (ValueError, KazooException) as exc:
            raise ConfigError(f"invalid ZooKeeper connect string {hosts!r}: {exc}") from exc
        self._client.add_listener(self._on_state)
        self._granted: float | None = None
        self._negotiated: float | None = None
        self._capture_negotiated_timeout()
        self._auth_failed = False
        self._latch_auth_failure()

    @classmethod
    def from_config(cls, config: StoreConfig, **overrides: Any) -> ZooKeeper:
        """A session with ``config``'s hosts, timeouts and credentials (``overrides`` win)."""
        driver = DriverIdentity.from_json(config.zk_driver) if config.zk_driver else None
        policy = None
        if driver is not None:
            policy = AclPolicy(
                config.base_path, config.cluster_id, driver=driver, read_ids=driver.read_ids
            )
        elif config.zk_auth is not None and config.zk_auth.scheme == DIGEST:
            policy = AclPolicy(
                config.base_path,
                config.cluster_id,
                cluster=config.zk_auth,
                read_ids=config.zk_read_acl,
            )
        options: dict[str, Any] = {
            "session_timeout": config.session_timeout,
            "timeout": config.timeout,
            "auth": config.zk_auth,
            "read_acl": config.zk_read_acl,
            "driver": driver,
            "acl_policy": policy,
        }
        options.update(overrides)
        return cls(config.zk_hosts, **options)

    @property
    def identity(self) -> str:
        """Who this session is, for messages (never the secret)."""
        if self.driver is not None:
            return self.driver.describe()
        return self.auth.describe() if self.auth is not None else "a client without credentials"

    def _acl(self, path: str, owner: str | None = None) -> list[ACL] | None:
        """The ACL a node created at ``path`` (for job ``owner``) gets (None: the session's
        default)."""
        return None if self.acl_policy is None else self.acl_policy.acl_for(path, owner)

    # -- session -------------------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> ZooKeeper:
        """Connect, or raise :class:`StoreUnavailable` within ``timeout`` (:class:`AccessDenied`
        at once if SASL authentication fails)."""
        deadline = self._deadline(timeout)
        self._client.start_async()
        try:
            while not self._connected.wait(min(0.05, deadline.remaining())):
                self._raise_if_rejected()
                if deadline.expired:
                    raise StoreUnavailable(
                        f"cannot reach ZooKeeper at {self.hosts} within {deadline.seconds:g} s"
                    )
            if self.auth is not None and self.auth.scheme != DIGEST:
                # kazoo reports CONNECTED before the SASL exchange: a first read waits for it
                self.exists("/", timeout=deadline.remaining())
        except ZkStoreError:
            self.stop()
            raise
        return self

    def _latch_auth_failure(self) -> None:
        """Remember a rejection of the credentials: kazoo moves on from AUTH_FAILED to CLOSED at
        once (and never connects again), so its state alone may show only a closed client, and
        a wrong password would look like an unreachable server."""
        callback = self._client._session_callback

        def latching(state: str) -> None:
            if state == KeeperState.AUTH_FAILED:
                self._auth_failed = True
            callback(state)

        self._client._session_callback = latching

    def _raise_if_rejected(self) -> None:
        if self._auth_failed or self._client.client_state == KeeperState.AUTH_FAILED:
            raise AccessDenied(
                f"ZooKeeper at {self.hosts} rejected the credentials of {self.identity} "
                f"(authentication failed; see {ENV_AUTH})"
            )

    def stop(self) -> None:
        """Close the session: every ephemeral node of this session goes away at once."""
        try:
            self._client.stop()
            self._client.close()
        except KazooException as exc:
            logger.debug("closing ZooKeeper session: %s", exc)

    def __enter__(self) -> ZooKeeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _capture_negotiated_timeout(self) -> None:
        """Record the session timeout the server grants, on every connect (kazoo computes it
        but keeps it to itself; patroni patches the same method). The server may grant less
        than asked (its ``maxSessionTimeout``): whatever relies on the session timeout must use
        :attr:`granted_session_timeout`."""
        connection = self._client._connection
        connect = connection._connect

        def capturing(*args: Any, **kwargs: Any) -> Any:
            read_timeout_ms, connect_timeout_ms = connect(*args, **kwargs)
            granted = read_timeout_ms * 1.5 / 1000.0  # kazoo's read timeout is 2/3 of it
            self._granted = granted if self._granted is None else min(self._granted, granted)
            self._negotiated = granted
            return read_timeout_ms, connect_timeout_ms

        connection._connect = capturing

    @property
    def granted_session_timeout(self) -> float:
        """The shortest session timeout the servers granted this session (the requested one
        until the first connect)."""
        granted = self._granted
        return self.session_timeout if granted is None else min(granted, self.session_timeout)

    @property
    def negotiated_session_timeout(self) -> float | None:
        """The session timeout the servers granted at the last connect, as granted (more than
        asked when the server's ``minSessionTimeout``, by default two ``tickTime``, is more);
        None before the first connect."""
        return self._negotiated

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def drop_connection(self) -> bool:
        """Close the connection to the current server, not the session: kazoo connects to the
        next server of its list, and the session goes on there if it is alive. True if there
        was a connection to close.

        For a server that went silent (cut off, its packets dropped): kazoo declares a
        connection dead only when its ping goes unanswered, and it pings only after a third of
        the session without a request of ours (every request counts as a ping). A client that
        keeps asking, as a driver's lease does, would otherwise stay with that server until its
        session is lost, though the other servers answer.
        """
        sock = getattr(self._client._connection, "_socket", None)
        if sock is None:
            return False
        try:  # kazoo's thread, waiting on the socket, reads its end and reconnects
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # closed meanwhile: kazoo is reconnecting already
            return False
        logger.info("dropped the connection to a ZooKeeper server that does not answer")
        return True

    @property
    def session_id(self) -> int | None:
        """The current session id; it changes when kazoo silently opens a new session."""
        client_id = self._client.client_id
        return client_id[0] if client_id else None

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        client_id: tuple[int, bytes] | None = self._client.client_id
        return client_id

    @property
    def kazoo(self) -> KazooClient:
        """The underlying kazoo client, for recipes and tests; prefer the methods here."""
        return self._client

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener("CONNECTED"|"SUSPENDED"|"LOST")`` on every state change (I/O thread)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[str], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        for listener in list(self._listeners):
            listener(str(state))

    def wait_connected(self, timeout: float) -> bool:
        return self._connected.wait(timeout)

    # -- calls ---------------------------------------------------------------------------------

    def _deadline(self, timeout: float | None) -> Deadline:
        return Deadline(self.timeout if timeout is None else timeout)

    def _await(self, deadline: Deadline, what: str) -> None:
        while not self._connected.wait(min(0.1, deadline.remaining())):
            self._raise_if_rejected()
            if deadline.expired:
                raise StoreUnavailable(
                    f"ZooKeeper at {self.hosts} unreachable: no connection within "
                    f"{deadline.seconds:g} s ({what})"
                )

    def _read(self, what: str, call: Callable[[], Any], timeout: float | None) -> Any:
        """Run a read, retrying on connection loss until the deadline."""
        deadline = self._deadline(timeout)

        def read_once() -> Any:
            self._await(deadline, what)
            try:
                return call().get(timeout=deadline.remaining())
            except _OUTAGES as exc:
                raise TryAgain(_name(exc)) from exc
            except KazooException as exc:
                raise self._translate(exc, what) from exc

        return within(deadline.seconds).call(
            read_once, what=f"ZooKeeper read ({what})", error=StoreUnavailable
        )

    def _write(self, what: str, call: Callable[[], Any], timeout: float | None) -> Any:
        """Run a write once; a lost answer raises :class:`OutcomeUnknown`."""
        deadline = self._deadline(timeout)
        self._await(deadline, what)
        try:
            return call().get(timeout=deadline.remaining())
        except _OUTAGES as exc:
            raise OutcomeUnknown(
                f"ZooKeeper write {what}: connection failed before the answer ({_name(exc)})"
            ) from exc
        except KazooException as exc:
            raise self._translate(exc, what) from exc

    def get(
        self, path: str, *, watch: Callable[..., Any] | None = None, timeout: float | None = None
    ) -> tuple[bytes, ZnodeStat]:
        """Data and stat of ``path``; :class:`HandleNotFound` if it does not exist."""
        data, stat = self._read(
            f"get {path}", lambda: self._client.get_async(path, watch=watch), timeout
        )
        return data, stat

    def sync(self, path: str, *, timeout: float | None = None) -> None:
        """Make the server this session reads from catch up with the ensemble's leader, so
        that the reads that follow see every write committed before this call (a follower
        may lag; a session's own writes it sees anyway)."""
        self._read(f"sync {path}", lambda: self._client.sync_async(path), timeout)

    def get_if_exists(
        self, path: str, *, timeout: float | None = None
    ) -> tuple[bytes, ZnodeStat] | None:
        """Data and stat of ``path``, ``None`` if it does not exist (an outage still raises)."""
        try:
            return self.get(path, timeout=timeout)
        except HandleNotFound:
            return None

    def exists(
        self, path: str, *, watch: Callable[..., Any] | None = None, timeout: float | None = None
    ) -> ZnodeStat | None:
        stat: ZnodeStat | None = self._read(
            f"exists {path}", lambda: self._client.exists_async(path, watch=watch), timeout
        )
        return stat

    def children(
        self, path: str, *, watch: Callable[..., Any] | None = None, timeout: float | None = None
    ) -> list[str]:
        names: list[str] = self._read(
            f"children {path}",
            lambda: self._client.get_children_async(path, watch=watch),
            timeout,
        )
        return names

    def children_and_stat(
        self, path: str, *, watch: Callable[..., Any] | None = None, timeout: float | None = None
    ) -> tuple[list[str], ZnodeStat]:
        """The children of ``path`` and its stat (``cversion`` counts every child created or
        deleted, so that a child deleted and created again is seen as a change)."""
        names, stat = self._read(
            f"children {path}",
            lambda: self._client.get_children_async(path, watch=watch, include_data=True),
            timeout,
        )
        return list(names), stat

    def get_acls(self, path: str, *, timeout: float | None = None) -> tuple[list[ACL], ZnodeStat]:
        """The ACL and stat of ``path``; :class:`HandleNotFound` if it does not exist."""
        acls, stat = self._read(
            f"get ACL of {path}", lambda: self._client.get_acls_async(path), timeout
        )
        return list(acls), stat

    def set_acls(
        self, path: str, acls: Sequence[ACL], *, version: int = -1, timeout: float | None = None
    ) -> ZnodeStat:
        """Replace the ACL of ``path`` (``version`` is the ACL version, ``stat.aversion``)."""
        stat: ZnodeStat = self._write(
            f"set ACL of {path}",
            lambda: self._client.set_acls_async(path, list(acls), version),
            timeout,
        )
        return stat

    def get_many(
        self,
        paths: Sequence[str],
        *,
        watches: Mapping[str, Callable[..., Any]] | None = None,
        timeout: float | None = None,
    ) -> list[tuple[bytes, ZnodeStat] | None]:
        """Pipelined reads of many nodes: one entry per path, ``None`` where it does not exist;
        ``watches`` sets a one-shot watch on the paths it names (on those that exist: a read
        of an absent node sets none)."""
        found = watches or {}
        return self._pipelined(
            paths, lambda path: self._client.get_async(path, watch=found.get(path)), timeout
        )

    def get_many_or_denied(
        self,
        paths: Sequence[str],
        *,
        watches: Mapping[str, Callable[..., Any]] | None = None,
        timeout: float | None = None,
    ) -> list[tuple[bytes, ZnodeStat] | AccessDenied | None]:
        """:meth:`get_many`, where a node our identity may not read is its
        :class:`AccessDenied` in place of raising: a job's identity may create nodes under its
        own with an ACL of its choosing, and one such node must not hide the others (a reader of
        many jobs' records goes on; invariant 6)."""
        found = watches or {}
        return self._pipelined(
            paths,
            lambda path: self._client.get_async(path, watch=found.get(path)),
            timeout,
            denied=True,
        )

    def exists_many(
        self,
        paths: Sequence[str],
        *,
        watch: Callable[..., Any] | None = None,
        timeout: float | None = None,
    ) -> list[ZnodeStat | None]:
        """Pipelined stats of many nodes (``None`` where absent); ``watch`` is set on each."""
        return self._pipelined(
            paths, lambda path: self._client.exists_async(path, watch=watch), timeout
        )

    def watch_many(
        self, watches: Mapping[str, Callable[..., Any]], *, timeout: float | None = None
    ) -> list[ZnodeStat | None]:
        """Pipelined stats of many nodes, each with its own one-shot watch (set whether the
        node exists or not: its creation fires it too). A node our identity may not read (a
        server of 3.9 checks READ on ``exists``: one a job made for itself) sets no watch and
        is ``None``: it must not keep the others' watches from being set."""
        paths = list(watches)
        found = self._pipelined(
            paths,
            lambda path: self._client.exists_async(path, watch=watches[path]),
            timeout,
            denied=True,
        )
        return [None if isinstance(stat, AccessDenied) else stat for stat in found]

    def forget_watches(
        self, watches: Mapping[str, Callable[..., Any]], *, children: bool = False
    ) -> int:
        """Take back one-shot watches this session set and no longer wants (``path`` to the
        watcher given when it was set; ``children``: child watches, else data and exists
        watches). Returns how many were still set.

        kazoo has no way to take a watch back: it keeps every watcher until its node changes,
        and a watch on a node that is never made again (a finished job's cancel node) is kept
        for the life of the session, with whatever the watcher holds. Here the watcher is
        dropped from kazoo's table and, once no other watcher of this session waits on the
        path, ZooKeeper is told to drop its side (``removeWatches``, ZooKeeper 3.5+), without
        waiting for its answer: a watch it still fires finds nobody to tell. Never raises;
        one path's watches are best forgotten by the one owner that set them (a watcher another
        part of the process sets on the same path at the same moment may lose its server side).
        """
        client = self._client
        table = client._child_watchers if children else client._data_watchers
        taken, unwatched = 0, []
        for path, watcher in watches.items():
            full = _prefix_root(client.chroot, path)
            found = table.get(full)
            if found is None or watcher not in found:
                continue  # fired (or reset with the session) already
            taken += 1
            # A new set, never a change in place: kazoo's thread may be iterating this one.
            rest = found - {watcher}
            if rest:
                table[full] = rest
            else:
                table.pop(full, None)
                unwatched.append(full)
        kind = _CHILD_WATCHES if children else _DATA_WATCHES
        for full in unwatched:
            try:
                client._call(_RemoveWatches(full, kind), client.handler.async_result())
            except Exception as exc:  # noqa: BLE001 - the server's side only: it fires once
                logger.debug("watch on %s not removed from the server: %s", full, exc)
        return taken

    def children_many(
        self, paths: Sequence[str], *, timeout: float | None = None, denied: bool = False
    ) -> list[list[str] | None]:
        """Pipelined listings (``None`` where absent); with ``denied``, a node our identity may
        not list is listed as empty (as :meth:`get_many_or_denied`, for readers of many
        jobs)."""
        found = self._pipelined(paths, self._client.get_children_async, timeout, denied=denied)
        return [[] if isinstance(item, AccessDenied) else item for item in found]

    def _pipelined(
        self,
        paths: Sequence[str],
        start: Callable[[str], Any],
        timeout: float | None,
        *,
        denied: bool = False,
    ) -> list[Any]:
        """Pipelined calls in windows of :data:`PIPELINE_WINDOW`: each window has the deadline of
        one call, so that a read of many nodes is bounded per window, not as a whole."""
        results: list[Any] = []
        for first in range(0, len(paths), PIPELINE_WINDOW):
            window = paths[first : first + PIPELINE_WINDOW]
            results += self._pipelined_window(window, start, timeout, denied=denied)
        return results

    def _pipelined_window(
        self,
        paths: Sequence[str],
        start: Callable[[str], Any],
        timeout: float | None,
        *,
        denied: bool = False,
    ) -> list[Any]:
        deadline = self._deadline(timeout)
        results: list[Any] = [None] * len(paths)
        todo = list(range(len(paths)))
        while todo:
            self._await(deadline, f"read of {len(todo)} nodes")
            pending = [(i, start(paths[i])) for i in todo]
            todo = []
            for i, async_result in pending:
                try:
                    results[i] = async_result.get(timeout=deadline.remaining())
                except NoNodeError:
                    results[i] = None
                except NoAuthError as exc:
                    if not denied:
                        raise self._translate(exc, f"get {paths[i]}") from exc
                    results[i] = self._translate(exc, f"get {paths[i]}")
                except _OUTAGES as exc:
                    if deadline.expired:
                        raise StoreUnavailable(
                            f"ZooKeeper read of {len(paths)} nodes failed: {_name(exc)}"
                        ) from exc
                    todo.append(i)
                except KazooException as exc:
                    raise self._translate(exc, f"get {paths[i]}") from exc
        return results

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        timeout: float | None = None,
    ) -> str:
        _check_size(path, data)
        created: str = self._write(
            f"create {path}",
            lambda: self._client.create_async(
                path,
                data,
                acl=self._acl(path),
                ephemeral=ephemeral,
                sequence=sequence,
                makepath=makepath,
            ),
            timeout,
        )
        return created

    def create_many(
        self, paths: Sequence[str], *, ephemeral: bool = False, timeout: float | None = None
    ) -> list[ZkStoreError | None]:
        """Pipelined creates of empty nodes: per path ``None`` (created), or the
        :class:`HandleExists` / :class:`HandleNotFound` it met. Outages raise."""
        deadline = self._deadline(timeout)
        self._await(deadline, f"create of {len(paths)} nodes")
        pending = [
            self._client.create_async(p, b"", acl=self._acl(p), ephemeral=ephemeral) for p in paths
        ]
        errors: list[ZkStoreError | None] = []
        for path, async_result in zip(paths, pending, strict=True):
            try:
                async_result.get(timeout=deadline.remaining())
                errors.append(None)
            except (NodeExistsError, NoNodeError) as exc:
                errors.append(self._translate(exc, f"create {path}", path=path))
            except _OUTAGES as exc:
                raise OutcomeUnknown(f"create of {path} interrupted: {_name(exc)}") from exc
            except KazooException as exc:
                raise self._translate(exc, f"create {path}") from exc
        return errors

    def ensure_path(self, path: str, *, timeout: float | None = None) -> None:
        """Create ``path`` and its parents if missing; idempotent, so retried on connection loss."""
        deadline = self._deadline(timeout)
        within(deadline.seconds).call(
            lambda: self._write(
                f"ensure {path}",
                lambda: self._client.ensure_path_async(path, acl=self._acl(path)),
                deadline.remaining(),
            ),
            what=f"ensure {path}",
            retry_on=(OutcomeUnknown,),
            error=OutcomeUnknown,
        )

    def set(
        self, path: str, data: bytes, *, version: int = -1, timeout: float | None = None
    ) -> ZnodeStat:
        _check_size(path, data)
        stat: ZnodeStat = self._write(
            f"set {path}", lambda: self._client.set_async(path, data, version), timeout
        )
        return stat

    def delete(self, path: str, *, version: int = -1, timeout: float | None = None) -> None:
        self._write(f"delete {path}", lambda: self._client.delete_async(path, version), timeout)

    def delete_tree(
        self,
        path: str,
        *,
        fence: Fence | None = None,
        shallow: bool = False,
        also: Sequence[str] = (),
        timeout: float | None = None,
    ) -> bool:
        """Delete ``path`` and everything under it, deepest first; False if it was already gone.

        ``also``: nodes elsewhere that go with the tree (a job's quota: children first), in the
        shallow transaction when it applies, else each deleted after the tree if it exists.

        The tree is listed a level at a time (pipelined), then deleted deepest first in
        transactions of up to :data:`TREE_BATCH` deletes, each carrying ``fence``'s guards (a
        job's records: one transaction, one write to the log). A transaction that finds the
        tree changed since the listing (a node gone already, a child added) changes nothing,
        and its nodes are deleted one transaction each, as they are found. A writer whose
        fence is lost deletes nothing more (the guard's error is raised). Idempotent: safe to
        call again after any failure. Raises :class:`NotEmpty` if somebody adds a child
        meanwhile.

        ``shallow``: the tree is expected one level deep (a job's records), so ``path``'s
        children are deleted with it in one transaction without a listing of each; one that
        has children of its own makes that transaction change nothing (ZooKeeper refuses to
        delete it), and the tree is then listed and deleted as above.
        """
        deadline = self._deadline(timeout)
        levels: list[list[str]] = [[path]]
        if shallow:
            (children,) = self.children_many([path], timeout=deadline.remaining())
            if children is None:
                self._delete_present(also, fence, deadline)
                return False
            nodes = [f"{path}/{child}" for child in children]
            if len(nodes) + len(also) < TREE_BATCH:
                ops = [Delete(node) for node in (*nodes, path, *also)]
                try:
                    self.commit(ops, fence=fence, timeout=deadline.remaining())
                    return True
                except (HandleNotFound, NotEmpty):
                    pass  # deeper than expected, or changed meanwhile: listed level by level
        while levels[-1]:
            # a node we may not list (made by a job's identity for itself) is deleted as a
            # leaf: its parent's right is enough for that; one with children then fails,
            # NotEmpty, as it must (nothing can delete what is under it but its maker)
            found = self.children_many(levels[-1], timeout=deadline.remaining(), denied=True)
            if len(levels) == 1 and found[0] is None:
                self._delete_present(also, fence, deadline)
                return False
            levels.append(
                [
                    f"{parent}/{child}"
                    for parent, kids in zip(levels[-1], found, strict=True)
                    if kids
                    for child in kids
                ]
            )
        deepest_first = [node for level in reversed(levels) for node in level]
        existed = False
        for first in range(0, len(deepest_first), TREE_BATCH):
            batch = deepest_first[first : first + TREE_BATCH]
            try:
                self.commit(
                    [Delete(node) for node in batch], fence=fence, timeout=deadline.remaining()
                )
                existed = True
                continue
            except (HandleNotFound, NotEmpty):
                pass  # changed since the listing: node by node (in order, so children first)
            errors = self.commit_many(
                [[Delete(node)] for node in batch], fence=fence, timeout=deadline.remaining()
            )
            for error in errors:
                if error is None:
                    existed = True
                elif not isinstance(error, HandleNotFound) or error.path not in batch:
                    raise error
        self._delete_present(also, fence, deadline)
        return existed

    def _delete_present(self, paths: Sequence[str], fence: Fence | None, deadline: Any) -> None:
        """Delete each of ``paths`` that exists, in order (pipelined, each its own write)."""
        if not paths:
            return
        errors = self.commit_many(
            [[Delete(node)] for node in paths], fence=fence, timeout=deadline.remaining()
        )
        for error in errors:
            if error is not None and not isinstance(error, HandleNotFound):
                raise error

    def ensure_fence(self, fence: Fence | None, *, timeout: float | None = None) -> None:
        """Raise the fence's error unless its guards hold now (one transaction of them alone).

        For a change outside ZooKeeper (a delete in storage), which no transaction can make
        conditional: checked just before, it stops a deposed writer from starting one.
        """
        if fence is not None:
            self.commit([], fence=fence, timeout=timeout)

    def commit(
        self, ops: Iterable[Op], *, fence: Fence | None = None, timeout: float | None = None
    ) -> list[Any]:
        """Apply ``fence`` guards and ``ops`` atomically, or raise and apply nothing.

        Returns kazoo's per-op results (created paths, stats). Raises the guard's error if a fence
        op failed, else the error of the failing op (:class:`HandleExists`,
        :class:`HandleNotFound`, :class:`VersionConflict`, :class:`NotEmpty`) with its ``path``,
        or :class:`OutcomeUnknown` if the connection failed before the answer.
        """
        guards = fence.ops if fence else ()
        all_ops = [*guards, *ops]
        transaction = self._transaction(all_ops)
        results: list[Any] = self._write(
            f"transaction of {len(all_ops)} ops", transaction.commit_async, timeout
        )
        error = _transaction_error(results, all_ops, fence, self.identity)
        if error is not None:
            raise error
        return results[len(guards) :]

    def commit_many(
        self,
        transactions: Sequence[Sequence[Op]],
        *,
        fence: Fence | None = None,
        timeout: float | None = None,
    ) -> list[ZkStoreError | None]:
        """Commit many independent transactions, pipelined, each with ``fence``'s guards.

        Returns, per transaction, ``None`` (applied) or the error :meth:`commit` would have raised
        for it (nothing of it applied). An outage raises :class:`OutcomeUnknown`: transactions
        whose answer was lost may or may not have been applied.
        """
        deadline = self._deadline(timeout)
        self._await(deadline, f"{len(transactions)} transactions")
        guards = fence.ops if fence else ()
        pending = []
        for ops in transactions:
            all_ops = [*guards, *ops]
            pending.append((all_ops, self._transaction(all_ops).commit_async()))
        errors: list[ZkStoreError | None] = []
        for all_ops, async_result in pending:
            try:
                results = async_result.get(timeout=deadline.remaining())
            except _OUTAGES as exc:
                raise OutcomeUnknown(f"pipelined transactions interrupted: {_name(exc)}") from exc
            except KazooException as exc:
                raise self._translate(exc, "pipelined transaction") from exc
            errors.append(_transaction_error(results, all_ops, fence, self.identity))
        return errors

    def _transaction(self, all_ops: Sequence[Op]) -> Any:
        size = 0
        transaction = self._client.transaction()
        for op in all_ops:
            if isinstance(op, Check):
                transaction.check(op.path, op.version)
            elif isinstance(op, Create):
                size += len(op.data)
                transaction.create(
                    op.path, op.data, acl=self._acl(op.path, op.owner), ephemeral=op.ephemeral
                )
            elif isinstance(op, SetData):
                size += len(op.data)
                transaction.set_data(op.path, op.data, op.version)
            else:
                transaction.delete(op.path, op.version)
        if size > MAX_ZNODE_BYTES:
            raise TooLarge(f"transaction carries {size} bytes, over {MAX_ZNODE_BYTES}")
        return transaction

    def _translate(self, exc: BaseException, what: str, *, path: str | None = None) -> ZkStoreError:
        return _translate(exc, what, path=path, identity=self.identity)


def _transaction_error(
    results: list[Any], all_ops: Sequence[Op], fence: Fence | None, identity: str = ""
) -> ZkStoreError | None:
    """The error of a committed transaction, or None if it was applied (every op inspected)."""
    for index, result in enumerate(results):
        if not isinstance(result, Exception) or isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            continue
        fence_error = fence.failure(index) if fence is not None else None
        if fence_error is not None:
            return fence_error
        op = all_ops[index]
        what = f"{type(op).__name__.lower()} {op.path}"
        return _translate(result, what, path=op.path, identity=identity)
    if any(isinstance(r, Exception) for r in results):
        return StoreUnavailable(f"transaction failed without a cause: {results!r}")
    return None


def _check_size(path: str, data: bytes) -> None:
    if len(data) > MAX_ZNODE_BYTES:
        raise TooLarge(f"{path}: {len(data)} bytes is over the {MAX_ZNODE_BYTES}-byte limit")


def _name(exc: BaseException) -> str:
    return type(exc).__name__ + (f": {exc}" if str(exc) else "")


def _translate(
    exc: BaseException, what: str, *, path: str | None = None, identity: str = ""
) -> ZkStoreError:
    """Map one kazoo error to the zkstore error of the same meaning."""
    if isinstance(exc, NoAuthError | AuthFailedError):
        why = "authentication failed" if isinstance(exc, AuthFailedError) else "no rights"
        return AccessDenied(
            f"ZooKeeper denied {what} to {identity or 'this client'} ({why}: a wrong password, "
            f"or an identity the node's ACL does not allow; see {ENV_AUTH})",
            path=path,
        )
    if isinstance(exc, NoNodeError):
        return HandleNotFound(f"{what}: no such node", path=path)
    if isinstance(exc, NodeExistsError):
        return HandleExists(f"{what}: node exists", path=path)
    if isinstance(exc, BadVersionError):
        return VersionConflict(f"{what}: version changed", path=path)
    if isinstance(exc, NotEmptyError):
        return NotEmpty(f"{what}: node has children", path=path)
    if isinstance(exc, QuotaExceededError):
        return QuotaExceeded(
            f"ZooKeeper refused {what}: over the quota of the job's nodes (the count or bytes "
            "the leader set for R/jobs/<job>; docs/operating.md)"
        )
    if isinstance(exc, _OUTAGES):
        return OutcomeUnknown(f"{what}: {_name(exc)}")
    return StoreUnavailable(f"ZooKeeper refused {what}: {_name(exc)}")


def is_own_ephemeral(stat: ZnodeStat | None, zk: ZooKeeper) -> bool:
    """True if ``stat`` is of an ephemeral node owned by ``zk``'s current session."""
    return stat is not None and stat.ephemeralOwner != 0 and stat.ephemeralOwner == zk.session_id
