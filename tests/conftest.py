"""Real servers for the tests: one embedded ZooKeeper and one moto S3 server per test process.

Every test gets its own ZooKeeper root (``/t<uuid>``) and its own storage root, so tests never see
each other's state. Server logs are printed when a test fails.

A test module lives in the folder of the concern it tests (``store/``, ``schedules/``,
``placement/``...: docs/testing.md "Where a test goes"), and its level is its module's marker
(:mod:`tests.levels`):

- ``unit``: pure code (decisions, parsers, configuration, page rendering): no server, no child
  process; milliseconds each (``make test-fast``). Enforced: a unit test that asks for a server
  fixture is a collection error, and one that starts a process fails.
- ``integration``: the store and the runtime's pieces in this process against real servers
  (ZooKeeper, S3, Spark in this process) and the children they start themselves.
- ``e2e``: the system as a user runs it: daemons and drivers as processes, the installed
  ``zkstore`` script, Spark applications, a ZooKeeper ensemble.

A test with no level mark or two, or a test module directly in ``tests/``, is a collection
error.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests import durations, machine_speed, spark_jvm, suite_cgroup, zk_jvm
from tests.fleets import Fleets, Shape, secured
from tests.helpers import (
    HANDS_SESSION,
    SECRET,
    SESSION_TIMEOUT,
    hands_client,
    http_status,
    make_storage,
    wait_for,
)
from tests.levels import refusal
from tests.servers import S3Server, Standalone
from tests.users import User, public_python, unix_users
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig, ZkAuth
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.lifecycle.destinations import ALLOWED_ENV
from zkstore.payloads.storage import StateStorage
from zkstore.schedules.schedule_limits import MIN_INTERVAL_ENV
from zkstore.zookeeper.zk import ZooKeeper

if TYPE_CHECKING:  # imported by the fixture that uses them, not by every test process
    from tests.stand_in_attempts import Attempts

# A suite started in the background of a shell (``nohup make test &``, .ci/soak) has SIGINT
# ignored, and an ignored disposition is inherited across exec: every command a test starts
# would ignore the test's Ctrl-C (SIGINT) too. The tests send it as a terminal does.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The suite's Spark drivers (this process's and every daemon's started from it) run short JVMs
# that map Spark's classes from an archive (tests/spark_jvm.py): far less CPU for each start.
os.environ.update(spark_jvm.driver_environment())
# ... and its ZooKeeper servers map theirs (tests/zk_jvm.py), wherever they are started.
os.environ.update(zk_jvm.environment())

# The suite's schedules fire every few seconds and its webhook receivers listen on loopback:
# the bounds a production cluster keeps (a 10 s minimum, global destinations only) are lowered
# for the commands and daemons it starts (recovery.dev.localcluster passes these on); the tests
# of the bounds set their own.
os.environ.update({MIN_INTERVAL_ENV: "1s", ALLOWED_ENV: "127.0.0.1"})


@pytest.fixture(autouse=True)
def no_processes_in_unit_tests(request: pytest.FixtureRequest) -> None:
    """A unit test runs pure code: a child process started from one is a failure."""
    if request.node.get_closest_marker("unit") is None:
        return
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a unit test started a process: mark its module integration or e2e")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse)


#: The suite's servers write each transaction to their log before they answer, as any server,
#: without forcing it to the disk (``forceSync=no``): a server killed or stopped loses nothing
#: (the kernel holds what it wrote), and no test crashes the machine. Measured
#: (docs/testing.md): a fifth less of the server's CPU for the same requests, and less wall.
SUITE_SERVER = ("forceSync=no",)


@pytest.fixture(scope="session")
def zk_server() -> Iterator[EmbeddedZooKeeper]:
    server = EmbeddedZooKeeper(extra_config=SUITE_SERVER).start()
    yield server
    server.close()


@pytest.fixture
def private_zk_server() -> Iterator[EmbeddedZooKeeper]:
    """A ZooKeeper server of the test's own, for tests that stop, pause or restart it."""
    with EmbeddedZooKeeper(extra_config=SUITE_SERVER) as server:
        yield server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture
def root() -> str:
    return f"/t{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def fleets(
    zk_server: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fleets]:
    """This test process's shared fleets (:mod:`tests.fleets`), started on first use."""
    made = Fleets(
        cluster_config(zk_server, "/fleets", "file:///unused").with_changes(
            session_timeout=SESSION_TIMEOUT
        ),
        tmp_path_factory.mktemp("fleets"),
    )
    yield made
    made.close()


