"""``zkstore daemons drain|undrain`` of an id the fleet does not know exits 4 (issue 21,
finding 5): a typo must not look like a drained daemon. Through the installed script."""

from __future__ import annotations

import subprocess

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import connection
from tests.helpers import BIN, SESSION_TIMEOUT, wait_for
from zkstore.config import StoreConfig
from zkstore.errors import EXIT_NOT_FOUND
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.e2e


def daemons(config: StoreConfig, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "zkstore"), "daemons", *words, *connection(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_unknown_daemon_id_is_refused_and_a_known_one_drained(
    local: LocalCluster, runtime_config: StoreConfig, zk: ZooKeeper
) -> None:
    local.start_daemon("host-a")
    local.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
    for verb in ("drain", "undrain"):
        typo = daemons(runtime_config, verb, "host-zzz")
        assert typo.returncode == EXIT_NOT_FOUND, typo
        assert "no daemon 'host-zzz'" in typo.stderr and "host-a" in typo.stderr, typo.stderr
    assert zk.exists(f"{runtime_config.base_path}/drained/host-zzz") is None, "no mark left"

    assert daemons(runtime_config, "drain", "host-a").returncode == 0
    assert daemons(runtime_config, "undrain", "host-a").returncode == 0
    assert daemons(runtime_config, "undrain", "host-a").stdout.strip() == "host-a was not drained"

    ahead = daemons(runtime_config, "drain", "host-new", "--before-start")
    assert ahead.returncode == 0 and "not up now" in ahead.stdout, ahead
    assert daemons(runtime_config, "undrain", "host-new").returncode == 0, "a drained id is known"
    local.daemons["host-a"].process.terminate()
    local.daemons["host-a"].process.wait(timeout=SESSION_TIMEOUT * 10)
    wait_for(lambda: zk.exists(f"{runtime_config.base_path}/members/host-a") is None)
    down = daemons(runtime_config, "drain", "host-a")
    assert down.returncode == 0, "a daemon that is down is still known (its assignments)"
