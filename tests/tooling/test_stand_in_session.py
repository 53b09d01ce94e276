"""Issue 50 item 9: the stand-in drivers of the tests (a ``running`` node, heartbeats, fenced
writes without a driver process) hold their nodes in sessions of their own that outlive a
stall of the loaded machine: :data:`tests.helpers.HANDS_SESSION`, never the harness's 4 s,
whose expiry under the soak's busy loops took the nodes the artifact tests stood on (twice)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers import HANDS_SESSION
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.records.job_records import RunningInfo
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def test_a_stand_in_holds_its_running_node_in_a_long_session_of_its_own(
    cluster: Cluster, config: StoreConfig, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    driver, other = stand_in_session(), stand_in_session()
    assert len({driver.session_id, other.session_id, cluster.zk.session_id}) == 3
    # Granted as asked, by the server too: a stall of the cluster's session timeout (and
    # several times over) leaves the stand-in's nodes in place.
    for session in (driver, other):
        assert session.granted_session_timeout >= HANDS_SESSION > 2 * config.session_timeout
    running = cluster.layout.running("j")
    cluster.zk.ensure_path(cluster.layout.job_dir("j"))
    info = RunningInfo(version=None, attempt=1, host="h", pid=1, started=parse_time(utc_now()))
    driver.create(running, info.to_bytes(), ephemeral=True)
    assert cluster.zk.exists(running) is not None
    driver.stop()  # the stand-in driver dies: its node goes at once, not after a timeout
    assert cluster.zk.exists(running) is None
