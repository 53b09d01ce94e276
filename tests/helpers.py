"""Shared helpers of the test suite: servers, storage backends, waiting on conditions."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import importlib
import json
import multiprocessing
import multiprocessing.context
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kazoo.security import make_digest_acl_credential

from recovery.dev.localcluster import DaemonProcess as LocalDaemon
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from zkstore.admin.lingering import find_lingering
from zkstore.cluster import Cluster
from zkstore.config import TEST_MINIMUMS_ENV, LoweredMinimums, StoreConfig, ZkAuth
from zkstore.jobs.definition import JobDefinition
from zkstore.payloads.storage import StateStorage
from zkstore.records.handle import Handle
from zkstore.records.job_records import JobStatus
from zkstore.records.job_states import CLEAN, QUARANTINED, STARTING
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.zk import ZooKeeper

if TYPE_CHECKING:
    from recovery.client.api import Client
    from recovery.leader.grant import LeaderProcess
    from tests.servers import S3Server
    from zkstore.records.result_records import QuarantineEntry

#: The session timeout of the end-to-end tests' daemons and drivers.
SESSION_TIMEOUT = 3.0
#: The session of a test's own hands (the ``cluster`` fixtures, a stand-in driver): what it
#: holds lives as long as the test says, whatever the load; nothing a test proves is about its
#: expiry (a test about expiry expires a session of its own). At the harness's 4 s, such
#: sessions expired under the soak's two busy loops, and their nodes went with them.
HANDS_SESSION = 30.0
#: The product minimums the suite lowers (``zkstore.config.TEST_MINIMUMS_ENV``; refused unless
#: ZooKeeper is on loopback): a test about a limit asks for seconds where a user may ask for no
#: less than half a minute. In the environment of the daemons and commands of the tests that
#: ask (:func:`lowered_minimums`); every other test runs the product's minimums.
LOWERED_MINIMUMS = LoweredMinimums(progress_timeout=2.0, heartbeat_interval=0.5)


def lowered_minimums(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (this process's environment by default) with :data:`LOWERED_MINIMUMS`: for a
    :class:`LocalCluster`'s ``extra_env`` or a script's ``env``."""
    given = ",".join(f"{k}={v:g}" for k, v in LOWERED_MINIMUMS.lowered().items())
    return {**(os.environ if env is None else env), TEST_MINIMUMS_ENV: given}


def leader_turn(leader: LeaderProcess, job_ids: Iterable[str]) -> None:
    """What the daemon's turns do with events about ``job_ids``: the leader looks at them,
    then cleans up every job it finished (the daemon's loop does so at the end of its turns,
    after its member's launches)."""
    leader.reconcile(job_ids)
    while leader.cleanups_pending:
        leader.clean_up_finished()


def connected(hosts: str, *, session_timeout: float, timeout: float) -> ZooKeeper:
    """A session whose operations have ``timeout``, connected within :data:`HANDS_SESSION`: a
    test that bounds what it does once connected does not bound its first connect, which on a
    loaded machine took over the 1 s such a test gives its operations (a fresh session is an
    fsync, on a server whose JVM has just started)."""
    zk = ZooKeeper(hosts, session_timeout=session_timeout, timeout=timeout)
    return zk.start(timeout=HANDS_SESSION)


def hands_client(config: StoreConfig) -> Client:
    """The test's own :class:`Client` of ``config``'s cluster, on a session of
    :data:`HANDS_SESSION`: at the harness's 4 s, kazoo dropped its connection after a stall of
    two thirds of that, and the soak saw a ``jobs wait`` find no connection within its 4 s. The
    daemons and drivers keep ``config``'s timeouts."""
    from recovery.client.api import Client

    return Client(config.with_changes(session_timeout=HANDS_SESSION))


