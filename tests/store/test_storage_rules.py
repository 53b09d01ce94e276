"""Storage rules that need no server: signatures, size limits, URLs, local atomicity."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import pytest

from tests.helpers import make_storage
from zkstore.errors import (
    ConfigError,
    SerializationError,
    UntrustedPayload,
)
from zkstore.payloads.storage import StateStorage

pytestmark = pytest.mark.unit


def test_signed_payload_verifies_and_tampering_is_refused(
    tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    signed = make_storage("file", tmp_path, None, signing_key=b"k1")
    ref = signed.write("c/p", b"code")
    assert ref.hmac is not None
    assert signed.read(ref) == b"code"
    other_key = make_storage("file", tmp_path, None, signing_key=b"k2")
    with pytest.raises(UntrustedPayload, match="signature"):
        other_key.read(ref)
    unsigned_ref = make_storage("file", tmp_path, None).write("c/p", b"code")
    with pytest.raises(UntrustedPayload, match="not signed"):
        signed.read(unsigned_ref)


def test_size_limit(tmp_path: Any) -> None:
    small = make_storage("file", tmp_path, None, max_payload_bytes=10)
    with pytest.raises(SerializationError, match="over the configured limit"):
        small.write("c/p", b"x" * 11)
    ref = make_storage("file", tmp_path, None).write("c/p", b"x" * 11)
    with pytest.raises(UntrustedPayload, match="over the limit"):
        small.read(ref)


def test_unknown_protocol_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="xyz"):
        StateStorage("xyz://bucket/path")


def test_s3_storages_share_a_session_per_session_options_and_keep_a_given_one() -> None:
    """Every S3 storage of a process with the same session options uses one botocore session
    (made and its S3 data parsed once, not per storage: tests/drivers/test_driver_start.py);
    other options (a profile) get a session of their own, made with them; each storage keeps its
    own credentials; a session given as an option is kept as it is."""
    from aiobotocore.session import AioSession

    first = StateStorage("s3://bucket/a", {"key": "k1", "secret": "s1"})
    second = StateStorage("s3://bucket/b", {"key": "k2", "secret": "s2"})
    named = StateStorage("s3://bucket/c", {"key": "k1", "secret": "s1", "profile": "reports"})
    assert first.fs.session is second.fs.session
    assert named.fs.session is not first.fs.session
    assert named.fs.session.profile == "reports" and first.fs.session.profile is None
    assert (first.fs.key, second.fs.key) == ("k1", "k2")
    given = AioSession()
    kept = StateStorage("s3://bucket/d", {"key": "k", "secret": "s", "session": given})
    assert kept.fs.session is given


def test_an_s3_storage_without_s3fs_installed_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import zkstore.payloads

    monkeypatch.delattr(zkstore.payloads, "s3", raising=False)
    monkeypatch.delitem(sys.modules, "zkstore.payloads.s3", raising=False)
    monkeypatch.setitem(sys.modules, "aiobotocore.httpsession", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"S3 needs s3fs \(pip install 'zkstore\[s3\]'\)"):
        StateStorage("s3://bucket/store")


@pytest.mark.parametrize(
    "url",
    [
        "file:///srv/store",
        "file:///srv/store/",
        "/srv/store",
        "relative/store",
        "./store",
        ".",
        "~/store",
        "file:~/store",
        "file:/srv/one",
        "file://host/path",
        "local:///srv/store",
        "file:///srv//twice//",
    ],
)
def test_a_local_storage_names_its_root_as_fsspec_does_without_importing_it(url: str) -> None:
    """Local disk without options is made without fsspec (issue 57: a command that reads
    records only never imports it); its root and URL are the ones fsspec makes of the URL."""
    from fsspec.core import url_to_fs

    storage = StateStorage(url)
    assert storage._fs is None
    fs, root = url_to_fs(url, skip_instance_cache=True, use_listings_cache=False)
    root = root.rstrip("/")
    assert (storage.root_url, storage.key_of(f"{storage.root_url}/k")) == (
        fs.unstrip_protocol(root).rstrip("/"),
        "k",
    )
    assert storage.fs.protocol == fs.protocol and storage.is_local


def test_storage_root_must_not_be_empty() -> None:
    for url in ("file:///", "/"):
        with pytest.raises(ConfigError, match="not the root"):
            StateStorage(url)
    with pytest.raises(ConfigError):
        StateStorage("memory://")


def test_local_write_leaves_no_partial_file_visible(tmp_path: Any) -> None:
    """A reader never sees a half-written object: the final name appears complete or not at all."""
    storage = make_storage("file", tmp_path, None)
    data = os.urandom(4 * 1024 * 1024)
    seen_sizes: set[int] = set()
    stop = threading.Event()
    directory = tmp_path / "storage" / "c" / "big"

    def watch() -> None:
        while not stop.is_set():
            if directory.exists():
                for entry in directory.iterdir():
                    if not entry.name.startswith("."):
                        seen_sizes.add(entry.stat().st_size)

    thread = threading.Thread(target=watch)
    thread.start()
    try:
        for _ in range(5):
            storage.write("c/big", data)
    finally:
        stop.set()
        thread.join()
    assert seen_sizes == {len(data)}
    assert not [p for p in directory.iterdir() if p.name.startswith(".")]


def test_local_discard_removes_empty_directories(tmp_path: Any) -> None:
    storage = make_storage("file", tmp_path, None)
    ref = storage.write("c/jobs/a/definition", b"x")
    storage.discard(ref.uri)
    assert not (tmp_path / "storage" / "c").exists()
    assert (tmp_path / "storage").exists()


def test_a_write_outlives_a_discard_removing_its_directory_meanwhile(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A discard of the last object of a directory removes the directory; a write into it at
    that moment can find it there and then gone within one ``makedirs`` (which then raises
    FileExistsError, as it did to a submission racing the leader's cleanup of the job's last
    run). The write makes the directory again; it never takes the race for an object of that
    name existing already (which it then failed to read: PayloadMissing)."""
    storage = make_storage("file", tmp_path, None)
    real = os.makedirs
    raced: list[str] = []

    def racing(name: Any, mode: int = 0o777, exist_ok: bool = False) -> None:
        if not raced:  # found there by mkdir, removed before makedirs' isdir look
            raced.append(str(name))
            real(name, mode, exist_ok=True)
            os.rmdir(name)
            raise FileExistsError(17, "File exists", str(name))
        real(name, mode, exist_ok)

    monkeypatch.setattr(os, "makedirs", racing)
    ref = storage.write("c/jobs/a/definition", b"payload")
    assert raced and storage.read(ref) == b"payload"


def test_a_file_where_the_directory_goes_is_refused(tmp_path: Any) -> None:
    storage = make_storage("file", tmp_path, None)
    (tmp_path / "storage" / "c" / "jobs").mkdir(parents=True)
    (tmp_path / "storage" / "c" / "jobs" / "a").write_bytes(b"not a directory")
    with pytest.raises(UntrustedPayload, match="not a regular file"):
        storage.write("c/jobs/a/definition", b"payload")
