"""What job code can read of the other zkstore processes of its host, as an unprivileged user
(root reads every process's ``/proc`` entries whatever they say, so only another user shows
the rules): a daemon, its fork server and its log shipper, and a command an operator runs
(``zkstore jobs wait``), all as the user the job's driver runs as, with the cluster's signing
key and an API token in their environment and the change token in a file.

The job scans every ``/proc/<pid>/environ``, ``cmdline`` and ``mem`` it can open; it finds
neither the cluster key nor a token (the zkstore processes are not dumpable: their ``environ``
and ``mem`` refuse it), while it reads its own driver's (which is). Read as root, the daemon's
and the command's ``environ`` no longer hold the secret variables either (taken out, and their
bytes overwritten where the kernel shows them from)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import connection, read_until
from tests.helpers import BIN, REPO, wait_for
from tests.users import User, chown_tree, shared_directory
from zkstore.config import StoreConfig

pytestmark = pytest.mark.e2e

KEY = b"the-cluster-signing-key-" + b"q" * 16
CHANGE_TOKEN = "change-t0ken-from-a-file-" + "c" * 12
READ_TOKEN = "read-t0ken-in-the-environ-" + "r" * 12


def as_user(user: User) -> dict[str, object]:
    return {"user": user.uid, "group": user.gid, "extra_groups": []}


def child_titled(parent: int, title: str) -> int:
    """The pid of the child of ``parent`` whose command line is ``title`` (its process title),
    0 if there is none yet."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().rstrip(b"\0").decode()
        except (OSError, UnicodeDecodeError):
            continue
        if int(stat[stat.rfind(")") + 2 :].split()[1]) == parent and command == title:
            return int(entry.name)
    return 0


def test_job_code_reads_no_secret_of_any_zkstore_process(
    runtime_config: StoreConfig, other_users: list[User], their_python: str
) -> None:
    user, python = other_users[0], their_python
    base = shared_directory("zkstore-proc-")
    try:
        (base / "out").mkdir()
        (base / "rt").mkdir()
        tokens = base / "tokens"
        tokens.mkdir()
        (tokens / "change").write_text(CHANGE_TOKEN + "\n")
        (tokens / "change").chmod(0o600)
        chown_tree(base, user)
        config = runtime_config.with_changes(storage_url=f"file://{base}/storage", signing_key=KEY)
        local = LocalCluster(
            config,
            base / "rt",
            python=python,
            user=(user.uid, user.gid),
            http=True,
            extra_env={"ZKSTORE_API_READ_TOKEN": READ_TOKEN},
        )
        try:
            scan(local, config, user, python, base)
        finally:
            local.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def scan(local: LocalCluster, config: StoreConfig, user: User, python: str, base: Path) -> None:
    out, gate = base / "out" / "scan", base / "out" / "gate"
    daemon = local.start_daemon("d1", "--api-token-file", str(base / "tokens" / "change"))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(base),
        "ZKSTORE_SIGNING_KEY": KEY.decode(),
        "ZKSTORE_API_READ_TOKEN": READ_TOKEN,
    }
    script = [python, str(BIN / "zkstore")]
    submitted = subprocess.run(
        [
            *script,
            "submit",
            f"{REPO}/tests/secret_jobs.py:scan_processes",
            "--job-id",
            "scan",
            *connection(config),
            "--",
            str(out),
            str(gate),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=base,
        timeout=120,
        **as_user(user),  # type: ignore[call-overload]
    )
    assert submitted.returncode == 0, submitted.stderr
    waiting = subprocess.Popen(
        [*script, "jobs", "wait", "scan", *connection(config)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=base,
        **as_user(user),  # type: ignore[call-overload]
    )
    try:
        seen: list[str] = []
        read_until(waiting.stderr, "scan:", seen)  # it follows the job: past its start
        fork_server = wait_for(
            lambda: child_titled(daemon.pid, "zkstore fork-server d1"), 60, what="fork server"
        )
        processes = {
            "daemon": daemon.pid,
            "fork server": fork_server,
            "log shipper": wait_for(
                lambda: child_titled(fork_server, "zkstore log-shipper d1"), 60, what="shipper"
            ),
            "command": waiting.pid,
        }
        for name, pid in processes.items():  # read as root: the bytes are gone, not only hidden
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            assert b"ZKSTORE_" in environ or name != "daemon", environ  # what it was given...
            assert KEY not in environ and READ_TOKEN.encode() not in environ, name  # ...but these
        gate.touch()
        _, rest = waiting.communicate(timeout=180)
        assert waiting.returncode == 0, [*seen, rest]
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert daemon.url is not None
    check_tokens(daemon.url)

    found = json.loads((out / "scan.json").read_text())
    own = found["processes"][str(found["self"])]
    assert own["environ"] == own["mem"] == "read", "the scan reads what it may: its own driver"
    for name, pid in processes.items():
        entry = found["processes"].get(str(pid))
        assert entry is not None and entry["uid"] == user.uid, (name, entry)
        assert entry["cmdline"] == "read", (name, entry)
        for what in ("environ", "mem"):
            assert entry[what].startswith("PermissionError"), (name, what, entry)
    secrets = {
        "the cluster key": [KEY, KEY.hex().encode()],
        "the change token": [CHANGE_TOKEN.encode()],
        "the read token": [READ_TOKEN.encode()],
    }
    dumps = sorted(out.glob("*.bin"))
    assert len(dumps) > 3 and any(d.stat().st_size > 10_000_000 for d in dumps), "it read memory"
    for dump in dumps:
        data = dump.read_bytes()
        for what, forms in secrets.items():
            assert not any(form in data for form in forms), f"{what} in {dump.name}"


def check_tokens(url: str) -> None:
    """The change token from the file and the read token from the environment are in force."""

    def status(method: str, path: str, token: str | None) -> int:
        request = urllib.request.Request(
            f"{url}{path}", method=method, data=b"" if method == "POST" else None
        )
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            return urllib.request.urlopen(request, timeout=30).status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert status("GET", "/api/v1/jobs", None) == 401
    assert status("GET", "/api/v1/jobs", READ_TOKEN) == 200
    assert status("POST", "/api/v1/jobs/nosuchjob/cancel", READ_TOKEN) == 401
    assert status("POST", "/api/v1/jobs/nosuchjob/cancel", CHANGE_TOKEN) == 404


def test_a_daemon_that_is_not_root_refuses_driver_users_in_one_line(
    runtime_config: StoreConfig, other_users: list[User], their_python: str
) -> None:
    user, python = other_users[0], their_python
    command = [python, str(BIN / "zkstore"), "daemon", "--driver-user", "nobody"]
    done = subprocess.run(
        [*command, "--http", "off", *connection(runtime_config)],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
        cwd="/",
        timeout=120,
        **as_user(user),  # type: ignore[call-overload]
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "zkstore: usage error: --driver-user needs root or the capabilities CAP_CHOWN, "
        f"CAP_DAC_OVERRIDE, CAP_KILL, CAP_SETGID, CAP_SETUID: this daemon runs as uid {user.uid} "
        "without CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_KILL, CAP_SETGID, CAP_SETUID"
    ]
