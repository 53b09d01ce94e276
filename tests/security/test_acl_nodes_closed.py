"""ZooKeeper credentials and ACLs: every node zkstore creates is closed to strangers, a wrong
password gets one clear line, and the secret never leaves the process."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.cli import environment, script
from tests.helpers import MONITOR_ID, MONITOR_SECRET, SECRET, hands_client, session, wait_for
from zkstore.admin.acl import walk
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig, ZkAuth
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.errors import EXIT_ACCESS_DENIED, AccessDenied, HandleNotFound
from zkstore.jobs.definition import JobDefinition
from zkstore.records.job_states import SUCCEEDED
from zkstore.zookeeper.zk import ZooKeeper, default_acl

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent


def zkstore(config: StoreConfig, auth: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed script with the connection and ``auth`` in the environment."""
    return script(None, "", *args, env=environment(config, auth), timeout=120)


# -- configuration ---------------------------------------------------------------------------


def test_digest_command_prints_the_id_of_a_password() -> None:
    done = subprocess.run(
        [str(BIN / "zkstore"), "acl", "digest", "monitor"],
        input=f"{MONITOR_SECRET}\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == MONITOR_ID
    assert MONITOR_SECRET not in done.stdout


# -- what strangers can do -------------------------------------------------------------------


def test_wrong_password_gets_one_clear_line_from_the_cli(secure: StoreConfig) -> None:
    with Cluster.open(secure) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("job1", jobs.noop))
    ok = zkstore(secure, f"alice:{SECRET}", "jobs", "list")
    assert ok.returncode == 0 and "job1" in ok.stdout, ok.stderr
    for auth in (f"alice:not-{SECRET}", None):
        denied = zkstore(secure, auth, "jobs", "list")
        assert denied.returncode == EXIT_ACCESS_DENIED
        lines = denied.stderr.strip().splitlines()
        assert len(lines) == 1, denied.stderr
        assert lines[0].startswith("zkstore: error: ZooKeeper denied")
        assert ("digest user 'alice'" if auth else "without credentials") in lines[0]
        assert SECRET not in denied.stderr + denied.stdout
    # its drivers would run as its user, which holds credentials: accepted, to reach the check
    daemon = zkstore(
        secure, f"alice:not-{SECRET}", "daemon", "--id", "d1", "--jobs-may-read-secrets"
    )
    assert daemon.returncode == EXIT_ACCESS_DENIED, "the daemon checks its credentials at start"
    assert daemon.stderr.strip().splitlines()[-1].startswith("zkstore: error: ZooKeeper denied")
    assert SECRET not in daemon.stderr
    bad_form = zkstore(secure, SECRET, "jobs", "list")
    assert bad_form.returncode == 2 and SECRET not in bad_form.stderr


def test_secret_never_in_help_or_verbose_logs(secure: StoreConfig, tmp_path: Path) -> None:
    secret_file = tmp_path / "zk-auth"
    secret_file.write_text(f"alice:{SECRET}\n")
    secret_file.chmod(0o600)  # a secret file others may read is refused
    outputs = [
        zkstore(secure, f"alice:{SECRET}", *words, "--help")
        for words in (["jobs", "list"], ["daemon"], ["submit"], ["acl", "apply"])
    ]
    outputs.append(zkstore(secure, f"alice:{SECRET}", "-vv", "jobs", "list"))
    outputs.append(zkstore(secure, None, "-vv", "jobs", "list", "--zk-auth-file", str(secret_file)))
    outputs.append(zkstore(secure, f"alice:wrong-{SECRET}", "-vv", "jobs", "list"))
    for done in outputs:
        assert SECRET not in done.stdout + done.stderr
    assert "ZKSTORE_ZK_AUTH" in outputs[0].stdout
    assert outputs[-2].returncode == 0, "--zk-auth-file works"


# -- the daemon ------------------------------------------------------------------------------


#: the daemons' tests share a fleet with credentials (the module's other tests need a cluster
#: without them, or make their own)
ON_A_SECURE_FLEET = pytest.mark.shared_fleet(credentials=True)


