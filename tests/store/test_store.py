"""ZooKeeperStateHandleStore against a real ZooKeeper: Flink's store scenarios and more."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import connected, expire_session, pause, requests_sent, run_child, wait_for
from zkstore.config import StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.errors import (
    CorruptHandle,
    CorruptPayload,
    FenceLost,
    HandleExists,
    HandleNotFound,
    InvalidName,
    NewerRecord,
    NotEmpty,
    NotLeader,
    OutcomeUnknown,
    PayloadMissing,
    SerializationError,
    StoreUnavailable,
    VersionConflict,
)
from zkstore.payloads.serializers import JsonSerializer, PickleSerializer
from zkstore.payloads.storage import StateStorage
from zkstore.payloads.store import ZooKeeperStateHandleStore
from zkstore.records.handle import Handle
from zkstore.zookeeper.ops import Fence
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def make_store(zk: ZooKeeper, path: str, storage: StateStorage, **kwargs: Any) -> Any:
    zk.ensure_path(path)
    return ZooKeeperStateHandleStore(
        zk,
        path,
        storage,
        JsonSerializer(),
        payload_prefix=lambda name: f"c/jobs/{name}/definition",
        **kwargs,
    )


@pytest.fixture
def path(config: StoreConfig) -> str:
    return f"{config.base_path}/currentJobs"


@pytest.fixture
def store(zk: ZooKeeper, path: str, storage: StateStorage) -> Any:
    return make_store(zk, path, storage)


@pytest.fixture
def other_zk(config: StoreConfig) -> Iterator[ZooKeeper]:
    client = ZooKeeper(config.zk_hosts, session_timeout=config.session_timeout, timeout=3).start()
    yield client
    client.stop()


def payload_uris(storage: StateStorage) -> set[str]:
    return {o.uri for o in storage.list("c")}


def assert_invariant_1(zk: ZooKeeper, path: str, storage: StateStorage) -> set[str]:
    """Every live handle's payload exists and verifies.

    Returns the URIs that nodes reference, marked ones included: a marked node's payload is
    not an orphan, its removal discards it.
    """
    referenced = set()
    for name in zk.children(path):
        data, stat = zk.get(f"{path}/{name}")
        handle = Handle.from_znode(data, stat, f"{path}/{name}")
        referenced.add(handle.uri)
        if stat.numChildren > 0:  # live; a node marked for deletion counts as absent
            storage.read(handle.ref)
    return referenced


# -- round trips over every storage backend -----------------------------------------------------


def test_add_get_replace_remove_over_every_backend(
    zk: ZooKeeper, path: str, any_storage: StateStorage
) -> None:
    store = make_store(zk, path, any_storage)
    handle = store.add("job-1", {"n": 1}, summary={"name": "first"})
    assert handle.version == 0
    entry = store.get("job-1")
    assert entry.state == {"n": 1}
    assert entry.handle.summary == {"name": "first"}
    replaced = store.replace("job-1", 0, {"n": 2})
    assert replaced.version == 1
    assert replaced.summary == {"name": "first"}, "replace keeps the summary"
    assert store.get("job-1").state == {"n": 2}
    assert payload_uris(any_storage) == {replaced.uri}, "the old payload was discarded"
    assert store.remove("job-1") is True
    assert store.exists("job-1") is None
    assert payload_uris(any_storage) == set()


def test_pickled_state_round_trip(zk: ZooKeeper, path: str, storage: StateStorage) -> None:
    zk.ensure_path(path)
    store = ZooKeeperStateHandleStore(
        zk, path, storage, PickleSerializer(), payload_prefix=lambda n: f"c/{n}"
    )
    store.add("f", lambda x: x * 3)
    assert store.get("f").state(5) == 15


# -- add -----------------------------------------------------------------------------------------


def test_add_over_existing_node_fails_and_leaves_no_orphan(
    store: Any, storage: StateStorage
) -> None:
    first = store.add("a", {"v": 1})
    with pytest.raises(HandleExists):
        store.add("a", {"v": 2})
    assert payload_uris(storage) == {first.uri}
    assert store.get("a").state == {"v": 1}


def test_add_over_marked_node_finishes_removal_then_adds(
    store: Any, zk: ZooKeeper, path: str, storage: StateStorage
) -> None:
    old = store.add("a", {"v": 1})
    store.release("a")
    zk.delete(f"{path}/a/locks")  # marked for deletion, as a crash after marking leaves it
    new = store.add("a", {"v": 2})
    assert store.get("a").state == {"v": 2}
    assert payload_uris(storage) == {new.uri}
    assert old.uri != new.uri


def test_add_creates_lock_held_by_this_instance(store: Any, zk: ZooKeeper, path: str) -> None:
    store.add("a", {"v": 1})
    assert zk.children(f"{path}/a/locks") == [store.instance_id]


def test_oversized_summary_is_refused_before_anything_is_published(
    store: Any, storage: StateStorage
) -> None:
    with pytest.raises(SerializationError, match="over the 2048-byte limit"):
        store.add("a", {"v": 1}, summary={"name": "x" * 3000})
    assert store.exists("a") is None
    assert payload_uris(storage) == set()


def test_handle_stays_small_whatever_the_payload_size(store: Any, zk: ZooKeeper, path: str) -> None:
    store.add("big", {"blob": "x" * (5 * 1024 * 1024)}, summary={"name": "big", "kind": "function"})
    data, _ = zk.get(f"{path}/big")
    assert len(data) < 1024


# -- replace -------------------------------------------------------------------------------------


def test_replace_with_stale_version_conflicts_and_discards_new_payload(
    store: Any, storage: StateStorage
) -> None:
    store.add("a", {"v": 1})
    current = store.replace("a", 0, {"v": 2})
    with pytest.raises(VersionConflict):
        store.replace("a", 0, {"v": 3})
    assert payload_uris(storage) == {current.uri}
    assert store.get("a").state == {"v": 2}


def test_version_zero_is_a_real_version(store: Any) -> None:
    """Expected version 0 must be checked, not treated as 'any version'."""
    store.add("a", {"v": 1})
    store.replace("a", 0, {"v": 2})
    with pytest.raises(VersionConflict):
        store.replace("a", 0, {"v": 3})


def test_concurrent_replaces_exactly_one_wins(
    store: Any, zk: ZooKeeper, path: str, storage: StateStorage, other_zk: ZooKeeper
) -> None:
    store.add("a", {"v": 0})
    other = make_store(other_zk, path, storage)
    winners, losers = [], []
    barrier = threading.Barrier(2)

    def attempt(s: Any, value: int) -> None:
        barrier.wait()
        try:
            winners.append(s.replace("a", 0, {"v": value}))
        except VersionConflict:
            losers.append(value)

    threads = [threading.Thread(target=attempt, args=(s, i)) for i, s in enumerate([store, other])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and len(losers) == 1
    assert payload_uris(storage) == {winners[0].uri}


def test_replace_of_marked_node_is_not_found(store: Any, zk: ZooKeeper, path: str) -> None:
    store.add("a", {"v": 1})
    store.release("a")
    zk.delete(f"{path}/a/locks")
    with pytest.raises(HandleNotFound):
        store.replace("a", 0, {"v": 2})


# -- get / exists on marked nodes --------------------------------------------------------------


def test_get_and_exists_treat_marked_node_as_absent(store: Any, zk: ZooKeeper, path: str) -> None:
    store.add("a", {"v": 1})
    store.add("b", {"v": 2})
    store.release("a")
    zk.delete(f"{path}/a/locks")
    assert store.exists("a") is None
    assert store.exists("b") == 0
    with pytest.raises(HandleNotFound):
        store.get("a")
    assert store.names() == ["b"]
    assert [e.name for e in store.get_all().entries] == ["b"]


def test_get_of_missing_entry(store: Any) -> None:
    with pytest.raises(HandleNotFound):
        store.get("nope")
    assert store.exists("nope") is None


def test_get_if_exists_answers_none_only_for_a_missing_node(zk: ZooKeeper, path: str) -> None:
    assert zk.get_if_exists(f"{path}/nothing") is None
    zk.create(f"{path}/here", b"data", makepath=True)
    found = zk.get_if_exists(f"{path}/here")
    assert found is not None and found[0] == b"data" and found[1].version == 0


def test_invalid_names_are_refused(store: Any) -> None:
    for name in ["../x", "a/b", "", "a b", "x" * 200]:
        with pytest.raises(InvalidName, match="invalid entry name"):
            store.get(name)


# -- locks and removal ---------------------------------------------------------------------------


def test_delete_blocked_by_another_instances_lock(
    store: Any, path: str, storage: StateStorage, other_zk: ZooKeeper
) -> None:
    store.add("a", {"v": 1})
    other = make_store(other_zk, path, storage)
    assert other.get("a").state == {"v": 1}
    assert store.remove("a") is False
    assert store.exists("a") == 0, "a blocked removal changes nothing"
    assert other.get("a").state == {"v": 1}
    other.release("a")
    assert store.remove("a") is True
    assert store.exists("a") is None
    assert payload_uris(storage) == set()


def test_locks_vanish_on_session_expiry_while_data_stays(
    path: str, storage: StateStorage, zk: ZooKeeper, other_zk: ZooKeeper
) -> None:
    owner = make_store(other_zk, path, storage)
    owner.add("a", {"v": 1})
    remover = make_store(zk, path, storage)
    assert remover.remove("a") is False
    expire_session(other_zk)
    assert zk.children(f"{path}/a/locks") == []
    assert remover.get("a", lock=False).state == {"v": 1}, "the data outlives the session"
    assert remover.remove("a") is True


def test_release_all(store: Any, zk: ZooKeeper, path: str) -> None:
    for name in "abc":
        store.add(name, {"v": name})
    store.release_all()
    for name in "abc":
        assert zk.children(f"{path}/{name}/locks") == []


class FlakyDiscardStorage(StateStorage):
    """Real local storage whose next ``discard`` fails, as an S3 outage would."""

    fail_next = False

    def discard(self, uri: str) -> None:
        if self.fail_next:
            self.fail_next = False
            raise StoreUnavailable("storage failed (injected)")
        super().discard(uri)


def test_removal_is_repeatable_after_a_failing_discard(
    zk: ZooKeeper, path: str, tmp_path: Any
) -> None:
    storage = FlakyDiscardStorage(f"file://{tmp_path}/flaky")
    store = make_store(zk, path, storage)
    handle = store.add("a", {"v": 1})
    storage.fail_next = True
    with pytest.raises(StoreUnavailable):
        store.remove("a")
    assert store.exists("a") is None, "marked: already absent for readers"
    assert storage.exists(handle.uri), "payload still there: the node still points at it"
    assert store.remove("a") is True
    assert zk.exists(f"{path}/a") is None
    assert not storage.exists(handle.uri)


def test_remove_of_missing_entry_is_true(store: Any) -> None:
    assert store.remove("never-was") is True


def test_an_entry_never_locked_here_is_removed_without_a_failed_delete(
    store: Any, zk: ZooKeeper, path: str
) -> None:
    """A remover that never locked the entry (the leader, for every job) looks for its lock
    with a read: a blind delete of a lock that is not there is a failed write, logged and
    fsynced by ZooKeeper, for every entry removed."""
    other = make_store(zk, path, store.storage)
    other.add("a", {"v": 1})
    other.release("a")
    with requests_sent(zk) as sent:
        assert store.remove("a") is True
    assert sent.count("Delete") == 0 and "Exists" in sent, sent
    assert zk.exists(f"{path}/a") is None


def test_a_lock_whose_answer_was_lost_is_still_released(
    store: Any, zk: ZooKeeper, path: str
) -> None:
    """This instance's lock taken by a create whose answer never came (so not known as held)
    is found and released: the entry is removed, not held forever by its own remover."""
    store.add("a", {"v": 1})
    store.release("a")
    zk.create(f"{path}/a/locks/{store.instance_id}", ephemeral=True)  # the lost answer's lock
    assert store.remove("a") is True
    assert zk.exists(f"{path}/a") is None


# -- deleting a tree -----------------------------------------------------------------------------


def _tree(zk: ZooKeeper, root: str) -> list[str]:
    nodes = [f"{root}/a/x", f"{root}/a/y", f"{root}/b", f"{root}/c/z/deep"]
    for node in nodes:
        zk.ensure_path(node)
    return nodes


def test_a_small_tree_is_deleted_in_one_transaction(zk: ZooKeeper, config: StoreConfig) -> None:
    root = f"{config.base_path}/tree"
    _tree(zk, root)
    with requests_sent(zk) as sent:
        assert zk.delete_tree(root) is True
    assert zk.exists(root) is None
    assert sent.count("Transaction") == 1 and "Delete" not in sent, sent
    with requests_sent(zk) as sent:
        assert zk.delete_tree(root) is False, "gone already"
    assert "Transaction" not in sent and "Delete" not in sent, "nothing written for nothing"


def test_a_shallow_tree_is_deleted_without_a_listing_of_each_child(
    zk: ZooKeeper, config: StoreConfig
) -> None:
    """A job's records are one level deep: ``shallow`` lists the root alone and deletes it with
    its children in one transaction. A tree deeper than said (a node planted under a record)
    makes that transaction change nothing; it is then listed and deleted whole, as any tree."""
    root = f"{config.base_path}/records"
    for leaf in ("status", "outcome", "history"):
        zk.ensure_path(f"{root}/{leaf}")
    with requests_sent(zk) as sent:
        assert zk.delete_tree(root, shallow=True) is True
    assert sent == ["GetChildren", "Transaction"], sent
    assert zk.exists(root) is None
    assert zk.delete_tree(root, shallow=True) is False, "gone already"

    nodes = _tree(zk, root)
    with requests_sent(zk) as sent:
        assert zk.delete_tree(root, shallow=True) is True
    assert zk.exists(root) is None and all(zk.exists(node) is None for node in nodes)
    assert sent.count("Transaction") == 2, "the shallow try, then the whole tree's"

    nodes = _tree(zk, root)
    fence = Fence.check(f"{config.base_path}/no-such-leader", error=NotLeader)
    with pytest.raises(NotLeader):
        zk.delete_tree(root, fence=fence, shallow=True)
    assert all(zk.exists(node) is not None for node in nodes), "nothing deleted"


def test_a_tree_changed_since_its_listing_is_deleted_node_by_node(
    zk: ZooKeeper, other_zk: ZooKeeper, config: StoreConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node deleted by somebody else between the listing and the transaction fails the
    transaction as a whole; the rest is then deleted node by node. A child added meanwhile
    is NotEmpty, and what it holds stays."""
    root = f"{config.base_path}/tree"
    _tree(zk, root)
    real = ZooKeeper.children_many

    def listing_then(change: Any) -> Any:
        def children_many(self: ZooKeeper, paths: Any, **kwargs: Any) -> Any:
            found = real(self, paths, **kwargs)
            if any(p.endswith("/c/z") for p in paths):
                change()
            return found

        return children_many

    monkeypatch.setattr(
        ZooKeeper, "children_many", listing_then(lambda: other_zk.delete(f"{root}/b"))
    )
    assert zk.delete_tree(root) is True
    assert zk.exists(root) is None

    _tree(zk, root)
    monkeypatch.setattr(
        ZooKeeper, "children_many", listing_then(lambda: other_zk.create(f"{root}/a/new"))
    )
    with pytest.raises(NotEmpty):
        zk.delete_tree(root)
    assert zk.exists(f"{root}/a/new") is not None


