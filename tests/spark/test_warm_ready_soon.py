"""Warm drivers ready soon after a start (issue 56.3), as an operator meets them: ``zkstore daemon``
with its default directories (under the test's own ``TMPDIR``), its log, ``daemons list``.

- the fork server starts with the daemon, before any job asks for it;
- a fresh daemon's first warm JVM does not wait for the class-data archive: it is ready
  without it while the archive is made, and replaced by one that maps it once it is;
- the archive is kept at a clean stop, in the user's cache ``<tmp>/zkstore-<uid>/class-data``:
  a restarted daemon verifies it (makes none) and its first warm JVM maps it.

Would fail before: the fork server started at the first launch; the warm JVM started only once
the archive was made; a clean stop removed the archive with the daemon's directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from recovery.member.warm_jvms.archive import MAKE_TIMEOUT, MAKING
from recovery.member.warm_jvms.class_data import STOP_WAIT
from recovery.member.warm_jvms.pool import STOP_GRACE
from tests.cli import BIN, connection, script, with_credentials
from tests.helpers import wait_for
from tests.warm_drivers import WARM
from zkstore.config import StoreConfig

#: an archive made, four daemon lives, three warm JVMs started, on a loaded host
pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(1800)]

FIRST_READY = "first warm driver ready"
READY = "ready (pid"
WITHOUT = "without the class-data archive"


def start(
    config: StoreConfig, tmp_path: Path, log: Path, *, warm: int = 1, name: str = "fresh"
) -> subprocess.Popen[bytes]:
    """``zkstore daemon`` with the default directories and class data, ``warm`` warm drivers."""
    env = with_credentials(config, {**os.environ, "TMPDIR": str(tmp_path)})
    assert env is not None
    env.update(
        {
            "ZKSTORE_JOBS_MAY_READ_SECRETS": "1",
            "ZKSTORE_SPARK_MASTER": "local[1]",
            "ZKSTORE_WARM_DRIVERS": str(warm),
            "ZKSTORE_CLASS_DATA": "auto",
        }
    )
    env.pop("ZKSTORE_WARM_UP_PASSES", None)  # the default's, not the suite's none
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                *(str(BIN / "zkstore"), "daemon", *connection(config)),
                *("--id", name, "--http", "off"),
                *("--session-timeout", str(config.session_timeout)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=out,
            cwd=tmp_path,
            env=env,
            start_new_session=True,
        )


def stop(daemon: subprocess.Popen[bytes]) -> int:
    daemon.send_signal(signal.SIGTERM)
    return daemon.wait(timeout=STOP_GRACE * 6)


def lines(log: Path) -> list[str]:
    return log.read_text(errors="replace").splitlines()


def first_at(log: Path, text: str) -> int | None:
    return next((n for n, line in enumerate(lines(log)) if text in line), None)


def naming(path: Path) -> list[int]:
    """The processes whose command line names ``path`` (the making JVM's Python worker runs a
    script there)."""
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            if str(path).encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
    return found


def making(cache: Path) -> list[int]:
    """The niceness of each process making an archive in ``cache`` (its JVM's command line
    names the archive it writes there)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes()
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if b"-XX:ArchiveClassesAtExit=" + str(cache).encode() in command:
            found.append(int(stat.rsplit(")", 1)[1].split()[16]))
    return found


