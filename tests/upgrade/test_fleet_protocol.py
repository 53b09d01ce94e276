"""The fleet protocol (issue 45): ``R/fleet``, the gate on newer features, finalization and the
admission of daemons, against a real ZooKeeper. A release that speaks a newer protocol is
simulated by raising :data:`zkstore.protocol.PROTOCOL` for the test (what a newer build is)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli import run
from zkstore import __version__, protocol
from zkstore.cluster import Cluster
from zkstore.cluster import fleet_protocol as fleet
from zkstore.config import StoreConfig
from zkstore.errors import EXIT_FLEET, FleetVersionError, NewerRecord
from zkstore.layout import Layout
from zkstore.protocol import Feature
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration

NEWER = protocol.PROTOCOL + 1


@pytest.fixture
def newer_release(monkeypatch: pytest.MonkeyPatch) -> int:
    """This process is a release that speaks one protocol more (and still serves the old)."""
    monkeypatch.setattr(protocol, "PROTOCOL", NEWER)
    return NEWER


@pytest.fixture
def hands_zk(config: StoreConfig) -> Iterator[ZooKeeper]:
    """Another session, which holds the planted member records of other daemons."""
    zk = ZooKeeper(config.zk_hosts, session_timeout=30, timeout=5).start()
    yield zk
    zk.stop()


def _daemon(zk: ZooKeeper, layout: Layout, daemon_id: str, speaks: int | None) -> None:
    """A live daemon's member record speaking ``speaks`` (None: a release before them)."""
    info = MemberInfo(
        version=None,
        daemon_id=daemon_id,
        host=f"host-{daemon_id}",
        pid=1,
        started=parse_time(utc_now()),
        speaks=speaks,
        serves_from=None if speaks is None else 1,
        release=None if speaks is None else f"0.{speaks}.0",
    )
    zk.ensure_path(layout.members)
    zk.create(layout.member(daemon_id), info.to_bytes(), ephemeral=True)


def test_a_new_cluster_starts_at_this_codes_protocol(cluster: Cluster) -> None:
    record = fleet.read(cluster.zk, cluster.layout)
    assert record is not None and record.current == protocol.PROTOCOL and record.target is None
    assert record.by is not None and __version__ in record.by


def test_a_cluster_made_before_the_fleet_protocol_is_at_protocol_1(
    config: StoreConfig, newer_release: int
) -> None:
    """A cluster whose currentJobs exists without R/fleet was made by a release that wrote
    protocol-1 records only: opening it (a newer release) records nothing and reads 1."""
    layout = Layout(config.base_path)
    with ZooKeeper(config.zk_hosts, timeout=5).start() as zk:
        zk.ensure_path(layout.current_jobs)
    with Cluster.open(config) as cluster:
        assert fleet.read(cluster.zk, cluster.layout) is None
        assert fleet.current(cluster.zk, cluster.layout) == 1
        assert fleet.admit(cluster.zk, cluster.layout, "d1") == 1


def test_a_feature_of_a_newer_protocol_is_refused_naming_the_old_daemons(
    config: StoreConfig, hands_zk: ZooKeeper, newer_release: int
) -> None:
    layout = Layout(config.base_path)
    hands_zk.ensure_path(layout.current_jobs)  # a cluster of the old protocol
    _daemon(hands_zk, layout, "a", NEWER)
    _daemon(hands_zk, layout, "b", 1)
    _daemon(hands_zk, layout, "c", None)
    feature = Feature("test-feature", NEWER, "jobs frobnicate")
    with Cluster.open(config) as cluster:
        with pytest.raises(FleetVersionError) as refused:
            fleet.require(cluster.zk, cluster.layout, feature)
        message = str(refused.value)
        assert f"jobs frobnicate needs the fleet at protocol {NEWER}; it is at 1" in message
        assert "b on host-b runs protocol 1" in message
        assert "c on host-c runs protocol 1" in message and "a on" not in message
        assert "upgrade every daemon, then run zkstore fleet finalize" in message
        assert refused.value.exit_code == EXIT_FLEET == 9
    hands_zk.delete(layout.member("b"))
    hands_zk.delete(layout.member("c"))
    with Cluster.open(config) as cluster, pytest.raises(FleetVersionError, match="every live"):
        fleet.require(cluster.zk, cluster.layout, feature)


