"""Secrets as files on the command line, and the daemon's refusals of what it cannot use: each
a usage error of one line that names the file or the user, never a secret. And the secret
variables taken out of a process's environment: out of ``os.environ`` and of the block the
kernel shows as ``/proc/<pid>/environ``, so neither a child nor a reader of ``/proc`` sees them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import zkstore
from zkstore.config import StoreConfig

pytestmark = pytest.mark.integration

KEY = "the-signing-key-in-a-file-0123456789"
OTHER = "another-signing-key-0123456789-xyz"
JOB = "def run(ctx):\n    return None\n"


def secret(tmp_path: Path, name: str, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / name
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


def test_a_signing_key_file_signs_and_checks_and_wins_over_the_variable(
    config: StoreConfig, laptop: Path, tmp_path: Path
) -> None:
    key, other = secret(tmp_path, "key", KEY), secret(tmp_path, "other", OTHER)
    (laptop / "job.py").write_text(JOB)
    submitted = zkstore(
        config,
        "submit",
        f"{laptop / 'job.py'}:run",
        "--job-id",
        "j",
        "--signing-key-file",
        str(key),
    )
    assert submitted.returncode == 0, submitted.stderr
    verified = zkstore(config, "handles verify", "--signing-key-file", str(key))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    forged = zkstore(config, "handles verify", "--signing-key-file", str(other), "--format", "json")
    assert forged.returncode == 1 and "signature" in forged.stdout, forged.stdout
    from_env = zkstore(config, "handles verify", env={"ZKSTORE_SIGNING_KEY": KEY})
    assert from_env.returncode == 0, from_env.stdout
    file_wins = zkstore(
        config, "handles verify", "--signing-key-file", str(other), env={"ZKSTORE_SIGNING_KEY": KEY}
    )
    assert file_wins.returncode == 1, file_wins.stdout
    key.chmod(0o644)
    refused = zkstore(config, "handles verify", "--signing-key-file", str(key))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"zkstore: usage error: --signing-key-file {key}: other users may read or change it "
        f"(mode 0644): chmod 600 {key} (or 640 for a group of its readers)"
    ]
    for done in (submitted, verified, forged, from_env, file_wins, refused):
        assert KEY not in done.stdout + done.stderr and OTHER not in done.stdout + done.stderr


def test_the_daemon_refuses_token_files_and_driver_users_it_cannot_use(
    config: StoreConfig, tmp_path: Path
) -> None:
    token = secret(tmp_path, "token", "a-token-of-the-http-api-0123", mode=0o604)
    short = secret(tmp_path, "short", "tiny")
    cases = {
        ("--api-token-file", str(token)): f"--api-token-file {token}: other users may read",
        ("--api-read-token-file", str(short)): f"--api-read-token-file {short} is too short",
        ("--api-token-file", str(tmp_path / "none")): "No such file or directory",
        ("--driver-user", "no-such-user-zk"): "--driver-user 'no-such-user-zk': no such user",
        ("--driver-user", "root"): "--driver-user root: drivers would run as root",
        ("--driver-user", "daemon", "--driver-user", "daemon"): "names a user twice",
        ("--driver-user", "daemon,bin", "--max-drivers", "3"): "--max-drivers 3 is more than",
    }
    for words, why in cases.items():
        done = zkstore(config, "daemon", "--id", "d1", "--http", "off", *words)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (words, done.stderr)
        assert why in lines[0] and "a-token-of-the-http-api" not in lines[0], (words, lines)


TAKE = """
import json, os, posix, subprocess, sys
from zkstore.payloads import secrecy
taken = secrecy.take_from_environment(["ZKSTORE_SIGNING_KEY", "ZKSTORE_API_TOKEN", "ABSENT"])
secrecy.set_dumpable(False)
print(json.dumps({
    "taken": sorted(taken),
    "environ": open("/proc/self/environ", "rb").read().decode(errors="replace"),
    "os": sorted(k for k in os.environ if k.startswith("ZKSTORE")),
    "posix": sorted(k.decode() for k in posix.environ if k.startswith(b"ZKSTORE")),
    "child": subprocess.run(["env"], capture_output=True, text=True).stdout,
    "dumpable": secrecy.is_dumpable(),
}))
"""


def test_secret_variables_leave_every_copy_of_the_environment() -> None:
    environ = {
        "PATH": "/usr/bin:/bin",
        "ZKSTORE_SIGNING_KEY": KEY,
        "ZKSTORE_API_TOKEN": OTHER,
        "ZKSTORE_ROOT": "/kept",
    }
    done = subprocess.run(
        [sys.executable, "-c", TAKE], env=environ, capture_output=True, text=True, check=True
    )
    found = json.loads(done.stdout)
    assert found["taken"] == ["ZKSTORE_API_TOKEN", "ZKSTORE_SIGNING_KEY"]
    assert found["os"] == found["posix"] == ["ZKSTORE_ROOT"]
    assert "ZKSTORE_ROOT=/kept" in found["environ"], "the rest of the block is left as it was"
    assert "ZKSTORE_ROOT=/kept" in found["child"]
    for where in ("environ", "child"):
        assert KEY not in found[where] and OTHER not in found[where], where
        assert "ZKSTORE_SIGNING_KEY" not in found[where], where
    assert found["dumpable"] is False
