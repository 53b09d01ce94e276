"""Issue 28: a forked driver finds its imports and its argument parsing done by the fork server.

What a driver imports or compiles at each start, every run pays for (a no-op job's own CPU is a
few milliseconds). Seen from a fresh interpreter that does what the fork server does before it
forks (``recovery.member.forkserver.prepare`` with the daemon's ``storage_modules``), then what
a driver does first: parse its arguments, name its store instance, resolve ZooKeeper's address,
open the storage.

Before: fsspec's ``url_to_fs`` imported its caching layers (``fsspec.implementations.cached``,
``.chained``) in every driver, ``getaddrinfo`` the idna codec (and compiled its patterns), and
the driver's first parse compiled argparse's patterns.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, re, socket, sys
from recovery.member.forkserver import prepare
from recovery.member.launcher import storage_modules

url = {url!r}
prepare(storage_modules(url))
modules, patterns = set(sys.modules), len(re._cache)

from recovery.driver.driver import _parser
from zkstore.entries import new_instance_id
from zkstore.storage import StateStorage

_parser().parse_args(
    ["--job-id", "nightly", "--attempt", "2", "--status-version", "7", "--config-fd", "5",
     "--cancel-grace", "12.5", "--work-dir", "/tmp/w", "--log-uri", "file:///tmp/log"]
)
new_instance_id()
socket.getaddrinfo("127.0.0.1", 2181, 0, socket.SOCK_STREAM)  # kazoo's first step, as it calls it
StateStorage(url, {options!r})
print(json.dumps({{
    "imported": sorted(set(sys.modules) - modules),
    "compiled": len(re._cache) - patterns,
}}))
"""


def started(url: str, options: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(url=url, options=options)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize("scheme", ["file", "s3"])
def test_a_driver_imports_and_compiles_nothing_at_its_start(tmp_path, scheme) -> None:
    if scheme == "file":
        url, options = f"file://{tmp_path}/store", {}
    else:  # no request is made: opening an S3 storage only builds the client's settings
        url, options = "s3://bucket/store", {"key": "k", "secret": "s"}
    assert started(url, options) == {"imported": [], "compiled": 0}
