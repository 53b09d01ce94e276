"""The benchmarks' wait for results loads the ZooKeeper it measures as little as it can."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.common import wait_all_exist
from tests.helpers import requests_sent
from zkstore.config import StoreConfig
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


@pytest.fixture
def other_zk(config: StoreConfig) -> Iterator[ZooKeeper]:
    client = ZooKeeper(config.zk_hosts, timeout=config.timeout).start()
    yield client
    client.stop()


def test_nodes_made_after_the_look_are_noticed_by_their_watches(
    zk: ZooKeeper, other_zk: ZooKeeper, config: StoreConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One look with a watch on each path, then only the watches: with no second look before
    the hour is out, the wait ends once the last node is made (a lost watch would make it time
    out instead)."""
    paths = [f"{config.base_path}/r{i}" for i in range(20)]
    other_zk.create(paths[0])
    looked = threading.Event()
    real = zk.exists_many

    def exists_many(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        looked.set()
        return found

    def make_the_rest() -> None:
        looked.wait(config.timeout)
        for path in paths[1:]:
            other_zk.create(path)

    monkeypatch.setattr(zk, "exists_many", exists_many)
    maker = threading.Thread(target=make_the_rest)
    maker.start()
    with requests_sent(zk) as sent:
        wait_all_exist(zk, paths, timeout=10 * config.timeout, poll=3600.0)
    maker.join()
    assert sent == ["Exists"] * len(paths), "one look at each, nothing more"


def test_a_node_never_made_times_out(zk: ZooKeeper, config: StoreConfig) -> None:
    with pytest.raises(TimeoutError, match="1 of 1 nodes missing"):
        wait_all_exist(zk, [f"{config.base_path}/never"], timeout=0.3, poll=0.1)
