"""Secrets given as files (``--signing-key-file``, ``--api-token-file``,
``--api-read-token-file``, ``--zk-auth-file``) and ``--driver-user``'s checks: what is refused,
each with one line that names the file or the user and never a secret."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from recovery.member.driveruser import NEEDED, missing_capabilities
from recovery.settings import (
    API_TOKEN_ENV,
    READ_TOKEN_ENV,
    DaemonSettings,
    DriverUser,
    api_token_from_env,
    driver_users,
)
from zkstore.config import StoreConfig
from zkstore.errors import ConfigError
from zkstore.payloads.secrecy import read_secret_file

pytestmark = pytest.mark.unit

SECRET = "a-secret-of-the-cluster-0123456789"


def secret_file(tmp_path: Path, text: str = SECRET + "\n", mode: int = 0o600) -> Path:
    path = tmp_path / "secret"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o640, 0o440])
def test_a_file_of_its_owner_and_group_gives_its_first_line(tmp_path: Path, mode: int) -> None:
    path = secret_file(tmp_path, f"  {SECRET}  \nsecond line\n", mode)
    assert read_secret_file(str(path), "--signing-key-file") == SECRET


def test_a_link_to_a_secret_file_is_followed(tmp_path: Path) -> None:
    """Kubernetes mounts each key of a secret as a link into a directory of its own."""
    target = secret_file(tmp_path)
    (tmp_path / "link").symlink_to(target)
    assert read_secret_file(str(tmp_path / "link"), "--api-token-file") == SECRET


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o602, 0o660, 0o620])
def test_a_file_others_may_read_or_change_is_refused(tmp_path: Path, mode: int) -> None:
    path = secret_file(tmp_path, mode=mode)
    why = f"other users may read or change it \\(mode {mode:04o}\\): chmod 600 {path}"
    with pytest.raises(ConfigError, match=f"^--signing-key-file {path}: {why}") as refused:
        read_secret_file(str(path), "--signing-key-file")
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p: None, "No such file or directory"),
        (lambda p: p.mkdir(mode=0o700), "not a regular file"),
        (lambda p: (p.write_text("\n  \nsecond"), p.chmod(0o600)), "its first line is empty"),
        (lambda p: (p.write_bytes(b"\xff\xfe"), p.chmod(0o600)), "not UTF-8 text"),
        (lambda p: (p.write_text("x" * 70_000), p.chmod(0o600)), "over 65536 bytes"),
    ],
    ids=["missing", "directory", "empty", "binary", "huge"],
)
def test_what_is_not_a_secret_file_is_refused(tmp_path: Path, make: object, why: str) -> None:
    path = tmp_path / "secret"
    make(path)  # type: ignore[operator]
    with pytest.raises(ConfigError, match=why):
        read_secret_file(str(path), "--api-read-token-file")


def test_a_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: gives the file to another user")
    path = secret_file(tmp_path)
    os.chown(path, 65534, 65534)
    with pytest.raises(ConfigError, match="owned by uid 65534, neither this user nor root"):
        read_secret_file(str(path), "--zk-auth-file")


def test_an_api_token_file_wins_over_the_variable_and_is_checked_like_it(tmp_path: Path) -> None:
    path = secret_file(tmp_path)
    environ = {API_TOKEN_ENV: "from-the-environment-0123456789"}
    assert api_token_from_env(environ, file=str(path)) == SECRET
    assert api_token_from_env(environ) == environ[API_TOKEN_ENV]
    short = secret_file(tmp_path, "short\n")
    with pytest.raises(ConfigError, match=f"^--api-read-token-file {short} is too short"):
        api_token_from_env({}, variable=READ_TOKEN_ENV, file=str(short))


def test_driver_users_are_looked_up_and_root_or_strangers_refused() -> None:
    nobody = pwd.getpwnam("nobody")
    (found,) = driver_users(["nobody"])
    assert (found.name, found.uid, found.gid) == ("nobody", nobody.pw_uid, nobody.pw_gid)
    assert nobody.pw_gid in found.groups
    for values, why in (
        (["root"], "drivers would run as root"),
        (["no-such-user-here"], "'no-such-user-here': no such user on this host"),
        (["nobody,nobody"], "names a user twice"),
    ):
        with pytest.raises(ConfigError, match=why):
            driver_users(values)


def test_a_pool_of_users_bounds_the_driver_slots() -> None:
    pool = tuple(DriverUser(f"u{n}", 5000 + n, 5000, (5000,), "/") for n in range(2))
    DaemonSettings(store=StoreConfig(), max_drivers=2, driver_users=pool)
    DaemonSettings(store=StoreConfig(), max_drivers=8, driver_users=pool[:1])  # one for all
    with pytest.raises(ConfigError, match="--max-drivers 3 is more than the 2 users"):
        DaemonSettings(store=StoreConfig(), max_drivers=3, driver_users=pool)


def test_a_daemon_that_is_not_root_needs_the_capabilities() -> None:
    everything = "CapEff:\t000001ffffffffff\n"
    nothing = "CapEff:\t0000000000000000\n"
    only_set_ids = f"CapEff:\t{(1 << 6 | 1 << 7):016x}\n"
    assert missing_capabilities(nothing, euid=0) == []
    assert missing_capabilities(everything, euid=1000) == []
    assert missing_capabilities(nothing, euid=1000) == list(NEEDED)
    assert missing_capabilities(only_set_ids, euid=1000) == [
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_KILL",
    ]
