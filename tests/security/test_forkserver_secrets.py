"""The fork server never holds a driver's configuration: every driver it forks later starts from
its memory, so a configuration it had read (one job's signing key) would be there for the next
job's code to find, freed or not."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from recovery.member.forkserver import ForkServer
from tests.secret_jobs import process_memory

pytestmark = pytest.mark.integration


def test_no_configuration_sits_in_the_fork_servers_memory(tmp_path: Path) -> None:
    server = ForkServer(sys.executable, dict(os.environ), lambda _: None)
    secrets = [uuid.uuid4().hex + uuid.uuid4().hex for _ in range(3)]
    try:
        for n, secret in enumerate(secrets):
            config = json.dumps({"job_key": {"job_id": f"j{n}", "key": secret}, "pad": "p" * n})
            driver = server.fork(
                ["--config-fd", "{config_fd}", "--job-id", f"j{n}"],  # argparse: exits 2
                dict(os.environ),
                str(tmp_path),
                str(tmp_path / f"driver-{n}.log"),
                config,
            )
            shipper = server.fork(
                ["--config-fd", "{config_fd}"],  # argparse: exits 2
                dict(os.environ),
                "/",
                str(tmp_path / f"shipper-{n}.log"),
                config.replace("job_key", "shipper_key"),
                kind="shipper",
            )
            assert driver.wait() == 2 and shipper.wait() == 2
        process = server._process
        assert process is not None
        memory = process_memory(process.pid)
        assert len(memory) > 1_000_000, "the server's heap was read"
        assert b"recovery.driver.driver" in memory, "and holds what it has imported"
        for secret in secrets:
            assert secret.encode() not in memory, "a driver's configuration is in the server"
    finally:
        server.close()
