"""NodeWatch: watches that stay armed, with deadlines, over a real ZooKeeper."""

from __future__ import annotations

import threading
import time

import pytest

from tests.helpers import connected, expire_session, requests_sent, wait_for
from zkstore.config import StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper, four_letter_word
from zkstore.errors import StoreUnavailable
from zkstore.zookeeper.watch import NodeWatch, WatchedValue
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


class Seen:
    """What a watch reported, in order (callbacks run on kazoo's threads)."""

    def __init__(self) -> None:
        self.values: list[WatchedValue] = []
        self._lock = threading.Lock()

    def __call__(self, value: WatchedValue) -> None:
        with self._lock:
            self.values.append(value)

    def last(self) -> WatchedValue:
        with self._lock:
            return self.values[-1] if self.values else "nothing yet"


def test_data_watch_reports_creation_changes_and_deletion(zk: ZooKeeper, root: str) -> None:
    path = f"{root}/watched"
    seen = Seen()
    watch = NodeWatch(zk, path, seen)
    assert seen.values == [None], "reported at once, from the creating thread"
    zk.create(path, b"one")
    wait_for(lambda: seen.last() == b"one", what="creation")
    zk.set(path, b"two")
    wait_for(lambda: seen.last() == b"two", what="change")
    zk.delete(path)
    wait_for(lambda: seen.last() is None, what="deletion")
    watch.stop()
    zk.create(path, b"after stop")
    # ZooKeeper delivers watch events in order: once a later change has been reported to another
    # watch, a report of this creation to the stopped one would have arrived already.
    later = Seen()
    NodeWatch(zk, f"{root}/later", later)
    zk.create(f"{root}/later", b"x")
    wait_for(lambda: later.last() == b"x", what="the later event")
    assert seen.last() is None


def test_children_watch_outlives_the_deletion_of_its_node(zk: ZooKeeper, root: str) -> None:
    """kazoo's ChildrenWatch stops for good when its node is deleted; this one goes on."""
    path = f"{root}/parent"
    zk.ensure_path(path)
    seen = Seen()
    NodeWatch(zk, path, seen, children=True)
    zk.create(f"{path}/a")
    wait_for(lambda: seen.last() == ["a"], what="child a")
    zk.delete_tree(path)
    wait_for(lambda: seen.last() is None, what="parent gone")
    zk.ensure_path(f"{path}/b")
    wait_for(lambda: seen.last() == ["b"], what="parent back with child b")


def test_a_watch_is_re_armed_after_its_session_expired(zk: ZooKeeper, root: str) -> None:
    path = f"{root}/survivor"
    seen = Seen()
    NodeWatch(zk, path, seen)
    expire_session(zk)
    zk.create(path, b"made after the new session")
    wait_for(lambda: seen.last() == b"made after the new session", timeout=20, what="re-armed")


def test_creating_a_watch_while_zookeeper_is_down_fails_within_the_deadline() -> None:
    """kazoo's DataWatch retries forever: creating one while ZooKeeper is down hangs."""
    server = EmbeddedZooKeeper().start()
    zk = connected(server.connect_string, session_timeout=10, timeout=1.0)
    try:
        server.stop()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            NodeWatch(zk, "/anything", Seen())
        assert time.monotonic() - started < 30, "not a hang"
    finally:
        zk.stop()
        server.close()


def test_a_child_deleted_and_made_again_at_once_is_a_change(zk: ZooKeeper, root: str) -> None:
    """A member's assignment replaced by the next attempt's in one transaction leaves the same
    list of names: the watch must still report it (members launch on it)."""
    from zkstore.zookeeper.ops import Create, Delete

    path = f"{root}/assignments"
    zk.ensure_path(f"{path}/job")
    seen = Seen()
    NodeWatch(zk, path, seen, children=True)
    zk.commit([Delete(f"{path}/job"), Create(f"{path}/job", b"attempt 2")])
    wait_for(lambda: len(seen.values) == 2, what="a second report")
    assert seen.values == [["job"], ["job"]]


