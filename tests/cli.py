"""``zkstore`` commands as the tests run them.

:func:`zkstore` runs a command in this process through click's runner: what the command does
with its options and the cluster, at a fraction of a new interpreter's cost. :func:`script` and
:func:`start` run the installed console script as a user does (a new process, its own
environment and working directory): keep those for what only the entry point can show (its exit
codes, what a subprocess inherits, a command that keeps running).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from click.testing import CliRunner

from tests.helpers import BIN
from zkstore.config import ENV_VARS, StoreConfig


class Ran(NamedTuple):
    """What a command printed and how it ended (the fields of ``subprocess.CompletedProcess``)."""

    returncode: int
    stdout: str
    stderr: str


def connection(config: StoreConfig, *, roots: bool = False) -> list[str]:
    """The connection options of a command on ``config``'s cluster: ZooKeeper, root, storage
    and its options, and with ``roots`` its artifact roots."""
    from recovery.dev.localcluster import storage_option_args

    args = ["--zk", config.zk_hosts, "--root", config.root, "--storage", config.storage_url]
    args += storage_option_args(config)
    for root in config.artifact_roots if roots else ():
        args += ["--artifact-root", root]
    return args


def zkstore(
    config: StoreConfig,
    command: str,
    *words: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    connection_first: bool = True,
) -> Ran:
    """``zkstore <command> <connection options> <words>``, in this process (from ``cwd``)."""
    from recovery.cli.main import cli

    options = connection(config)
    env = with_credentials(config, env)
    args = (
        [*command.split(), *options, *words]
        if connection_first
        else [*command.split(), *words, *options]
    )
    runner = CliRunner()
    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        result = runner.invoke(
            cli,
            args,
            env=env,
            prog_name="zkstore",
        )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a bug, not an answer: the console script would have said so
    return Ran(result.exit_code, result.stdout, result.stderr)


def run(config: StoreConfig, *words: str, env: dict[str, str] | None = None) -> Ran:
    """``zkstore <words> <connection options>`` in this process: the words as they are (an
    argument may hold spaces), the connection options after them."""
    return zkstore(config, "", *words, env=env, connection_first=False)


def json_of(config: StoreConfig, command: str, *words: str) -> Any:
    """``zkstore <command> <words> --format json`` in this process (``command`` split at
    spaces, as :func:`script`'s): what it printed, parsed (it must exit 0)."""
    ran = run(config, *command.split(), *words, "--format", "json")
    assert ran.returncode == 0, (command, words, ran.stdout, ran.stderr)
    return json.loads(ran.stdout)


def answers(config: StoreConfig, *words: str, codes: Iterable[int] = range(10)) -> Ran:
    """A command run in this process that must answer: an exit code among ``codes`` (the
    documented ones by default) and never a traceback or an internal error."""
    ran = run(config, *words)
    printed = ran.stdout + ran.stderr
    assert ran.returncode in set(codes), (words, ran.returncode, printed[-2000:])
    assert "Traceback" not in printed and "internal error" not in printed, (words, printed[-2000:])
    return ran


def every_command_answers(config: StoreConfig, job_ids: Iterable[str]) -> None:
    """Every listing and inspection command, and every per-job one for ``job_ids``, exits 0 or
    1 without a traceback (what hostile records must never break)."""
    for words in (
        ("jobs", "list"),
        ("jobs", "list", "--all", "--format", "json"),
        ("handles", "list"),
        ("handles", "verify"),
        ("handles", "lingering", "--min-age", "0s"),
        ("handles", "cleanup", "--dry-run", "--min-age", "0s"),
    ):
        answers(config, *words, codes=(0, 1))
    for job_id in job_ids:
        for command in ("jobs show", "checkpoints list", "control get", "control history"):
            answers(config, *command.split(), job_id, codes=(0, 1))


def script(
    config: StoreConfig | None,
    command: str,
    *words: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """The installed ``zkstore`` script in a new process, as a user runs it."""
    return subprocess.run(
        [str(BIN / "zkstore"), *command.split(), *(connection(config) if config else []), *words],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=with_credentials(config, env) if config else env,
    )


def script_ok(config: StoreConfig, command: str, *words: str, cwd: Path | None = None) -> str:
    """The installed script, which must exit 0: what it printed."""
    done = script(config, command, *words, cwd=cwd)
    assert done.returncode == 0, (command, words, done.stdout, done.stderr)
    return done.stdout


def script_json(config: StoreConfig, command: str, *words: str) -> Any:
    """``zkstore <command> ... --format json`` by the installed script: what it printed,
    parsed (it must exit 0)."""
    return json.loads(script_ok(config, command, *words, "--format", "json"))


def start(
    config: StoreConfig, command: str, *words: str, cwd: Path | None = None
) -> subprocess.Popen[str]:
    """The installed script started in the background (``submit --wait``, ``logs --follow``)."""
    return subprocess.Popen(
        [str(BIN / "zkstore"), *command.split(), *connection(config), *words],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=with_credentials(config, None),
    )


def environment(config: StoreConfig, auth: str | None = None) -> dict[str, str]:
    """This process's environment with the connection to ``config``'s cluster in the
    ``ZKSTORE_*`` variables instead of options (and ``auth`` as its credentials, with its read
    ACL), as a user's shell may hold it; no other ``ZKSTORE_*`` variable of this process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKSTORE_")}
    env.update(
        {
            ENV_VARS["zk_hosts"]: config.zk_hosts,
            ENV_VARS["root"]: config.root,
            ENV_VARS["cluster_id"]: config.cluster_id,
            ENV_VARS["storage_url"]: config.storage_url,
        }
    )
    if auth:
        env[ENV_VARS["zk_auth"]] = auth
        env[ENV_VARS["zk_read_acl"]] = ",".join(config.zk_read_acl)
    return env


def with_credentials(config: StoreConfig, env: dict[str, str] | None) -> dict[str, str] | None:
    """``env`` with ``config``'s ZooKeeper credentials (the command runs as the cluster), if it
    has any and ``env`` names none."""
    if config.zk_auth is None or (env is not None and "ZKSTORE_ZK_AUTH" in env):
        return env
    return {**(os.environ if env is None else env), "ZKSTORE_ZK_AUTH": config.zk_auth.to_text()}


def read_until(stream: Any, marker: str, seen: list[str]) -> None:
    """Read ``stream`` line by line into ``seen`` until a line contains ``marker``."""
    for line in stream:
        seen.append(line.rstrip("\n"))
        if marker in line:
            return
    raise AssertionError(f"{marker!r} never printed; printed: {seen}")


def show(config: StoreConfig, job_id: str) -> dict[str, Any]:
    """``zkstore jobs show JOB --format json``."""
    done = zkstore(config, "jobs show", job_id, "--format", "json")
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


def show_schedule(config: StoreConfig, name: str) -> dict[str, Any]:
    """``zkstore schedules show NAME --format json`` (the installed script)."""
    done = script(config, "schedules show", name, "--format", "json")
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


def local_log(uri: str) -> str:
    """The text of a driver log whose location ``jobs show`` gave (``file://host/path``)."""
    assert uri.startswith("file://"), uri
    return Path("/" + uri.removeprefix("file://").split("/", 1)[1]).read_text()
