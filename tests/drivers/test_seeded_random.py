"""A job that seeds Python's global ``random`` for reproducible results draws the same numbers in
its driver whatever zkstore's session and retries do meanwhile: neither draws from the global
generator (kazoo's connection loop did, for its ping jitter, on every turn; so did zkstore's
retry backoff). Hypothesis needs the same of the suite's property tests: nothing may move the
global generator while it draws an example (a ping mid-draw warned in the S3 property)."""

from __future__ import annotations

import json
import os
import random

import kazoo.protocol.connection
import pytest

from tests.helpers import connected, holds_for
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.zookeeper.retry import JITTER, Retry, TryAgain

pytestmark = pytest.mark.integration


def test_a_live_sessions_pings_leave_the_global_random_alone(zk_server: EmbeddedZooKeeper) -> None:
    """kazoo's loop turns at least three times per session timeout (it pings at a third)."""
    zk = connected(zk_server.connect_string, session_timeout=1.0, timeout=1.0)
    try:
        random.seed(42)
        state = random.getstate()
        holds_for(
            lambda: random.getstate() == state,
            3 * zk.session_timeout,
            what="the global random's state, with a session pinging",
        )
    finally:
        zk.stop()


def test_retries_leave_the_global_random_alone() -> None:
    random.seed(42)
    state = random.getstate()
    tries = []

    def flaky() -> None:
        tries.append(1)
        if len(tries) < 3:
            raise TryAgain("not yet")

    Retry(backoff=0.001, max_backoff=0.002).call(flaky, what="a flaky call")
    assert len(tries) == 3 and random.getstate() == state


def test_forked_children_jitter_apart() -> None:
    """Drivers forked from one fork server: their private generators are seeded again at the
    fork, as the global one is, so that they do not back off and reconnect in step."""
    drawn = []
    for _ in range(2):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its draws, then gone
            os.close(read)
            os.write(
                write,
                json.dumps([JITTER.random(), kazoo.protocol.connection.random.random()]).encode(),
            )
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            drawn.append(json.loads(pipe.read()))
        os.waitpid(pid, 0)
    (retry_a, kazoo_a), (retry_b, kazoo_b) = drawn
    assert retry_a != retry_b and kazoo_a != kazoo_b
    assert kazoo.protocol.connection.random is JITTER, "kazoo draws from zkstore's generator"