def fleet_shape(request: pytest.FixtureRequest) -> Shape:
    """The daemons and options of the test's fleet: its ``shared_fleet`` marker's (its daemon
    ids as arguments, ``d1`` alone by default; ``restart_backoff``, ``session_timeout``,
    ``http``, ``args``, ``credentials``)."""
    marker = request.node.get_closest_marker("shared_fleet")
    if marker is None:
        return Shape()
    options = dict(marker.kwargs)
    if "args" in options:  # a shape is a key of the process's fleets: hashable
        options["args"] = tuple(options["args"])
    return Shape(tuple(marker.args) or ("d1",), **options)


def web_shape(request: pytest.FixtureRequest) -> Shape | None:
    """The shape of a test's :func:`web` daemons: its ``web`` marker's ids, serving HTTP, with
    its module's :func:`web_env`; None where the marker names no daemon (the test starts its
    own)."""
    marker = request.node.get_closest_marker("web")
    if marker is None or not marker.args:
        return None
    env: dict[str, str] = request.getfixturevalue("web_env")
    return Shape(tuple(marker.args), http=True, env=tuple(sorted(env.items())))


def shared_shape(request: pytest.FixtureRequest) -> Shape | None:
    """The shape of the shared fleet the test runs on: a test that uses ``local``, marked
    ``shared_fleet``, or one that uses ``web``, marked ``web`` with its daemons
    (:func:`web_shape`), and not ``disturbs``; None for a test that starts its own daemons."""
    if request.config.getoption("own_fleets"):
        return None
    if request.node.get_closest_marker("disturbs") is not None:
        return None
    if "web" in request.fixturenames:
        return web_shape(request)
    if request.node.get_closest_marker("shared_fleet") is None:
        return None
    if "local" not in request.fixturenames:
        return None
    return fleet_shape(request)


@pytest.fixture
def config(
    zk_server: EmbeddedZooKeeper, root: str, tmp_path: Any, request: pytest.FixtureRequest
) -> StoreConfig:
    """The test's cluster (a shared fleet's, for a test that runs on one: its own root and
    storage, emptied for each test). ``ZKSTORE_TEST_CREDENTIALS=1`` runs every test that takes
    it with ZooKeeper credentials (drivers then hold their job's identity:
    zkstore.zookeeper.identity); a module whose ``shared_fleet`` says ``credentials=True``,
    those of :func:`~tests.fleets.secured`."""
    shape = shared_shape(request)
    if shape is not None:
        fleets: Fleets = request.getfixturevalue("fleets")
        return fleets.of(shape).config.with_changes(session_timeout=4.0)
    made = cluster_config(zk_server, root, f"file://{tmp_path}/storage")
    return secured(made) if fleet_shape(request).credentials else made


def cluster_config(zk_server: EmbeddedZooKeeper, root: str, storage_url: str) -> StoreConfig:
    """A cluster on ``root`` of the test process's ZooKeeper (see :func:`config`)."""
    config = StoreConfig(
        zk_hosts=zk_server.connect_string,
        root=root,
        storage_url=storage_url,
        session_timeout=4.0,
        # A call waits as long as its session can go without an answer: a longer wait would
        # outlive the session, a shorter one fails a test whose ZooKeeper is starved for a
        # moment on a loaded machine (seen at load 13: a write answered after 3 s).
        timeout=4.0,
    )
    if os.environ.get("ZKSTORE_TEST_CREDENTIALS"):
        config = config.with_changes(zk_auth=ZkAuth.parse(f"alice:{SECRET}"))
    return config


@pytest.fixture
def zk(config: StoreConfig) -> Iterator[ZooKeeper]:
    client = ZooKeeper(
        config.zk_hosts, session_timeout=config.session_timeout, timeout=config.timeout
    ).start()
    client.ensure_path(config.base_path)
    yield client
    client.stop()


@pytest.fixture(params=["file", "memory", "s3"])
def any_storage(request: pytest.FixtureRequest, tmp_path: Any) -> StateStorage:
    """The same tests over local disk, fsspec's memory filesystem and a moto S3 server."""
    s3 = request.getfixturevalue("s3_server") if request.param == "s3" else None
    return make_storage(request.param, tmp_path, s3)


@pytest.fixture
def storage(tmp_path: Any) -> StateStorage:
    return make_storage("file", tmp_path, None)