@ON_A_SECURE_FLEET
def test_every_node_of_a_running_cluster_carries_the_acl(
    secure: StoreConfig, local: LocalCluster, tmp_path: Path
) -> None:
    """Sequential, ephemeral and makepath-parent nodes included; and no secret in any log."""
    local.start_daemon("d1")
    local.wait_for_leader()
    out = tmp_path / "out"
    layout = Cluster(secure).layout

    def checked_with_a_checkpoint() -> set[str] | None:
        """Every node checked, once a checkpoint is among them: the job's retention prunes
        its older checkpoints as it writes new ones, so one listed by the walk may be gone
        by its turn to be read."""
        nodes = check_every_node(secure)
        checkpoint = layout.checkpoints(job_id) + "/"
        return nodes if any(n.startswith(checkpoint) for n in nodes) else None

    with hands_client(secure) as client:
        job_id = client.submit_function(jobs.steps, str(out), 30, 0.2, job_id="acl-job")
        wait_for(lambda: local.driver_pid(job_id), timeout=60, what="a running driver")
        wait_for(lambda: len(list(out.glob("step-*"))) >= 2, timeout=60, what="checkpoints")
        nodes = wait_for(checked_with_a_checkpoint, timeout=30, what="a checkpoint's ACL read")
        client.cancel(job_id)
        client.wait(job_id, timeout=60)
    assert secure.root in nodes, "the root that makepath created"
    assert layout.running(job_id) in nodes and layout.leader_info in nodes  # ephemeral
    assert any(n.startswith(layout.election + "/") for n in nodes)  # ephemeral sequential
    assert any(n.startswith(layout.checkpoints(job_id) + "/") for n in nodes)
    logs = [d.log() for d in local.daemons.values()]
    logs += [p.read_text() for p in (local.work_dir / "drivers").rglob("*.log")]
    assert logs and not any(SECRET in log for log in logs)
    assert not any("SECURITY WARNING" in log for log in logs)


def check_every_node(config: StoreConfig, top: str | None = None) -> set[str]:
    """Every node under ``top`` (default: the test's root) carries exactly our ACL: the
    cluster's, and where a job's driver writes, its job's (:mod:`zkstore.zookeeper.identity`).
    Returns the nodes checked: one gone since the walk listed it (a pruned checkpoint) is not
    among them."""
    outside = sorted(map(repr, default_acl(config.zk_auth, config.zk_read_acl) or []))
    checked = set()
    with ZooKeeper.from_config(config).start() as zk:
        assert zk.acl_policy is not None
        for node in walk(zk, top or config.root):
            inside = node.startswith(config.base_path + "/")
            expected = sorted(map(repr, zk.acl_policy.acl_for(node))) if inside else outside
            try:
                acls = zk.get_acls(node)[0]
            except HandleNotFound:  # gone since the walk listed it
                continue
            assert sorted(map(repr, acls)) == expected, node
            checked.add(node)
    return checked


@ON_A_SECURE_FLEET
def test_job_code_with_its_drivers_credentials_writes_nothing_outside_its_job(
    secure: StoreConfig, local: LocalCluster, tmp_path: Path
) -> None:
    """Issue 43: the driver holds its job's ZooKeeper identity, not the cluster's; job code
    that finds it and opens its own session is denied every write outside its job."""
    from tests import secret_jobs

    local.start_daemon("d1")
    local.wait_for_leader()
    found = tmp_path / "found.json"
    with hands_client(secure) as client:
        victim = client.submit_function(jobs.steps, str(tmp_path / "v"), 1, 0.01, job_id="victim")
        assert client.wait(victim, timeout=120).outcome == SUCCEEDED
        client.submit_function(jobs.steps, str(tmp_path / "w"), 200, 0.2, job_id="waiting")
        wait_for(lambda: local.driver_pid("waiting"), timeout=60, what="a second job running")
        job = client.submit_function(secret_jobs.reach_out, str(found), "waiting", job_id="r")
        assert client.wait(job, timeout=120).outcome == SUCCEEDED
        client.cancel("waiting")
    result = json.loads(found.read_text())
    assert result.pop("cluster_credentials") is False, "the cluster's credentials reached it"
    assert result.pop("driver_identity") is True
    assert result.pop("own spark record") == "written", "its own records are its own"
    assert result == dict.fromkeys(result, "denied"), result