def examples(full: int) -> int:
    """How many examples a property test runs: a quarter of ``full`` (at least 10) in
    ``make test``, all of them under ``make test-deep`` (``ZKSTORE_DEEP=1``), which ``.ci/run``
    runs after ``make test``: every property is checked at full size on every submission."""
    if os.environ.get("ZKSTORE_DEEP") == "1":
        return full
    return max(10, full // 4)


REPO = Path(__file__).resolve().parent.parent
#: where the installed ``zkstore`` script of this environment is
BIN = Path(sys.executable).parent

T = TypeVar("T")


#: The password of the tests' ZooKeeper identity ``alice``, and a monitoring identity with read
#: rights (``ZKSTORE_ZK_READ_ACL``), for the ACL tests.
SECRET = "s3cret-Pa55word"
MONITOR_SECRET = "m0nitor-Pa55"
MONITOR_ID = f"digest:{make_digest_acl_credential('monitor', MONITOR_SECRET)}"


def session(config: StoreConfig, auth: str | None) -> ZooKeeper:
    """A ZooKeeper session on ``config``'s servers with credentials ``auth`` (``user:password``)."""
    parsed = ZkAuth.parse(auth) if auth else None
    return ZooKeeper(config.zk_hosts, timeout=5, auth=parsed).start()


#: The cluster signing key of the job-key tests.
KEY = b"a-cluster-signing-key-of-some-length"


def legacy_signature(key: str, sha256: str, size: int) -> str:
    """A signature as zkstore made them before job keys: with the cluster key itself."""
    message = f"zkstore-payload-v1\n{key}\n{sha256}\n{size}".encode()
    return hmac.new(KEY, message, hashlib.sha256).hexdigest()


def make_legacy(cluster: Cluster, node: str) -> Handle:
    """Rewrite the handle at ``node`` as zkstore wrote it before job keys."""
    data, stat = cluster.zk.get(node)
    handle = Handle.from_znode(data, stat, node)
    key = cluster.storage.key_of(handle.uri)
    legacy = replace(handle, hmac=legacy_signature(key, handle.sha256, handle.size))
    cluster.zk.set(node, legacy.to_bytes(), version=stat.version)
    return legacy


def run_daemon(config: StoreConfig, work: Path, master: str = "local[2]") -> LocalCluster:
    """One daemon ("d1") on ``config``'s cluster with Spark master ``master``, started."""
    local = LocalCluster(config, work, spark_master=master, restart_backoff=0.5)
    local.start_daemon("d1")
    return local


def make_storage(kind: str, tmp_path: Any, s3: S3Server | None, **kwargs: Any) -> StateStorage:
    if kind == "file":
        return StateStorage(f"file://{tmp_path}/storage", **kwargs)
    if kind == "memory":
        return StateStorage(f"memory://t{uuid.uuid4().hex[:12]}", **kwargs)
    assert s3 is not None
    return StateStorage(f"s3://{s3.new_bucket()}/zk", s3.options(), **kwargs)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@contextlib.contextmanager
def requests_sent(zk: ZooKeeper, *, paths: bool = False) -> Iterator[list[str]]:
    """The kinds of the requests ``zk``'s kazoo client sends inside the block, in order
    (``GetData``, ``Exists``, ...), as they reach its ``_call``; with ``paths``, each with the
    path it is about (``GetData /r/results/j``; a transaction with those of its operations,
    comma-separated)."""
    client = zk.kazoo
    sent: list[str] = []
    real = client._call

    def counted(request: object, async_object: object) -> object:
        path = getattr(request, "path", None) if paths else None
        operations = getattr(request, "operations", None) if paths else None
        if operations:
            path = ",".join(str(getattr(op, "path", "")) for op in operations)
        kind = type(request).__name__
        sent.append(f"{kind} {path}" if isinstance(path, str) else kind)
        return real(request, async_object)

    client._call = counted
    try:
        yield sent
    finally:
        client._call = real


def pause(pid: int, timeout: float) -> None:
    """SIGSTOP ``pid`` and return once every thread of it has stopped: ``kill`` returns before
    the stop takes effect, and a JVM's threads stop one by one, so a test that acts right after
    the signal can be answered by a server it believes paused."""
    os.kill(pid, signal.SIGSTOP)

    def stopped() -> bool:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, IndexError):  # a thread that ended meanwhile
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        return bool(states) and all(state in {"T", "t"} for state in states)

    wait_for(stopped, timeout, interval=0.005, what=f"every thread of {pid} stopped")


def wait_for(
    condition: Callable[[], T], timeout: float = 10.0, interval: float = 0.05, what: str = ""
) -> T:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(interval)