@pytest.fixture
def cluster(config: StoreConfig) -> Iterator[Cluster]:
    """A cluster on the test's own root, with local storage."""
    with hands(config) as zk, Cluster.open(config, zk=zk) as opened:
        yield opened


@pytest.fixture(params=["file", "s3"])
def any_cluster(request: pytest.FixtureRequest, config: StoreConfig) -> Iterator[Cluster]:
    """The same cluster tests over local storage and a moto S3 server."""
    if request.param == "s3":
        s3: S3Server = request.getfixturevalue("s3_server")
        config = config.with_changes(
            storage_url=f"s3://{s3.new_bucket()}/zkstore", storage_options=s3.options()
        )
    with hands(config) as zk, Cluster.open(config, zk=zk) as opened:
        yield opened


@contextlib.contextmanager
def hands(config: StoreConfig) -> Iterator[ZooKeeper]:
    """The session of the test's own hands (:data:`~tests.helpers.HANDS_SESSION`); the
    cluster it serves keeps ``config``'s timeouts."""
    zk = ZooKeeper.from_config(config.with_changes(session_timeout=HANDS_SESSION)).start()
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def stand_in_session(config: StoreConfig) -> Iterator[Callable[[], ZooKeeper]]:
    """Opens the session of a stand-in driver (a test that plays a driver: its ``running``
    node, its heartbeats, its fenced writes), one per call, on ``config``'s servers and
    credentials with a session of :data:`~tests.helpers.HANDS_SESSION`: what it holds lives as
    long as the test says, whatever the load (at the harness's 4 s such sessions expired under
    the soak's busy loops, and with them the nodes the test stood on). Its ``stop()`` is the
    driver's death: its ephemeral nodes go at once; the sessions left open close with the test.
    A test about a session's expiry expires a session of its own."""
    opened: list[ZooKeeper] = []

    def open_session() -> ZooKeeper:
        zk = ZooKeeper.from_config(config, session_timeout=HANDS_SESSION)
        opened.append(zk.start(timeout=HANDS_SESSION))
        return zk

    yield open_session
    for zk in opened:
        zk.stop()


@pytest.fixture
def attempts(any_cluster: Cluster, stand_in_session: Callable[[], ZooKeeper]) -> Iterator[Attempts]:
    """The stand-in attempts of a test (:mod:`tests.stand_in_attempts`), each ended with it."""
    from tests.stand_in_attempts import Attempts

    started = Attempts(stand_in_session)
    yield started
    for attempt in started:
        attempt.end()


@pytest.fixture
def runtime_config(config: StoreConfig) -> StoreConfig:
    """The test's cluster with the short session timeout of the end-to-end tests."""
    return config.with_changes(session_timeout=SESSION_TIMEOUT)