def test_a_listing_watch_reports_how_many_creations_and_deletions_made_the_names(
    zk: ZooKeeper, root: str
) -> None:
    """With ``listing``, the names come with their version and their node's creation: a child
    replaced in one transaction shows as the same names two versions on (members read only
    the assignments a change may have touched, by these)."""
    from zkstore.zookeeper.ops import Create, Delete
    from zkstore.zookeeper.watch import Listing

    path = f"{root}/assignments"
    zk.ensure_path(f"{path}/job")
    seen = Seen()
    NodeWatch(zk, path, seen, children=True, listing=True)
    first = seen.last()
    assert isinstance(first, Listing) and first.names == ["job"]
    zk.commit([Delete(f"{path}/job"), Create(f"{path}/job", b"attempt 2")])
    wait_for(lambda: len(seen.values) == 2, what="a second report")
    assert seen.last() == Listing(["job"], first.version + 2, first.created)


def test_a_watch_set_before_its_callers_own_read_reports_only_later_changes(
    zk: ZooKeeper, root: str
) -> None:
    """``report_first=False``: the first read only arms the watch (the caller reads the value
    itself, after): nothing is reported for it, every change after it is."""
    path = f"{root}/armed"
    zk.create(path, b"before")
    seen = Seen()
    watch = NodeWatch(zk, path, seen, report_first=False)
    assert seen.values == [], "the value the caller reads itself is not reported"
    zk.set(path, b"after")
    wait_for(lambda: seen.last() == b"after", what="the change after the arming")
    watch.stop()


def test_watching_an_absent_node_costs_one_request(zk: ZooKeeper, root: str) -> None:
    """Most watched records are absent (a cancel, an end, a control object): arming the watch
    on one asks once (before: a read that failed, then an ``exists``), and still reports its
    creation and, once it is there, its changes."""
    path = f"{root}/absent"
    seen = Seen()
    with requests_sent(zk) as sent:
        watch = NodeWatch(zk, path, seen)
    assert sent == ["Exists"] and seen.values == [None]
    zk.create(path, b"cancel")
    wait_for(lambda: seen.last() == b"cancel", what="the creation")
    zk.set(path, b"changed")
    wait_for(lambda: seen.last() == b"changed", what="a change of the node now there")
    watch.stop()


def test_a_watch_told_so_reports_a_node_it_may_not_read(secure: StoreConfig) -> None:
    """Issue 54: a node made by another identity with an ACL of its own (a job's planted
    ``end``) is reported as its AccessDenied by a watch asked to (``denied``), and raises
    otherwise, as before."""
    from kazoo.security import make_digest_acl

    from zkstore.errors import AccessDenied

    with ZooKeeper.from_config(secure).start() as zk:
        path = f"{secure.base_path}/planted"
        zk.ensure_path(secure.base_path)
        zk.kazoo.create(path, b"x", acl=[make_digest_acl("stranger", "pw", all=True)])
        seen = Seen()
        watch = NodeWatch(zk, path, seen, denied=True)
        assert isinstance(seen.last(), AccessDenied)
        watch.stop()
        with pytest.raises(AccessDenied):
            NodeWatch(zk, path, Seen())


def server_watches(server: EmbeddedZooKeeper) -> int:
    """The watches ZooKeeper keeps for every session (``mntr``)."""
    for line in four_letter_word("127.0.0.1", server.port, "mntr").splitlines():
        key, _, value = line.partition("\t")
        if key == "zk_watch_count":
            return int(value)
    raise AssertionError("mntr told no zk_watch_count")


def kazoo_watchers(zk: ZooKeeper) -> int:
    client = zk.kazoo
    return sum(
        len(w) for table in (client._data_watchers, client._child_watchers) for w in table.values()
    )


def test_a_stopped_watch_leaves_no_watch_behind(
    zk_server: EmbeddedZooKeeper, zk: ZooKeeper, root: str
) -> None:
    """A watch of a node that is never made (a finished attempt's ``end`` node) held its
    watcher in kazoo, and its watch in ZooKeeper, for the life of the session (issue 62)."""
    zk.ensure_path(f"{root}/listed")
    zk.exists(root)  # a round trip: every earlier watch is set
    before = kazoo_watchers(zk), server_watches(zk_server)
    watches = [NodeWatch(zk, f"{root}/never-{n}", Seen()) for n in range(5)] + [
        NodeWatch(zk, f"{root}/listed", Seen(), children=True)
    ]
    assert kazoo_watchers(zk) == before[0] + 6
    for watch in watches:
        watch.stop()
    zk.exists(root)  # after the removals, in the session's order
    assert (kazoo_watchers(zk), server_watches(zk_server)) == before
    assert zk.forget_watches({f"{root}/never-0": watches[0]._fired}) == 0, "gone already"