def test_warm_drivers_are_ready_soon_and_the_archive_outlives_a_clean_stop(
    spark_config: StoreConfig, tmp_path: Path
) -> None:
    config = spark_config
    cache = tmp_path / f"zkstore-{os.getuid()}" / "class-data"
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    daemon = start(config, tmp_path, first_log)
    try:
        wait_for(lambda: first_at(first_log, "member fresh registered"), 120, what="registered")
        wait_for(lambda: first_at(first_log, "fork server started"), 60, what="fork server")
        assert first_at(first_log, "job ") is None, "no job asked for it"
        # the archive is made at a lower priority than the warm JVM started beside it
        assert wait_for(lambda: making(cache), 120, 0.2, what="the archive's maker") == [10]

        ready = wait_for(lambda: first_at(first_log, FIRST_READY), WARM, what="a warm JVM")
        assert first_at(first_log, "making the class-data archive") is not None
        made = first_at(first_log, "class-data archive /")
        assert made is None or made > ready, lines(first_log)[-40:]
        warm = lines(first_log)[first_at(first_log, READY) or 0]
        assert WITHOUT in warm, warm
        warmed = [log.read_text() for log in tmp_path.rglob(".warm/*.log")]
        assert any("(2 passes)" in text for text in warmed), warmed  # --warm-up-passes' default
        listed = json.loads(script(config, "daemons list", "--format", "json").stdout)
        assert listed[0]["warm_ready"] == 1 and isinstance(listed[0]["warm_first_s"], float)

        wait_for(lambda: first_at(first_log, "class-data archive /"), MAKE_TIMEOUT, what="made")
        wait_for(lambda: first_at(first_log, "replaced"), WARM, what="its JVM replaced")
        said = lines(first_log)
        assert any(READY in line and WITHOUT not in line for line in said), said[-40:]
        assert stop(daemon) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    kept = sorted(p.name for p in cache.glob("spark-*"))
    assert len(kept) == 2 and {Path(k).suffix for k in kept} == {".jsa", ".json"}, kept
    assert not list(cache.parent.glob("*-fresh")), "the daemon's own directory is removed"

    daemon = start(config, tmp_path, second_log)
    try:
        wait_for(lambda: first_at(second_log, FIRST_READY), WARM, what="a warm JVM")
        said = lines(second_log)
        assert first_at(second_log, "making the class-data archive") is None, said[-40:]
        verified = first_at(second_log, "class-data archive /")
        assert verified is not None and "verified" in said[verified], said[-40:]
        warm = said[first_at(second_log, READY) or 0]
        assert READY in warm and WITHOUT not in warm, warm
        assert stop(daemon) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


def test_the_archive_maker_never_outlives_its_daemon(
    spark_config: StoreConfig, tmp_path: Path
) -> None:
    """A daemon SIGKILLed while it makes the archive takes the making JVM along (it left its
    scratch directory: nothing of it ran); the next daemon removes that directory, and its
    own making ends with its clean stop, which leaves nothing. Would fail before: the orphan
    JVM computed on for half a minute and its directory stayed for ever, as did a cleanly
    stopped daemon's."""
    config = spark_config
    cache = tmp_path / f"zkstore-{os.getuid()}" / "class-data"
    killed_log, second_log = tmp_path / "killed.log", tmp_path / "second.log"
    daemon = start(config, tmp_path, killed_log, warm=0, name="killed")
    try:
        wait_for(lambda: making(cache), 120, 0.2, what="the archive's maker")
        [scratch] = cache.glob(f"{MAKING}*")
        daemon.kill()
        daemon.wait()
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    # the kernel kills the JVM as its daemon dies; its Python worker ends with the JVM
    wait_for(lambda: not naming(scratch), STOP_WAIT, 0.2, what="the maker gone with its daemon")
    assert scratch.is_dir(), "a SIGKILLed daemon cleans nothing up"

    daemon = start(config, tmp_path, second_log, warm=0, name="second")
    try:
        wait_for(lambda: making(cache), 120, 0.2, what="the next daemon's maker")
        said = lines(second_log)
        assert any("removed 1 unfinished class-data archive" in line for line in said), said
        assert not scratch.exists()
        [own] = cache.glob(f"{MAKING}*")
        # a third daemon of this user waits for that making: stopped, it waits no longer
        third_log = tmp_path / "third.log"
        third = start(config, tmp_path, third_log, warm=0, name="third")
        try:
            waiting = "waiting for another daemon's class-data archive"
            wait_for(lambda: first_at(third_log, waiting), 120, 0.2, what="the third waiting")
            assert stop(third) == 0
        finally:
            if third.poll() is None:
                third.kill()
                third.wait()
        said = lines(third_log)
        assert any("stopped while another daemon held" in line for line in said), said[-20:]
        assert stop(daemon) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    # the clean stop waited for its maker to end: nothing left, nothing made
    assert naming(own) == [] and making(cache) == []
    assert sorted(p.name for p in cache.iterdir() if p.name.startswith((MAKING, "spark-"))) == []