@pytest.fixture
def local(
    runtime_config: StoreConfig, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[LocalCluster]:
    """Daemons as real processes (none started yet); their logs are printed if the test fails.

    A test marked ``shared_fleet`` (and not ``disturbs``) gets its process's shared fleet of
    that shape instead, its daemons running (:mod:`tests.fleets`): reset after the test, which
    fails if it left the fleet changed."""
    shape = shared_shape(request)
    if shape is not None:
        yield from _on_shared_fleet(request, shape)
        return
    own = fleet_shape(request)
    cluster = LocalCluster(
        runtime_config.with_changes(session_timeout=own.session_timeout),
        tmp_path / "runtime",
        restart_backoff=own.restart_backoff,
        http=own.http,
        extra_args=own.args,
    )
    yield cluster
    cluster.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for daemon in cluster.daemons.values():
            print(f"----- {daemon.daemon_id} -----\n{daemon.log()[-6000:]}")
        for log in sorted((tmp_path / "runtime" / "drivers").rglob("*.log")):
            print(f"----- {log} -----\n{log.read_text()[-3000:]}")


def _on_shared_fleet(request: pytest.FixtureRequest, shape: Shape) -> Iterator[LocalCluster]:
    """The shared fleet of ``shape`` for one test: reset after it, which fails if the test
    changed the fleet (then replaced) or if a value of the shape's ``env`` reached the test's
    part of a daemon's log (the whole log is read when the fleet closes)."""
    fleets: Fleets = request.getfixturevalue("fleets")
    fleet = fleets.of(shape)
    shared = fleet.begin()
    yield shared
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for daemon in shared.daemons.values():
            print(f"----- {daemon.daemon_id} (this test's part) -----\n{daemon.log()[-6000:]}")
    failures = fleets.after_test(shape)
    if failures:
        pytest.fail(" / ".join(failures), pytrace=False)


@pytest.fixture
def web_env() -> dict[str, str]:
    """The environment of the :func:`web` fixture's daemons beyond the cluster's (a module
    overrides it with its API tokens); none of its values may reach a daemon's log."""
    return {}


@pytest.fixture
def web(
    runtime_config: StoreConfig,
    tmp_path: Path,
    web_env: dict[str, str],
    request: pytest.FixtureRequest,
) -> Iterator[LocalCluster]:
    """Daemons that serve HTTP, each on a free loopback port, with :func:`web_env`. A test
    marked ``@pytest.mark.web("d1", "d2")`` gets those started (the first leading) and
    answering ``/health``: its process's shared fleet of that shape (:func:`web_shape`),
    unless it is marked ``disturbs`` (it kills, restarts, starts another daemon), which gets
    its own; else none is started. No value of ``web_env`` may reach a log: checked after each
    test over its own daemons' logs, or its part of the shared ones'."""
    shape = shared_shape(request)
    if shape is not None:
        yield from _on_shared_fleet(request, shape)
        return
    cluster = LocalCluster(
        runtime_config, tmp_path / "rt", restart_backoff=0.2, http=True, extra_env=web_env
    )
    try:
        marker = request.node.get_closest_marker("web")
        for daemon_id in marker.args if marker is not None else ():
            cluster.start_daemon(daemon_id)
            if daemon_id == marker.args[0]:
                cluster.wait_for_leader()
        for daemon in cluster.daemons.values():
            wait_for(
                lambda d=daemon: http_status(d, "/health") == 200,
                timeout=60,
                what=f"HTTP of {daemon.daemon_id} up",
            )
        yield cluster
    finally:
        cluster.stop()
    for daemon in cluster.daemons.values():
        log = daemon.log()
        assert not any(value in log for value in web_env.values()), "no token reaches a log"


@pytest.fixture
def laptop(tmp_path: Path) -> Path:
    """The user's directory: where they type commands (never the daemon's directory)."""
    path = tmp_path / "laptop"
    path.mkdir()
    return path


@pytest.fixture
def secure(config: StoreConfig) -> StoreConfig:
    """The test's cluster with ZooKeeper credentials (``alice``) and a read ACL (``monitor``)."""
    return secured(config)


@pytest.fixture
def spark_config(config: StoreConfig) -> StoreConfig:
    """The test's cluster for daemons whose drivers start Spark: Spark makes the machine busy,
    and a longer session keeps ZooKeeper sessions stable meanwhile."""
    return config.with_changes(session_timeout=10.0)


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """A Spark standalone master and one worker, one per test process (started on first use)."""
    cluster = Standalone(tmp_path_factory.mktemp("spark"))
    try:  # a master whose worker never came up is stopped too
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def other_users() -> Iterator[list[User]]:
    """Two Unix users of the test module's own, removed after it (root only: skips otherwise)."""
    with unix_users(2) as made:
        yield made


@pytest.fixture(scope="module")
def their_python(other_users: list[User]) -> Iterator[str]:
    """A Python that :func:`other_users` can run, with this suite's packages."""
    with public_python(other_users[0]) as found:
        yield found


@pytest.fixture
def client(runtime_config: StoreConfig) -> Iterator[Client]:
    with hands_client(runtime_config) as opened:
        yield opened


#: The CPU of the test process (and what it waited for) as a test's phase began.
CPU_AT = pytest.StashKey[tuple[float, float]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
    # what the phase spent rides on its report to the process that reports (tests.durations)
    now = _cpu_seconds(item.config)
    before = item.stash.get(CPU_AT, now)
    report.user_properties.append((durations.CPU, round(now[0] - before[0], 3)))
    report.user_properties.append((durations.OWN_CPU, round(now[1] - before[1], 3)))
    item.stash[CPU_AT] = now
    if report.when == "call" and report.failed and "zk_server" in getattr(item, "funcargs", {}):
        server = item.funcargs["zk_server"]
        report.sections.append(("ZooKeeper log (tail)", server.log_tail(40)))


#: Seconds each test took in the last run that saved them (:mod:`tests.durations`).
DURATIONS = durations.load()
#: This run's times (the process that reports keeps them: pytest-xdist's workers send theirs).
RECORDED = pytest.StashKey[durations.Recorder]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--own-fleets",
        action="store_true",
        help="every test starts its own daemons, none shares a fleet (as before tests/fleets.py)",
    )
    parser.addoption(
        "--fast",
        action="store_true",
        help="only the tests the last saved run timed under their level's limit ("
        + ", ".join(f"{level} {took:g} s" for level, took in durations.FAST_LIMIT.items())
        + ", else 1 s), no property (make test-fast)",
    )
    parser.addoption(
        "--save-durations",
        action="store_true",
        help="write each test's time to tests/durations.json (make test does)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[CPU_AT] = _cpu_seconds(item.config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a test without exactly one level mark, outside a concern folder, or of level unit
    and needing a server (:func:`tests.levels.refusal`); order the files longest first."""
    refused = set()
    for item in items:
        levels = [mark.name for mark in item.iter_markers()]
        why = refusal(item.path, levels, getattr(item, "fixturenames", ()))
        if why is not None:
            refused.add(f"{item.path.relative_to(config.rootpath)}: {why}")
    if refused:
        raise pytest.UsageError("tests refused:\n  " + "\n  ".join(sorted(refused)))
    if config.getoption("fast"):
        slow = durations.deselected_as_slow(items, DURATIONS)
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if item not in slow]
    durations.order_longest_files_first(items, DURATIONS)


#: The machine's speed when the run started (:mod:`tests.machine_speed`), measured once by the
#: process that reports (never by each xdist worker).
SPEED_AT_START = pytest.StashKey[float]()
#: The run's cgroup (:mod:`tests.suite_cgroup`), entered by the process that reports before the
#: workers start, and each worker's inside it; or why there is none.
CGROUP = pytest.StashKey["suite_cgroup.SuiteCgroup | str"]()


def _reports(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = [spark_jvm.report(), zk_jvm.report()]
    if SPEED_AT_START in config.stash:
        lines.append(machine_speed.describe(config.stash[SPEED_AT_START]))
    return lines


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The machine's speed at the start and at the end of the run, even under ``-q`` (which
    prints no header): what every time this run printed is to be read beside."""
    if RECORDED in config.stash:
        recorder = config.stash[RECORDED]
        for line in recorder.summary():
            terminalreporter.write_line(line)
        if config.getoption("save_durations") and recorder.took:
            saved = recorder.save(DURATIONS)
            terminalreporter.write_line(f"{durations.PATH}: {saved} tests' times")
        for line in _end_cgroup(config, counted=sum(recorder.cpu.values())):
            terminalreporter.write_line(line)
    if SPEED_AT_START in config.stash:
        start, end = config.stash[SPEED_AT_START], machine_speed.loop_seconds()
        terminalreporter.write_line(machine_speed.describe(start, end))


def _cpu_seconds(config: pytest.Config) -> tuple[float, float]:
    """:func:`durations.cpu_seconds`, by this test process's cgroup where it has one."""
    entered = config.stash.get(CGROUP, None)
    return durations.cpu_seconds(
        entered.usage if isinstance(entered, suite_cgroup.SuiteCgroup) else None
    )


def _end_cgroup(
    config: pytest.Config, counted: float, wait: float = suite_cgroup.EMPTY_WAIT
) -> list[str]:
    """The run's cgroup ended (once): the CPU of every process the run started, and what it
    left running; or why that is not known."""
    entered = config.stash.get(CGROUP, None)
    if entered is None:
        return []
    del config.stash[CGROUP]
    if isinstance(entered, str):
        return [f"CPU of every process the run started: not known ({entered})"]
    return entered.end(wait=wait).lines(counted)


def pytest_unconfigure(config: pytest.Config) -> None:
    # a run that ended before its summary leaves no cgroup; a test process leaves what it
    # left running to the run's cgroup, whose end names it
    _end_cgroup(
        config, counted=0.0, wait=0.0 if hasattr(config, "workerinput") else suite_cgroup.EMPTY_WAIT
    )


def pytest_configure(config: pytest.Config) -> None:
    if _reports(config):  # before the workers start, which load the machine
        config.stash[SPEED_AT_START] = machine_speed.loop_seconds()
        config.stash[RECORDED] = durations.Recorder()
        config.pluginmanager.register(config.stash[RECORDED], "zkstore-durations")
        config.stash[CGROUP] = suite_cgroup.SuiteCgroup.enter()
    else:  # a test process's own, inside the run's: what each of its tests spends
        config.stash[CGROUP] = suite_cgroup.SuiteCgroup.enter()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
