"""Issue 28: a forked driver finds its imports and its argument parsing done by the fork server.

What a driver imports or compiles at each start, every run pays for (a no-op job's own CPU is a
few milliseconds). Seen from a fresh interpreter that does what the fork server does before it
forks (``recovery.member.forkserver.prepare`` with the daemon's ``storage_modules``), then what
a driver does first: parse its arguments, name its store instance, resolve ZooKeeper's address,
open the storage.

Before: fsspec's ``url_to_fs`` imported its caching layers (``fsspec.implementations.cached``,
``.chained``) in every driver, ``getaddrinfo`` the idna codec (and compiled its patterns), and
the driver's first parse compiled argparse's patterns; on S3, every storage made a botocore
session of its own and its first client parsed botocore's S3 model, endpoint rules and
partitions (about 0.2 s of CPU per storage on the CI machine).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

PROBE = """
import contextlib, json, re, socket, ssl, sys, threading
from recovery.member.forkserver import prepare
from recovery.member.launcher import storage_modules

url = {url!r}
prepare(storage_modules(url))
assert threading.active_count() == 1, "the fork server must fork with one thread"
modules, patterns = set(sys.modules), len(re._cache)
shared = sys.modules.get("zkstore.payloads.s3")  # the fork server's sessions, for an S3 store
sessions = len(shared._SESSIONS) if shared else 0

from recovery.driver.driver import _parser
from zkstore.payloads.entries import new_instance_id
from zkstore.payloads.storage import StateStorage

_parser().parse_args(
    ["--job-id", "nightly", "--attempt", "2", "--status-version", "7", "--config-fd", "5",
     "--cancel-grace", "12.5", "--work-dir", "/tmp/w", "--log-uri", "file:///tmp/log"]
)
new_instance_id()
socket.getaddrinfo("127.0.0.1", 2181, 0, socket.SOCK_STREAM)  # kazoo's first step, as it calls it
storage = StateStorage(url, {options!r})
imported, compiled = sorted(set(sys.modules) - modules), len(re._cache) - patterns
made = {{"sessions": 0, "data files parsed": 0, "CA bundles loaded": 0}}
if url.startswith("s3://"):  # two storages (an artifact root's too), each making a request
    from botocore.loaders import JSONFileLoader
    from zkstore.payloads import s3

    def counted(method, name):
        def call(*args, **kwargs):
            made[name] += 1
            return method(*args, **kwargs)
        return call

    JSONFileLoader.load_file = counted(JSONFileLoader.load_file, "data files parsed")
    ssl.SSLContext.load_verify_locations = counted(
        ssl.SSLContext.load_verify_locations, "CA bundles loaded"
    )
    for each in (storage, StateStorage(url, {options!r})):
        with contextlib.suppress(Exception):  # nothing listens there: refused at once
            each.fs.ls("bucket/store")
    made["sessions"] = len(s3._SESSIONS) - sessions
print(json.dumps({{"imported": imported, "compiled": compiled, **made}}))
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
    else:
        closed = "http://127.0.0.1:1"  # a request is refused at once, its client made first
        url, options = "s3://bucket/store", {"key": "k", "secret": "s", "endpoint_url": closed}
    assert started(url, options) == {
        "imported": [],
        "compiled": 0,
        "sessions": 0,
        "data files parsed": 0,
        "CA bundles loaded": 0,
    }


LOG_PROBE = """
import json, logging
from recovery.member.forkserver import prepare

prepare([])
cleared = []
clear = logging.Manager._clear_cache
logging.Manager._clear_cache = lambda self: (cleared.append(1), clear(self))[1]
from recovery.driver.driver import set_up_logging

set_up_logging()
logging.getLogger("zkstore.x").info("said")
print(json.dumps({"cleared": cleared, "root": logging.getLogger().level,
                  "kazoo": logging.getLogger("kazoo").level}))
"""


def test_a_forked_driver_sets_no_log_level_at_its_start() -> None:
    """Issue 56.6: each ``setLevel`` clears every logger's cache (hundreds with pyspark and py4j
    imported: 1.3 ms of a driver's CPU for its three calls); a forked driver finds its levels set
    by the fork server, and its log still says INFO."""
    done = subprocess.run(
        [sys.executable, "-c", LOG_PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"cleared": [], "root": 20, "kazoo": 30}
    assert "INFO    zkstore.x: said" in done.stderr, done.stderr


def test_a_daemon_imports_aiohttp_only_to_serve_http_or_notify() -> None:
    """aiohttp (its import loads a CA bundle: about 0.3 s of CPU on the CI machine) is
    imported by the daemon's HTTP side and its notification sender, not by every daemon: one
    started with ``--http off`` and no notification to send on local storage never pays it."""
    probe = (
        "import sys, recovery.cli.daemon_command, recovery.daemon, recovery.leader.notifier; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'aiohttp'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
