"""A member reads only the assignments that may have changed since its last look.

Each change of its assignments (a placement, an end, on any of its jobs) makes a member look;
before, every look read every assignment of the member again, so a placement on a member running
100 drivers cost 100 reads. Here a real :class:`FleetMember` on the test's cluster looks after
each change, and the requests its session sends are counted. Its assignments are of attempts
that ended here already (``exited``), so that a look launches nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.member.fleetmember import FleetMember
from recovery.member.launcher import DriverLauncher
from recovery.settings import DaemonSettings
from tests.helpers import requests_sent
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import StoreUnavailable
from zkstore.records.fleet_records import Assignment
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.ops import Create, Delete

pytestmark = pytest.mark.integration

MEMBER = "m"


def ended(job_id: str, attempt: int = 1) -> bytes:
    return Assignment(
        version=None,
        job_id=job_id,
        daemon_id=MEMBER,
        attempt=attempt,
        status_version=0,
        assigned=parse_time(utc_now()),
        exited="exit 0",
    ).to_bytes()


@pytest.fixture
def cluster(config: StoreConfig) -> Iterator[Cluster]:
    with Cluster.open(config) as cluster:
        cluster.zk.ensure_path(cluster.layout.member_assignments(MEMBER))
        yield cluster


@pytest.fixture
def member(cluster: Cluster, config: StoreConfig, tmp_path: Path) -> Iterator[FleetMember]:
    settings = DaemonSettings(
        store=config, daemon_id=MEMBER, work_dir=str(tmp_path / "work"), fork_server=False
    )
    launcher = DriverLauncher(settings)
    member = FleetMember(cluster, settings, launcher, lambda: None, lambda _: None)
    yield member
    member.stop()
    launcher.close()


def reads(member: FleetMember) -> int:
    """The assignments one look reads (its ``GetData`` requests)."""
    with requests_sent(member.cluster.zk) as sent:
        member.sync()
    return sent.count("GetData")


def test_a_look_reads_only_the_assignments_that_came_since_the_last(
    cluster: Cluster, member: FleetMember
) -> None:
    zk, layout = cluster.zk, cluster.layout
    for n in range(5):
        zk.create(layout.assignment(MEMBER, f"j{n}"), ended(f"j{n}"))
    assert reads(member) == 5, "the first look reads them all"
    zk.create(layout.assignment(MEMBER, "j5"), ended("j5"))
    assert reads(member) == 1, "a placement: the new assignment only"
    zk.delete(layout.assignment(MEMBER, "j0"))
    assert reads(member) == 0, "an assignment deleted: nothing to read"
    assert reads(member) == 0, "nothing changed"


def test_an_assignment_replaced_under_the_same_name_is_read_again(
    cluster: Cluster, member: FleetMember
) -> None:
    """The leader places a new attempt on the member that ran the last one by deleting the old
    assignment and creating the new in one transaction: the names are the same, the look must
    still see attempt 2."""
    zk, layout = cluster.zk, cluster.layout
    for n in range(3):
        zk.create(layout.assignment(MEMBER, f"j{n}"), ended(f"j{n}"))
    member.sync()
    path = layout.assignment(MEMBER, "j1")
    zk.commit([Delete(path), Create(path, ended("j1", attempt=2))])
    assert reads(member) == 3, "some name was made again: every assignment is read anew"
    replaced = member.assignments.known("j1")
    assert replaced is not None and replaced.attempt == 2


def test_an_assignment_the_member_wrote_is_read_again(
    cluster: Cluster, member: FleetMember, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The member records its driver's exit in the assignment itself: the next look knows what
    it wrote without reading it; a write whose answer was lost is read anew (and only it)."""
    zk, layout = cluster.zk, cluster.layout
    for n in range(2):
        zk.create(layout.assignment(MEMBER, f"j{n}"), ended(f"j{n}"))
    member.sync()
    member._record_exit("j0", 1, "killed by signal 9", None, None)
    assert reads(member) == 0
    written = member.assignments.known("j0")
    assert written is not None and written.exited == "killed by signal 9"
    data, stat = zk.get(layout.assignment(MEMBER, "j0"))
    assert written == Assignment.from_znode(data, stat, "j0")

    def lost(ops: object) -> None:
        raise StoreUnavailable("the answer was lost")

    with monkeypatch.context() as patched:
        patched.setattr(zk, "commit", lost)
        with pytest.raises(StoreUnavailable):
            member._record_exit("j1", 1, "killed by signal 9", None, None)
    assert reads(member) == 1


def test_a_member_directory_made_again_is_read_whole(cluster: Cluster, member: FleetMember) -> None:
    """The directory of a member collected and made again counts its children's version from
    zero: what the member knew of the old one does not count."""
    zk, layout = cluster.zk, cluster.layout
    directory = layout.member_assignments(MEMBER)
    zk.create(layout.assignment(MEMBER, "j0"), ended("j0"))
    member.sync()
    zk.commit([Delete(layout.assignment(MEMBER, "j0")), Delete(directory)])
    zk.create(directory)
    zk.create(layout.assignment(MEMBER, "j0"), ended("j0", attempt=3))
    assert reads(member) == 1
    made_again = member.assignments.known("j0")
    assert made_again is not None and made_again.attempt == 3


def test_an_exit_is_written_at_the_version_the_member_knows(
    cluster: Cluster, member: FleetMember
) -> None:
    """Recording a driver's exit reads the attempt's ``running`` node (the caller may pass it,
    read once the process ended) and writes the assignment at the version the member knows,
    with no read of it; one changed behind its back since (a stale version) is read and
    written again, and the exit is recorded either way."""
    zk, layout = cluster.zk, cluster.layout
    for n in range(2):
        zk.create(layout.assignment(MEMBER, f"j{n}"), ended(f"j{n}"))
    member.sync()
    with requests_sent(zk) as sent:
        member._record_exit("j0", 1, "exit 0", 0, None)
    assert sent == ["GetData", "Transaction"], "the running node read, the assignment written"
    with requests_sent(zk) as sent:
        member._record_exit("j0", 1, "exit 1", 0, None, running=(None,))
    assert sent == ["Transaction"], "at the version its own last write gave it"
    data, stat = zk.get(layout.assignment(MEMBER, "j0"))
    assert Assignment.from_znode(data, stat, "j0").exited == "exit 1"

    zk.set(layout.assignment(MEMBER, "j1"), ended("j1"))  # the version moves on
    with requests_sent(zk) as sent:
        member._record_exit("j1", 1, "killed by signal 9", 0, None, running=(None,))
    assert sent == ["Transaction", "GetData", "Transaction"], sent
    data, stat = zk.get(layout.assignment(MEMBER, "j1"))
    assert Assignment.from_znode(data, stat, "j1").exited == "killed by signal 9"
    assert member.assignments.known("j1") == Assignment.from_znode(data, stat, "j1")