def written_json(path: Path, timeout: float, what: str = "") -> Any:
    """The JSON a job writes to ``path`` once it is all there: a file appears (empty) a moment
    before its writer's one ``write``, so its existence alone says nothing of its content."""

    def parsed() -> Any:
        try:
            return json.loads(path.read_text()) or None
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    return wait_for(parsed, timeout=timeout, what=what or f"{path} written")


def holds_for(
    condition: Callable[[], object], seconds: float, interval: float = 0.05, what: str = ""
) -> None:
    """Assert that ``condition`` stays truthy for ``seconds`` (an invariant over a period, such
    as "the lease never runs out while ZooKeeper answers"), checked every ``interval``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert condition(), f"{what or condition} stopped holding"
        time.sleep(interval)


def wait_quarantined(client: Client, job_id: str, timeout: float = 60.0) -> QuarantineEntry:
    """Wait until the leader has put ``job_id`` in quarantine; its quarantine entry."""
    what = f"{job_id} in quarantine"
    wait_for(lambda: client.status(job_id).state == QUARANTINED, timeout=timeout, what=what)
    entry = client.status(job_id).quarantine
    assert entry is not None, f"{job_id} is QUARANTINED without an entry"
    return entry


def plant(zk: ZooKeeper, path: str, data: bytes) -> None:
    """What a hostile writer does: ``data`` at ``path``, whatever was there, with the raw kazoo
    client (zkstore's own refuses what it would never write). The leader may create or delete
    the node meanwhile: then it plants again."""
    from kazoo.exceptions import NodeExistsError, NoNodeError

    client = zk.kazoo
    for _ in range(5):
        try:
            if client.exists(path) is None:
                client.create(path, data, makepath=True)
            else:
                client.set(path, data)
            return
        except (NodeExistsError, NoNodeError):
            continue
    raise AssertionError(f"could not plant {path}")


def quarantined(cluster: Cluster, job_id: str, *, checkpoint: bool = True) -> None:
    """A submitted job (with a status, a checkpoint) that the leader moved to quarantine."""
    cluster.jobs.submit(JobDefinition.for_function(job_id, jobs.noop))
    status = JobStatus(version=None, state=STARTING, attempt=2, failures=1, updated=utc_moment())
    cluster.state.put_status(job_id, status, expected_version=None)
    if checkpoint:
        store = cluster.checkpoints(job_id)
        store.add({"step": 1})
        store.handles.release_all()  # as the driver's session would on its way out
    cluster.quarantine.move_in(job_id, "CorruptPayload: sha256 does not match its handle")


def nothing_of(cluster: Cluster, job_id: str) -> None:
    """The job's only trace is its CLEAN result: no entry, records, payload, index, lingering."""
    layout = cluster.layout
    for path in (
        layout.job_handle(job_id),
        layout.job_dir(job_id),
        layout.quarantine_entry(job_id),
        layout.cleanup_entry(job_id),
    ):
        assert cluster.zk.exists(path) is None, path
    assert cluster.storage.list(cluster.storage_layout.job(job_id)) == []
    assert [f for f in find_lingering(cluster, min_age=0) if f.job_id == job_id] == []
    result = cluster.results.get(job_id)
    assert result is not None and result.state == CLEAN


def expire_session(zk: ZooKeeper) -> None:
    """Expire ``zk``'s session on the server, as a partition longer than the timeout would.

    A second client joins the same session and closes it; the first then sees SUSPENDED, LOST and
    (kazoo reconnects by itself) CONNECTED with a new session. Joining takes the session's
    connection from ``zk``, which reconnects at once and may take it back before the joiner
    has closed the session (kazoo's ``start`` then says "Connection time-out"; seen once in a
    full run): the joiner tries again until the session is gone.
    """
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    old, joined = zk.session_id, zk.client_id

    def closed_by_a_joiner() -> bool:
        other = KazooClient(zk.hosts, client_id=joined, timeout=zk.session_timeout)
        try:
            other.start(timeout=zk.session_timeout)
            other.stop()  # closes the session, if the joiner still holds its connection
        except KazooTimeoutError:  # taken back (or gone already)
            other.stop()
        other.close()
        with contextlib.suppress(AssertionError):  # still there: join again
            wait_for(lambda: zk.session_id != old, zk.session_timeout, what="session closed")
        return zk.session_id != old

    wait_for(closed_by_a_joiner, timeout=60, interval=0.1, what=f"session {old} closed")
    wait_for(lambda: zk.connected and zk.session_id != old, timeout=20, what="new session")


def assert_nothing_left(config: StoreConfig, job_id: str) -> None:
    """The job's only traces are its CLEAN result and its driver logs, kept for their retention
    (recorded in the result): no handle, no records, no other payload."""
    with Cluster.open(config) as cluster:

        def clean() -> bool:
            result = cluster.results.get(job_id)
            return result is not None and result.state == "CLEAN"

        # A waiter learns the outcome once the result is recorded DIRTY; cleanup follows.
        wait_for(clean, timeout=60, what=f"{job_id} cleaned up")
        assert cluster.zk.exists(cluster.layout.job_handle(job_id)) is None
        assert cluster.zk.exists(cluster.layout.job_dir(job_id)) is None
        logs = cluster.storage_layout.logs(job_id)
        left = cluster.storage.list(cluster.storage_layout.job(job_id))
        others = [o.uri for o in left if not cluster.storage.is_under(o.uri, logs)]
        assert others == [], others
        result = cluster.results.get(job_id)
        assert result is not None and result.state == "CLEAN"
        assert result.logs_until is not None


def step_runs(out: Path) -> dict[int, list[int]]:
    """step -> attempts that started it (from the marks of :func:`tests.jobs.steps`)."""
    runs: dict[int, list[int]] = {}
    for name in jobs.read_marks(str(out)):
        if name.startswith("step-"):
            _, step, _, attempt = name.split("-")
            runs.setdefault(int(step), []).append(int(attempt))
    return runs


#: The modules of the crash children (and what they import), imported once by the fork server.
CRASH_MODULES = (
    "tests.crash_child",
    "tests.crash_cluster",
    "tests.crash_artifacts",
    "tests.crash_shipper",
)


@functools.cache
def _fork_server() -> multiprocessing.context.ForkServerContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(CRASH_MODULES))
    return context