def test_finalize_is_refused_while_an_old_daemon_lives_then_raises_the_protocol(
    config: StoreConfig, hands_zk: ZooKeeper, newer_release: int
) -> None:
    layout = Layout(config.base_path)
    hands_zk.ensure_path(layout.current_jobs)
    _daemon(hands_zk, layout, "new", NEWER)
    _daemon(hands_zk, layout, "old", 1)
    ran = run(config, "fleet", "finalize", "--yes")
    assert ran.returncode == EXIT_FLEET, ran.stderr
    assert "old on host-old (0.1.0) speaks 1" in ran.stderr
    status = run(config, "fleet", "status")
    assert status.returncode == 0
    assert "fleet protocol 1; 1 daemon(s) speak less than" in status.stdout
    hands_zk.delete(layout.member("old"))  # upgraded: it comes back speaking the newer protocol
    _daemon(hands_zk, layout, "old", NEWER)
    dry = run(config, "fleet", "finalize", "--dry-run")
    assert f"would finalize the fleet at protocol {NEWER} (now 1)" in dry.stdout
    ran = run(config, "fleet", "finalize", "--yes")
    assert ran.returncode == 0, ran.stderr
    assert f"fleet finalized at protocol {NEWER} (was 1)" in ran.stdout
    with Cluster.open(config) as cluster:
        fleet.require(cluster.zk, cluster.layout, Feature("f", NEWER, "it"))
        record = fleet.read(cluster.zk, cluster.layout)
        assert record is not None and (record.current, record.target) == (NEWER, None)
    again = run(config, "fleet", "finalize", "--yes")
    assert "nothing to finalize" in again.stdout