def test_daemon_warns_about_an_open_root_and_strict_acl_refuses(
    config: StoreConfig, tmp_path: Path
) -> None:
    with Cluster.open(config):
        pass  # the cluster root exists, open to anyone (no credentials)
    strict = zkstore(config, None, "daemon", "--strict-acl", "--id", "strict")
    assert strict.returncode == 2
    assert (
        strict.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "zkstore: usage error: refusing to start (--strict-acl): ZooKeeper ACL lets anyone"
        )
    )
    local = LocalCluster(config, tmp_path / "rt")
    try:
        daemon = local.start_daemon("d1")
        local.wait_for_leader()
        assert "SECURITY WARNING: ZooKeeper ACL lets anyone change this cluster" in daemon.log()
    finally:
        local.stop()


def test_acl_apply_closes_an_open_cluster(config: StoreConfig, secure: StoreConfig) -> None:
    with Cluster.open(config) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("old", jobs.noop))
    auth = f"alice:{SECRET}"
    assert zkstore(secure, auth, "acl", "check").returncode == 1
    dry = zkstore(secure, auth, "acl", "apply", "--dry-run")
    assert dry.returncode == 0 and "would change" in dry.stdout
    done = zkstore(secure, auth, "acl", "apply", "--yes")
    assert done.returncode == 0, done.stderr
    check = zkstore(secure, auth, "acl", "check", "--format", "json")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "digest:alice=cdrwa" in check.stdout and SECRET not in check.stdout
    assert len(check_every_node(secure, secure.base_path)) > 5
    with session(secure, None) as stranger, pytest.raises(AccessDenied):
        stranger.get(Cluster(secure).layout.job_handle("old"))
    with hands_client(secure) as client:
        assert client.status("old").state != SUCCEEDED


# -- SASL, passed through to kazoo -----------------------------------------------------------


@pytest.fixture
def sasl_server(tmp_path: Path) -> Iterator[EmbeddedZooKeeper]:
    """A private ZooKeeper that knows one SASL DIGEST-MD5 user (zkstore / SECRET)."""
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(
        "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f'  user_zkstore="{SECRET}";\n}};\n'
    )
    server = EmbeddedZooKeeper(
        extra_config=["authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"],
        jvm_options=[f"-Djava.security.auth.login.config={jaas}"],
    )
    with server:
        yield server


def test_sasl_credentials_pass_through_to_kazoo(
    sasl_server: EmbeddedZooKeeper, config: StoreConfig
) -> None:
    sasl = config.with_changes(
        zk_hosts=sasl_server.connect_string,
        zk_auth=ZkAuth.parse(f"sasl:DIGEST-MD5:zkstore:{SECRET}"),
    )
    with Cluster.open(sasl) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("job1", jobs.noop))
        handle = cluster.layout.job_handle("job1")
        acl, _ = cluster.zk.get_acls(handle)
    assert [(a.id.scheme, a.id.id, a.perms) for a in acl] == [("sasl", "zkstore", 31)]
    with session(sasl, None) as stranger, pytest.raises(AccessDenied):
        stranger.get(handle)
    with pytest.raises(AccessDenied, match="authentication failed") as caught:
        session(sasl, f"sasl:DIGEST-MD5:zkstore:wrong-{SECRET}")
    assert SECRET not in str(caught.value)
    denied = zkstore(sasl, f"sasl:DIGEST-MD5:zkstore:wrong-{SECRET}", "jobs", "list")
    assert denied.returncode == EXIT_ACCESS_DENIED
    assert len(denied.stderr.strip().splitlines()) == 1 and SECRET not in denied.stderr
    ok = zkstore(sasl, f"sasl:DIGEST-MD5:zkstore:{SECRET}", "jobs", "list")
    assert ok.returncode == 0 and "job1" in ok.stdout, ok.stderr