def test_a_tree_is_not_deleted_by_a_writer_whose_fence_is_lost(
    zk: ZooKeeper, config: StoreConfig
) -> None:
    root = f"{config.base_path}/tree"
    nodes = _tree(zk, root)
    fence = Fence.check(f"{config.base_path}/no-such-leader", error=NotLeader)
    with pytest.raises(NotLeader):
        zk.delete_tree(root, fence=fence)
    assert all(zk.exists(node) is not None for node in nodes), "nothing deleted"


def test_a_tree_bigger_than_a_transaction_is_deleted_in_several(
    zk: ZooKeeper, config: StoreConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("zkstore.zookeeper.zk.TREE_BATCH", 2)
    root = f"{config.base_path}/tree"
    _tree(zk, root)  # 8 nodes: the root, a, x, y, b, c, z, deep
    with requests_sent(zk) as sent:
        assert zk.delete_tree(root) is True
    assert zk.exists(root) is None
    assert sent.count("Transaction") == 4, sent


# -- corruption ----------------------------------------------------------------------------------


def test_garbage_in_znode_raises_corrupt_handle_naming_the_path(
    store: Any, zk: ZooKeeper, path: str
) -> None:
    store.add("a", {"v": 1})
    zk.set(f"{path}/a", b"\x80garbage")
    with pytest.raises(CorruptHandle, match=f"{path}/a"):
        store.get("a")
    assert zk.children(f"{path}/a/locks") == [store.instance_id], "pre-existing lock kept"


def test_failed_get_releases_the_lock_it_took(
    store: Any, zk: ZooKeeper, path: str, storage: StateStorage, other_zk: ZooKeeper
) -> None:
    store.add("a", {"v": 1})
    zk.set(f"{path}/a", b"{}")
    reader = make_store(other_zk, path, storage)
    with pytest.raises(CorruptHandle):
        reader.get("a")
    assert reader.instance_id not in zk.children(f"{path}/a/locks")


@pytest.mark.parametrize(
    ("damage", "error"),
    [
        (lambda data: data[:-3], CorruptPayload),
        (lambda data: data[:-1] + b"X", CorruptPayload),
        (None, PayloadMissing),
    ],
    ids=["truncated", "flipped", "deleted"],
)
def test_corrupt_truncated_or_missing_payload(
    store: Any, storage: StateStorage, damage: Any, error: type[Exception]
) -> None:
    handle = store.add("a", {"v": "x" * 100})
    store.add("b", {"v": "fine"})
    target = storage.path_of(handle.uri)
    if damage is None:
        storage.discard(handle.uri)
    else:
        storage.fs.pipe_file(target, damage(storage.fs.cat_file(target)))
    with pytest.raises(error):
        store.get("a")
    result = store.get_all()
    assert [e.name for e in result.entries] == ["b"], "one broken entry never hides the others"
    assert [(b.name, type(b.error)) for b in result.broken] == [("a", error)]


def test_get_all_reports_corrupt_handles(store: Any, zk: ZooKeeper, path: str) -> None:
    store.add("a", {"v": 1})
    store.add("b", {"v": 2})
    zk.set(f"{path}/a", b'{"format": 0}')
    result = store.get_all()
    assert [e.name for e in result.entries] == ["b"]
    assert [b.name for b in result.broken] == ["a"]
    assert isinstance(result.broken[0].error, CorruptHandle)
    zk.set(f"{path}/a", b'{"format": 99}')  # a newer protocol's: broken here, but not garbage
    (broken,) = store.get_all().broken
    assert isinstance(broken.error, NewerRecord) and not isinstance(broken.error, CorruptHandle)


def test_get_all_with_locks_and_many_entries(store: Any, zk: ZooKeeper, path: str) -> None:
    for i in range(50):
        store.add(f"j{i:03d}", {"i": i})
    store.release_all()
    result = store.get_all(lock=True)
    assert sorted(e.state["i"] for e in result.entries) == list(range(50))
    assert zk.children(f"{path}/j007/locks") == [store.instance_id]


# -- fencing -------------------------------------------------------------------------------------


def test_fenced_write_rejected_once_fence_node_is_gone_even_after_new_session(
    store: Any, zk: ZooKeeper, config: StoreConfig, storage: StateStorage
) -> None:
    election = f"{config.base_path}/leader/election"
    zk.ensure_path(election)
    fence_node = zk.create(f"{election}/c-", ephemeral=True, sequence=True)
    fence = Fence.check(fence_node, 0, error=NotLeader, description="leader")
    store.add("a", {"v": 1}, fence=fence)
    expire_session(zk)  # kazoo silently reconnects with a new session
    assert zk.exists(fence_node) is None
    with pytest.raises(NotLeader):
        store.add("b", {"v": 2}, fence=fence)
    with pytest.raises(NotLeader):
        store.replace("a", 0, {"v": 3}, fence=fence)
    with pytest.raises(FenceLost):
        store.remove("a", fence=fence)
    assert store.exists("b") is None
    assert store.get("a", lock=False).state == {"v": 1}
    assert_invariant_1(zk, store.path, storage)
    referenced = {store.get_handle("a").uri}
    assert payload_uris(storage) == referenced, "rejected writes leave no payload behind"
    assert store.add("b", {"v": 2}).version == 0, "the same write without the fence succeeds"


# -- outages -------------------------------------------------------------------------------------


def test_zookeeper_stopped_mid_test_gives_store_unavailable_within_timeout(
    private_zk_server: EmbeddedZooKeeper, storage: StateStorage
) -> None:
    zk = connected(private_zk_server.connect_string, session_timeout=10, timeout=1.5)
    try:
        store = make_store(zk, "/outage/jobs", storage)
        store.add("a", {"v": 1})
        private_zk_server.stop()
        for operation in [
            lambda: store.get("a"),
            lambda: store.exists("a"),
            store.names,
            store.get_all,
            lambda: store.add("b", {"v": 2}),
            lambda: store.remove("a"),
        ]:
            start = time.monotonic()
            with pytest.raises(StoreUnavailable):
                operation()
            # Not a hang: the deadline is 1.5 s per call; the bound is generous for a busy machine.
            assert time.monotonic() - start < 30
        assert_invariant_1_after_restart(private_zk_server, zk, storage)
    finally:
        zk.stop()


def assert_invariant_1_after_restart(
    server: EmbeddedZooKeeper, zk: ZooKeeper, storage: StateStorage
) -> None:
    server.start()
    assert zk.wait_connected(15)
    assert_invariant_1(zk, "/outage/jobs", storage)


def test_unreachable_zookeeper_at_start_is_a_clear_error() -> None:
    start = time.monotonic()
    with pytest.raises(StoreUnavailable, match="cannot reach ZooKeeper"):
        ZooKeeper("127.0.0.1:9", timeout=1.0).start()
    assert time.monotonic() - start < 30, "not a hang"


def test_answer_lost_while_server_paused_is_resolved_or_reported(
    private_zk_server: EmbeddedZooKeeper, storage: StateStorage
) -> None:
    """The server stops answering mid-write: the store resolves the outcome or says it cannot."""
    zk = connected(private_zk_server.connect_string, session_timeout=10, timeout=1.0)
    try:
        store = make_store(zk, "/paused/jobs", storage)
        pid = private_zk_server.pid
        assert pid is not None
        pause(pid, timeout=zk.timeout)
        timer = threading.Timer(1.5, os.kill, (pid, signal.SIGCONT))
        timer.start()
        try:
            handle = store.add("a", {"v": 1})
        except OutcomeUnknown:
            handle = None
        timer.join()
        assert zk.wait_connected(15)
        referenced = assert_invariant_1(zk, "/paused/jobs", storage)
        if handle is not None:
            assert referenced == {handle.uri}
    finally:
        os.kill(private_zk_server.pid or 0, signal.SIGCONT)
        zk.stop()


# -- crashes between steps -----------------------------------------------------------------------

CRASH_POINTS = {
    "add": ["add:payload-written", "add:committed"],
    "replace": ["replace:payload-written", "replace:committed", "replace:old-discarded"],
    "remove": [
        "remove:lock-released",
        "remove:marked",
        "remove:payload-discarded",
        "remove:deleted",
    ],
}


def run_crashing(config: StoreConfig, path: str, storage: StateStorage, op: str, step: str) -> int:
    spec = {
        "hosts": config.zk_hosts,
        "path": path,
        "storage": storage.root_url,
        "op": op,
        "name": "job",
        "step": step,
    }
    return run_child("tests.crash_child", spec)


@pytest.mark.parametrize(
    ("op", "step"), [(op, step) for op, steps in CRASH_POINTS.items() for step in steps]
)
def test_crash_between_steps_keeps_invariant_1(
    op: str,
    step: str,
    store: Any,
    zk: ZooKeeper,
    path: str,
    config: StoreConfig,
    storage: StateStorage,
) -> None:
    if op != "add":
        store.add("job", {"value": "old"})
        store.release("job")
    assert run_crashing(config, path, storage, op, step) == 77, "the child died at the step"
    referenced = assert_invariant_1(zk, path, storage)
    orphans = payload_uris(storage) - referenced
    assert len(orphans) <= 1, f"at most the one in-flight payload is orphaned: {orphans}"
    if op == "add":
        expected = {"add:payload-written": None, "add:committed": {"value": "new"}}[step]
        assert (
            store.get("job", lock=False).state if store.exists("job") is not None else None
        ) == expected
    elif op == "replace":
        state = store.get("job", lock=False).state
        assert state == (
            {"value": "old"} if step == "replace:payload-written" else {"value": "replaced"}
        )
    # Whatever happened, removal can always be finished (once the dead child's lock expires).
    wait_for(lambda: store.remove("job"), timeout=15, what="removal")
    assert zk.exists(f"{path}/job") is None
    assert payload_uris(storage) - referenced == orphans, "removal discards what it references"
    for orphan in orphans:
        storage.discard(orphan)
    assert payload_uris(storage) == set()


def test_no_zookeeper_write_exceeds_64_kb(zk: ZooKeeper, path: str) -> None:
    """Invariant 7: big things go to object storage; ZooKeeper refuses them before sending."""
    from zkstore.errors import TooLarge  # one class for every size limit (issue 24)
    from zkstore.zookeeper.ops import Create

    zk.ensure_path(path)
    big = b"x" * (64 * 1024 + 1)
    with pytest.raises(TooLarge, match="65536-byte limit"):
        zk.create(f"{path}/big", big)
    with pytest.raises(TooLarge):
        zk.commit([Create(f"{path}/a", big[:40_000]), Create(f"{path}/b", big[:40_000])])
    assert zk.children(path) == []
