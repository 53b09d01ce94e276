"""Real sessions in the docs, regenerated: ``python -m recovery.dev.transcript docs/FILE.md``.

A page marks a session with two comments around its code block::

    <!-- transcript: docs/sessions/NAME.sh -->
    ```console
    ... (rewritten by this command)
    ```
    <!-- /transcript -->

The session file is a shell script, one command a line, run in order by bash in a fresh
directory (the session's folder ``docs/sessions/NAME/`` copied into it, if there is one)
against an embedded ZooKeeper and a storage directory of its own (``ZKSTORE_ZK``,
``ZKSTORE_STORAGE``); a command may start a daemon in the background (``&``). Each command is
printed as ``$ COMMAND`` followed by what it printed (stdout and stderr, as a terminal shows
them). A line starting with ``#:`` runs without being shown (waiting for a window, setting a
variable for the next lines: ``#: export X=1``); other comments are left out. The temporary
directory is shown as ``/tmp/demo``. Every process a session started is ended with it.

Nothing in the page between the markers is written by hand: run this after a change that the
session shows, and commit what it wrote.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zkstore.dev.embedded import EmbeddedZooKeeper

MARK = re.compile(
    r"(<!-- transcript: (?P<script>\S+) -->\n```console\n)(?P<body>.*?)(```\n<!-- /transcript -->)",
    re.S,
)
SHOWN_AS = "/tmp/demo"
#: the longest one command of a session may take (seconds)
COMMAND_TIMEOUT = 300
#: between the SIGTERM to what a session left running and the SIGKILL (seconds)
STOP_GRACE = 5.0


def run_session(script: Path, repo: Path) -> str:
    """The transcript of ``script``: each shown command and its output."""
    folder = script.with_suffix("")
    with tempfile.TemporaryDirectory(prefix="zkstore-session-") as tmp:
        work = Path(tmp)
        if folder.is_dir():
            shutil.copytree(folder, work, dirs_exist_ok=True)
        bin_dir = Path(sys.executable).parent
        env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "ZKSTORE_STORAGE": f"file://{work}/storage",
            "REPO": str(repo),
            "TMPDIR": str(work),
        }
        sessions: list[int] = []
        lines: list[str] = []
        with EmbeddedZooKeeper() as zookeeper:
            env["ZKSTORE_ZK"] = zookeeper.connect_string
            try:
                for command in _commands(script.read_text()):
                    hidden = command.startswith("#:")
                    text = command.removeprefix("#:").strip()
                    output = _run(text, work, env, sessions)
                    if not hidden:
                        lines.append(f"$ {text}\n{output}")
            finally:
                _end(sessions)
        return "".join(lines).replace(str(work), SHOWN_AS)


def _commands(text: str) -> list[str]:
    return [
        line
        for line in text.splitlines()
        if line.strip() and (line.startswith("#:") or not line.lstrip().startswith("#"))
    ]


def _run(command: str, cwd: Path, env: dict[str, str], sessions: list[int]) -> str:
    """Run one command with the variables the session exported so far; its output."""
    exports = cwd / ".exports"
    prelude = f"[ -f {exports} ] && . {exports}\n"
    process = subprocess.Popen(
        ["bash", "-c", prelude + command + f"\nstatus=$?; export -p > {exports}; exit $status"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    sessions.append(process.pid)
    output, _ = process.communicate(timeout=COMMAND_TIMEOUT)
    return output


def _end(sessions: list[int]) -> None:
    """SIGTERM what each command left running (its daemons), then SIGKILL what stays."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for group in sessions:
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                continue
        if sig == signal.SIGTERM:
            time.sleep(STOP_GRACE)  # the daemons' clean stop


def regenerate(page: Path, repo: Path) -> str:
    """``page`` with every marked session run again."""

    def again(match: re.Match[str]) -> str:
        body = run_session(repo / match.group("script"), repo)
        return match.group(1) + body + match.group(4)

    return MARK.sub(again, page.read_text())


def main(argv: list[str]) -> int:
    repo = Path(__file__).resolve().parents[2]
    for name in argv or [str(p) for p in sorted((repo / "docs").glob("*.md"))]:
        page = Path(name)
        text = page.read_text()
        if MARK.search(text) is None:
            continue
        page.write_text(regenerate(page, repo))
        print(f"{page}: regenerated", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