def run_child(module: str, spec: dict[str, Any], timeout: float = 60.0) -> int:
    """Run ``module.main(spec)`` in a child process; its exit code.

    The child is forked from a fork server (one per test process) that has already imported
    the crash modules and everything they import, so a crash costs a fork, not a new
    interpreter; and it is forked from that single-threaded server, never from the test process
    with its ZooKeeper and S3 threads.
    """
    child = _fork_server().Process(target=_child_main, args=(module, spec), daemon=True)
    child.start()
    child.join(timeout)
    if child.exitcode is None:
        child.kill()
        child.join()
        raise AssertionError(f"{module} did not end within {timeout} s")
    return child.exitcode


def _child_main(module: str, spec: dict[str, Any]) -> None:
    sys.exit(importlib.import_module(module).main(spec))


def crash(
    config: StoreConfig,
    op: str,
    job: str,
    step: str,
    *,
    module: str = "tests.crash_cluster",
    **extra: Any,
) -> None:
    """Run ``op`` of ``module`` (:mod:`tests.crash_cluster`, :mod:`tests.crash_artifacts`) in
    a child process that must die at ``step``; ``extra`` goes into its spec as it is."""
    from tests.crash_cluster import CRASHED

    spec = {"config": config.to_json(), "op": op, "job": job, "step": step, **extra}
    assert run_child(module, spec) == CRASHED, f"the child did not die at {step}"


def http_status(daemon: LocalDaemon, path: str) -> int | None:
    """The status of ``GET path`` on a daemon serving HTTP, or None while it does not listen
    (yet, or any more)."""
    import urllib.error
    import urllib.request

    assert daemon.url is not None, f"{daemon.daemon_id} serves no HTTP"
    try:
        with urllib.request.urlopen(daemon.url + path, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except urllib.error.URLError:
        return None


def print_logs(local: LocalCluster) -> None:
    """The daemons' and drivers' logs, for a test that failed (its directory goes with it)."""
    for daemon in local.daemons.values():
        print(f"----- {daemon.daemon_id} -----\n{daemon.log()[-6000:]}")
    for log in sorted((local.work_dir / "drivers").rglob("*.log")):
        print(f"----- {log} -----\n{log.read_text(errors='replace')[-3000:]}")