def test_an_old_daemon_is_refused_by_a_fleet_finalized_past_it(
    config: StoreConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Cluster.open(config) as cluster:
        cluster.zk.set(
            cluster.layout.fleet,
            fleet.FleetRecord(version=None, current=NEWER, since=utc_now()).to_bytes(),
        )
        with pytest.raises(FleetVersionError) as refused:
            fleet.admit(cluster.zk, cluster.layout, "d1")
    assert f"speaks fleet protocol {protocol.PROTOCOL}; the fleet is finalized at protocol " in (
        str(refused.value)
    )
    monkeypatch.setattr(protocol, "MIN_PROTOCOL", NEWER + 1)  # a release too new for it
    monkeypatch.setattr(protocol, "PROTOCOL", NEWER + 1)
    with Cluster.open(config) as cluster, pytest.raises(FleetVersionError, match="serves fleet"):
        fleet.admit(cluster.zk, cluster.layout, "d1")


def test_a_finalization_cut_short_keeps_old_daemons_out_and_is_finished_or_withdrawn(
    config: StoreConfig, hands_zk: ZooKeeper, newer_release: int
) -> None:
    """The target written first (a crash before the second write): an old daemon joining now
    is refused; the finalization run again withdraws it if an old daemon is back (so that a
    downgrade is possible again), or finishes it."""
    layout = Layout(config.base_path)
    hands_zk.ensure_path(layout.current_jobs)
    cut_short = fleet.FleetRecord(version=None, current=1, since=utc_now(), target=NEWER)
    hands_zk.create(layout.fleet, cut_short.to_bytes())
    with Cluster.open(config) as cluster:
        assert fleet.status(cluster.zk, cluster.layout).target == NEWER
    with pytest.MonkeyPatch.context() as old:
        old.setattr(protocol, "PROTOCOL", 1)
        with (
            Cluster.open(config) as cluster,
            pytest.raises(FleetVersionError, match="is being finalized at protocol"),
        ):
            fleet.admit(cluster.zk, cluster.layout, "old")
    _daemon(hands_zk, layout, "old", 1)  # one joined anyway (before the target was written)
    with Cluster.open(config) as cluster:
        with pytest.raises(FleetVersionError, match="old on host-old"):
            fleet.finalize(cluster.zk, cluster.layout)
        record = fleet.read(cluster.zk, cluster.layout)
        assert record is not None and (record.current, record.target) == (1, None)
        cluster.zk.set(cluster.layout.fleet, cut_short.to_bytes())
        hands_zk.delete(layout.member("old"))
        assert fleet.finalize(cluster.zk, cluster.layout) == fleet.Finalized(1, NEWER)


def test_a_daemon_that_joins_during_a_finalization_stops_it(
    config: StoreConfig, hands_zk: ZooKeeper, newer_release: int
) -> None:
    """The second listing (after the target is written) finds an old daemon that joined
    between the first listing and the target: the target is withdrawn, the finalization
    refused naming it."""
    layout = Layout(config.base_path)
    hands_zk.ensure_path(layout.current_jobs)
    with Cluster.open(config) as cluster:
        real_status = fleet.status
        calls = 0

        def status_then_a_late_joiner(zk: ZooKeeper, layout_: Layout) -> fleet.FleetStatus:
            nonlocal calls
            calls += 1
            if calls == 2:
                _daemon(hands_zk, layout, "late", 1)
            return real_status(zk, layout_)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(fleet, "status", status_then_a_late_joiner)
            with pytest.raises(FleetVersionError, match="late on host-late"):
                fleet.finalize(cluster.zk, cluster.layout)
        record = fleet.read(cluster.zk, cluster.layout)
        assert record is not None and (record.current, record.target) == (1, None)


def test_garbage_in_the_fleet_record_is_protocol_1_and_finalize_rewrites_it(
    config: StoreConfig, newer_release: int
) -> None:
    layout = Layout(config.base_path)
    with ZooKeeper(config.zk_hosts, timeout=5).start() as zk:
        zk.ensure_path(layout.current_jobs)
        zk.create(layout.fleet, b"\x00garbage")
    with Cluster.open(config) as cluster:
        assert fleet.current(cluster.zk, cluster.layout) == 1
        assert fleet.finalize(cluster.zk, cluster.layout) == fleet.Finalized(1, NEWER)
        assert fleet.current(cluster.zk, cluster.layout) == NEWER


def test_a_fleet_record_of_a_newer_protocol_is_newer_not_garbage(cluster: Cluster) -> None:
    cluster.zk.set(cluster.layout.fleet, b'{"protocol": 99, "current": 99, "since": "x"}')
    with pytest.raises(NewerRecord):
        fleet.read(cluster.zk, cluster.layout)


def test_a_submission_writes_what_the_fleets_protocol_reads(config: StoreConfig) -> None:
    """Arguments apart from the code (protocol 2) only in a fleet finalized at 2: a cluster of
    the old protocol gets the one pickle every release's driver unpacks."""
    from recovery.client.api import Client
    from tests import jobs

    legacy = config.with_changes(root=f"{config.root}-legacy")
    with ZooKeeper(legacy.zk_hosts, timeout=5).start() as zk:
        zk.ensure_path(Layout(legacy.base_path).current_jobs)  # made before the fleet protocol
    for cfg, apart in ((legacy, False), (config, True)):
        with Client(cfg) as client:
            job_id = client.submit_function(jobs.steps, "/tmp/x", 1, 0.0, job_id="j1")
            definition = client.cluster.jobs.recover(job_id, lock=False).state
            assert (definition.arguments is not None) is apart, cfg.root
            assert definition.load_function()[1] == ("/tmp/x", 1, 0.0)
