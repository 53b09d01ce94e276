"""Real sessions in the docs, regenerated: ``python -m zkstore_dev.transcript docs/FILE.md``.

A page marks a session with two comments around its code block::

    <!-- transcript: docs/sessions/NAME.sh -->
    ```console
    ... (rewritten by this command)
    ```
    <!-- /transcript -->

The session file is a shell script, one command a line, run in order by bash in a fresh
directory (the session's folder ``docs/sessions/NAME/`` copied into it, if there is one)
against an embedded ZooKeeper and a storage directory of its own (``ZKSTORE_ZK``,
``ZKSTORE_STORAGE``); a command may start a daemon in the background (``&``), its output sent
to a file (the line's output ends when every process holding it has closed it). Each command is
printed as ``$ COMMAND`` followed by what it printed (stdout and stderr, as a terminal shows
them). A line starting with ``#:`` runs without being shown (waiting for a window, setting a
variable for the next lines: ``#: export X=1``); other comments are left out. The temporary
directory is shown as ``/tmp/demo``. Every process a session started is ended with it. The
session sees none of the caller's ``ZKSTORE_*`` variables (a test suite's lowered minimums
would show in it): what it prints is what a new user's shell prints.

Nothing in the page between the markers is written by hand: run this after a change that the
session shows (``make transcripts`` runs every page), and commit what it wrote. ``--check``
runs nothing: it says which page's block does not show its session's commands as the session
file has them now (a session changed and not run again).
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

__all__ = [
    "COMMAND_TIMEOUT",
    "MARK",
    "SHOWN_AS",
    "STOP_GRACE",
    "main",
    "regenerate",
    "run_session",
    "shown_commands",
    "stale",
]

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
        own = {k: v for k, v in os.environ.items() if not k.startswith("ZKSTORE_")}
        env = {
            **own,
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


def shown_commands(script: str) -> list[str]:
    """The commands a session shows (``$ COMMAND`` in its transcript), in order."""
    return [c for c in _commands(script) if not c.startswith("#:")]


def stale(page: Path, repo: Path) -> list[str]:
    """What is wrong with ``page``'s marked blocks without running them: a session file that
    is missing, or a block whose ``$`` lines are not its session's shown commands."""
    problems = []
    for match in MARK.finditer(page.read_text()):
        script = repo / match.group("script")
        if not script.is_file():
            problems.append(f"{page}: {match.group('script')}: no such session")
            continue
        shown = [
            line.removeprefix("$ ")
            for line in match.group("body").splitlines()
            if line.startswith("$ ")
        ]
        if shown != shown_commands(script.read_text()):
            problems.append(
                f"{page}: the block of {match.group('script')} does not show its commands as "
                "they are now: run python -m zkstore_dev.transcript " + str(page)
            )
    return problems


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
    """SIGTERM what each command left running (its daemons), wait up to :data:`STOP_GRACE`
    for their clean stop, then SIGKILL what stays."""
    for group in _alive(sessions):
        _signal(group, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while _alive(sessions) and time.monotonic() < deadline:
        time.sleep(0.1)
    for group in _alive(sessions):
        _signal(group, signal.SIGKILL)


def _alive(groups: list[int]) -> list[int]:
    return [group for group in groups if _signal(group, 0)]


def _signal(group: int, sig: int) -> bool:
    """Send ``sig`` to the process group; False if it has no process left."""
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        return False
    return True


def regenerate(page: Path, repo: Path) -> str:
    """``page`` with every marked session run again."""

    def again(match: re.Match[str]) -> str:
        body = run_session(repo / match.group("script"), repo)
        return match.group(1) + body + match.group(4)

    return MARK.sub(again, page.read_text())


def main(argv: list[str]) -> int:
    repo = Path(__file__).resolve().parents[1]
    check = "--check" in argv
    names = [a for a in argv if a != "--check"]
    pages = [Path(n) for n in names] or [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    problems: list[str] = []
    for page in pages:
        if MARK.search(page.read_text()) is None:
            continue
        if check:
            problems += stale(page, repo)
            continue
        page.write_text(regenerate(page, repo))
        print(f"{page}: regenerated", file=sys.stderr)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
