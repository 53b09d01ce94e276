"""The embedded server never takes another server's answer for its own.

A port chosen free can be taken by another process before the JVM binds it (the tests start
many servers side by side). Before this check, ``start()`` returned at once when another
ZooKeeper answered ``imok`` on the port, while its own JVM exited with "Address already in
use": the test then paused (SIGSTOP) a dead process and talked to a foreign server.
"""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from tests.helpers import wait_for
from zkstore.dev.embedded import EmbeddedZooKeeper, four_letter_word
from zkstore.errors import StoreUnavailable

pytestmark = pytest.mark.integration


def _data_dir(server: EmbeddedZooKeeper) -> str:
    """The data directory the server on ``server.port`` says it runs on (once it serves)."""

    def data_dir() -> str | None:
        conf = four_letter_word("127.0.0.1", server.port, "conf")
        lines = [line for line in conf.splitlines() if line.startswith("dataDir=")]
        return lines[0].split("=", 1)[1] if lines else None

    return wait_for(data_dir, 20, what="the server serving")


def test_a_chosen_port_taken_by_another_server_is_replaced(zk_server: EmbeddedZooKeeper) -> None:
    server = EmbeddedZooKeeper()
    server.port = zk_server.port  # as if another worker's server had bound it first
    try:
        server.start()
        assert server.port != zk_server.port
        assert server.running
        assert _data_dir(server).startswith(str(server.data_dir))
        client = KazooClient(server.connect_string)
        client.start(timeout=10)
        client.create("/mine", b"1")
        client.stop()
        assert _data_dir(zk_server).startswith(str(zk_server.data_dir))
    finally:
        server.close()


def test_a_given_port_held_by_another_server_raises(zk_server: EmbeddedZooKeeper) -> None:
    server = EmbeddedZooKeeper(port=zk_server.port)
    try:
        with pytest.raises(StoreUnavailable, match="another server holds the port"):
            server.start(timeout=20)
        assert not server.running
    finally:
        server.close()
