"""The fork server's descriptors (issue 54 item 7): what it receives is close-on-exec, and a
child never keeps a descriptor of another launch, even when one read of the socket brought the
next request's configuration pipe with the end of this one's.

Failed before: the pipes came without close-on-exec, and the first child held the second
request's pipe (another job's configuration, its key in it) for as long as it ran.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import wait_for

pytestmark = pytest.mark.integration

O_CLOEXEC = 0o2000000


def request(request_id: int, tmp_path: Path, log: Path) -> bytes:
    body = {
        "id": request_id,
        "kind": "driver",
        "argv": ["--config-fd", "{config_fd}", "--job-id", f"j{request_id}"],  # argparse: 2
        "env": dict(os.environ),
        "cwd": str(tmp_path),
        "log": str(log),
        "nice": 0,
        "user": None,
        "fds": ["{config_fd}"],
    }
    return (json.dumps(body) + "\n").encode()


def pipe_descriptors(pid: int) -> dict[int, int]:
    """The inode of each pipe ``pid`` holds, by descriptor ({} once it is gone)."""
    found = {}
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            with_link = os.readlink(f"/proc/{pid}/fd/{name}")
            if with_link.startswith("pipe:["):
                found[int(name)] = int(with_link[6:-1])
    except (FileNotFoundError, ProcessLookupError):
        return {}
    return found


def test_a_child_holds_its_own_pipe_close_on_exec_and_no_other_launchs(tmp_path: Path) -> None:
    fifo = tmp_path / "first.log"
    os.mkfifo(fifo)  # the first child blocks opening its log until the test reads it
    pipes = [os.pipe() for _ in range(2)]
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    # Both requests are in the socket before the server reads it: its second read brings the
    # end of the first request and the start of the second, with the second's pipe.
    for n, (read_end, _) in enumerate(pipes, start=1):
        line = request(n, tmp_path, fifo if n == 1 else tmp_path / "second.log")
        socket.send_fds(ours, [line[:1]], [read_end])
        ours.sendall(line[1:])
        os.close(read_end)
    server = subprocess.Popen(
        [sys.executable, "-P", "-m", "recovery.member.forkserver"],
        stdin=theirs.fileno(),
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    theirs.close()
    reader, first = None, None
    try:
        assert server.stdout is not None
        answer = json.loads(server.stdout.readline())
        assert answer["id"] == 1, answer
        first = int(answer["pid"])
        own, other = (os.fstat(write_end).st_ino for _, write_end in pipes)

        def settled() -> bool:  # alive (its own pipe open), blocked on its log
            held = pipe_descriptors(first)
            return own in held.values() and other not in held.values()

        wait_for(settled, timeout=30, what="the first child holding its own pipe alone")
        fd = next(fd for fd, inode in pipe_descriptors(first).items() if inode == own)
        flags = Path(f"/proc/{first}/fdinfo/{fd}").read_text().split("flags:")[1].split()[0]
        assert int(flags, 8) & O_CLOEXEC, f"its pipe is close-on-exec (flags {flags})"
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the first child go on
        exits = {}
        while len(exits) < 2:
            message = json.loads(server.stdout.readline())
            if "exit" in message:
                exits[message["exit"]] = message["code"]
        assert exits[first] == 2, "argparse refused the missing arguments: the driver's main ran"
    finally:
        if reader is None:  # the test failed before: the first child still waits for it
            reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        os.close(reader)
        if first is not None and pipe_descriptors(first):
            os.kill(first, signal.SIGKILL)  # ours, still running after a failure
        ours.close()  # the server exits when its stdin closes
        for _, write_end in pipes:
            os.close(write_end)
        try:
            server.wait(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
