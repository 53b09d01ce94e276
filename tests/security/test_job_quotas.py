"""Quotas ZooKeeper enforces on each job's node (issue 54 item 3), as a user meets them.

The probe of the issue: job code that takes the kazoo client underneath zkstore's wrapper (with
its job's own identity: the cluster has credentials) and writes 1 MB nodes under its job's
node in a loop. Its writes are refused by the server past its quota, the daemon keeps its
leadership, and another user's ``zkstore submit`` succeeds. And ``zkstore fleet status`` says
whether the ensemble enforces quotas at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import script
from tests.helpers import SESSION_TIMEOUT, hands_client, wait_for, written_json
from zkstore.cluster.quotas import job_quota, quota_dir
from zkstore.config import StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.layout import Layout
from zkstore.records.job_states import FAILED, SUCCEEDED
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.e2e

#: 1 MB nodes, as many as would take 40 MB (well past a job's quota; bounded so that a server
#: without enforcement survives the test)
FLOOD = '''
import gc, json
from pathlib import Path


def run(ctx, out, count):
    """Writes 1 MB nodes under its job's node with the raw kazoo client of its driver."""
    from kazoo.client import KazooClient
    from kazoo.security import make_digest_acl

    from zkstore.config import StoreConfig

    config = next(o for o in gc.get_objects() if isinstance(o, StoreConfig) and o.zk_driver)
    user, _, password = str(config.zk_driver["job"]).removeprefix("digest:").partition(":")
    client = next(o for o in gc.get_objects() if isinstance(o, KazooClient) and o.connected)
    acl = [make_digest_acl(user, password, all=True)]
    base = f"{config.base_path}/jobs/{ctx.job_id}"
    raised = "changed"
    try:  # its own quota, lifted
        client.set(f"/zookeeper/quota{base}/zookeeper_limits", b"count=-1,bytes=-1")
    except Exception as exc:
        raised = type(exc).__name__
    written, refused = 0, None
    for i in range(int(count)):
        try:
            client.create(f"{base}/flood-{i}", b"x" * 1_000_000, acl=acl)
            written += 1
        except Exception as exc:
            refused = type(exc).__name__
            break
    found = {"written": written, "refused": refused, "raised": raised}
    Path(out, "flood.json").write_text(json.dumps(found))
    if refused is not None:
        raise RuntimeError(f"refused after {written} nodes: {refused}")
'''

NOOP = """
def run(ctx):
    return None
"""


@pytest.fixture
def guarded(
    secure: StoreConfig, private_zk_server: EmbeddedZooKeeper, tmp_path: Path
) -> Iterator[LocalCluster]:
    """Daemons of a cluster with credentials on a ZooKeeper of the test's own (a server that
    did not enforce would be filled by the flood)."""
    config = secure.with_changes(
        zk_hosts=private_zk_server.connect_string, session_timeout=SESSION_TIMEOUT
    )
    cluster = LocalCluster(config, tmp_path / "rt", restart_backoff=0.2)
    yield cluster
    cluster.stop()


def test_a_job_writing_past_its_quota_is_refused_and_the_cluster_stays_up(
    guarded: LocalCluster, laptop: Path, tmp_path: Path
) -> None:
    config = guarded.config
    (laptop / "flood.py").write_text(FLOOD)
    (laptop / "noop.py").write_text(NOOP)
    out = tmp_path / "out"
    out.mkdir()
    guarded.start_daemon("d1")
    leader = guarded.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
    before = guarded.leader()
    assert before is not None
    submitted = script(
        config, "submit", "flood.py:run", "--job-id", "flood", "--max-attempts", "1",
        "--", str(out), "40", cwd=laptop,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    found = written_json(out / "flood.json", timeout=90, what="the flood's end")
    quota = job_quota()
    assert found["raised"] == "NoAuthError", "a job may not change its own quota"
    assert found["refused"] == "QuotaExceededError", found
    assert 0 < found["written"] * 1_000_000 <= quota.size, found
    # Another user's submission goes through, to the same daemon that still leads.
    other = script(config, "submit", "noop.py:run", "--job-id", "other", "--wait", cwd=laptop)
    assert other.returncode == 0, other.stderr
    now = guarded.leader()
    assert now is not None and (now.daemon_id, now.since) == (before.daemon_id, before.since)
    with hands_client(config) as client:
        failed = client.wait("flood", timeout=60)
    assert failed.outcome == FAILED and "QuotaExceededError" in (failed.error or "")
    assert "leadership lost" not in leader.log()
    # Each quota goes with its job's records.
    layout = Layout(config.base_path)
    with ZooKeeper.from_config(config).start() as zk:
        for job_id in ("flood", "other"):
            wait_for(
                lambda job_id=job_id: zk.exists(quota_dir(layout.job_dir(job_id))) is None,
                timeout=30,
                what=f"the quota of {job_id} removed",
            )
    shown = script(config, "jobs show", "other", "--format", "json")
    assert json.loads(shown.stdout)["state"] == SUCCEEDED


def test_fleet_status_says_whether_the_ensemble_enforces_quotas(
    secure: StoreConfig, tmp_path: Path
) -> None:
    for enforce in (True, False):
        with EmbeddedZooKeeper(extra_config=[f"enforceQuota={str(enforce).lower()}"]) as server:
            server.start()
            config = secure.with_changes(zk_hosts=server.connect_string)
            with ZooKeeper.from_config(config).start() as zk:
                zk.ensure_path(config.base_path)
            done = script(config, "fleet status", "--format", "json")
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["quotas_enforced"] is enforce
            text = script(config, "fleet status")
            assert text.returncode == 0, text.stderr
            said = "ZooKeeper quotas: enforced" if enforce else "ZooKeeper quotas: NOT enforced"
            assert said in text.stdout
            with ZooKeeper.from_config(config).start() as zk:
                left = zk.children(config.base_path) + zk.children(quota_dir(config.base_path))
                assert not [n for n in left if "probe" in n], "the probe left something behind"
