"""ZooKeeper credentials and read ACLs: parsed, and never shown."""

from __future__ import annotations

import pytest
from kazoo.protocol.states import KeeperState

from tests.helpers import MONITOR_ID, MONITOR_SECRET, SECRET
from zkstore.config import StoreConfig, ZkAuth, parse_read_acl
from zkstore.errors import AccessDenied, ConfigError
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.unit


def test_credentials_parse_and_never_show_their_secret() -> None:
    auth = ZkAuth.parse(f"digest:alice:{SECRET}")
    assert (auth.scheme, auth.user, auth.secret) == ("digest", "alice", SECRET)
    assert ZkAuth.parse(f"alice:{SECRET}") == auth
    assert ZkAuth.parse(auth.to_text()) == auth
    sasl = ZkAuth.parse(f"sasl:digest-md5:bob:{SECRET}")
    assert (sasl.scheme, sasl.mechanism, sasl.user) == ("sasl", "DIGEST-MD5", "bob")
    assert ZkAuth.parse("sasl:GSSAPI").mechanism == "GSSAPI"
    config = StoreConfig(zk_auth=auth, zk_read_acl=(MONITOR_ID,))
    for text in (repr(auth), str(auth), auth.describe(), repr(config), repr(sasl)):
        assert SECRET not in text
    assert StoreConfig.from_json(config.to_json()) == config
    for bad in ("alice", f"sasl:PLAIN:alice:{SECRET}", f":{SECRET}"):
        with pytest.raises(ConfigError) as caught:
            ZkAuth.parse(bad)
        assert SECRET not in str(caught.value)


def test_read_acl_wants_ids_not_passwords() -> None:
    assert parse_read_acl(f" {MONITOR_ID} ,sasl:monitor") == (MONITOR_ID, "sasl:monitor")
    with pytest.raises(ConfigError, match="not a password") as caught:
        parse_read_acl(f"digest:monitor:{MONITOR_SECRET}")
    assert MONITOR_SECRET not in str(caught.value)
    with pytest.raises(ConfigError, match="scheme:id"):
        parse_read_acl("nonsense")
    with pytest.raises(ConfigError, match="needs ZKSTORE_ZK_AUTH"):
        StoreConfig(zk_read_acl=(MONITOR_ID,))


def test_rejected_credentials_stay_rejected_once_kazoo_reports_the_client_closed() -> None:
    """kazoo passes AUTH_FAILED and goes on to CLOSED at once (it never connects again): a
    read waiting for the connection must still say "authentication failed", not "unreachable"
    (before the latch: 2 runs in 15 of ``zkstore jobs list`` with a wrong SASL password under
    load exited 6, StoreUnavailable, instead of 8)."""
    zk = ZooKeeper(
        "127.0.0.1:9", session_timeout=4.0, timeout=0.2, auth=ZkAuth.parse("sasl:DIGEST-MD5:u:p")
    )
    zk._client._session_callback(KeeperState.AUTH_FAILED)
    zk._client._session_callback(KeeperState.CLOSED)
    assert zk._client.client_state == KeeperState.CLOSED
    with pytest.raises(AccessDenied, match="authentication failed"):
        zk.exists("/")
