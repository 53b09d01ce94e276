"""The storage contract, run over local disk, fsspec memory and a moto S3 server."""

from __future__ import annotations

import hashlib
import time

import pytest

from tests.helpers import make_storage
from tests.servers import S3Server
from zkstore.errors import (
    CorruptPayload,
    PayloadMissing,
    StoreUnavailable,
    UntrustedPayload,
)
from zkstore.payloads.storage import StateStorage
from zkstore.records.handle import PayloadRef

pytestmark = pytest.mark.integration


def overwrite(storage: StateStorage, uri: str, data: bytes) -> None:
    """Change a stored object behind the store's back (corruption, truncation)."""
    storage.fs.pipe_file(storage.path_of(uri), data)


def test_write_then_read_round_trip(any_storage: StateStorage) -> None:
    ref = any_storage.write("c/jobs/a/definition", b"payload bytes", suffix=".pkl")
    assert ref.size == 13
    assert ref.sha256 == hashlib.sha256(b"payload bytes").hexdigest()
    assert ref.uri.startswith(any_storage.root_url + "/c/jobs/a/definition/")
    assert ref.uri.endswith(".pkl")
    assert any_storage.read(ref) == b"payload bytes"


def test_every_write_gets_a_fresh_key(any_storage: StateStorage) -> None:
    uris = {any_storage.write("c/p", b"same").uri for _ in range(5)}
    assert len(uris) == 5


def test_stem_names_the_owner(any_storage: StateStorage) -> None:
    ref = any_storage.write("c/jobs/a/checkpoints", b"{}", suffix=".json", stem="42-")
    assert ref.uri.rsplit("/", 1)[1].startswith("42-")


def test_empty_payload(any_storage: StateStorage) -> None:
    ref = any_storage.write("c/p", b"")
    assert any_storage.read(ref) == b""


def test_corrupt_payload_raises(any_storage: StateStorage) -> None:
    ref = any_storage.write("c/p", b"0123456789")
    overwrite(any_storage, ref.uri, b"0123456780")
    with pytest.raises(CorruptPayload, match="sha256"):
        any_storage.read(ref)


def test_truncated_payload_raises(any_storage: StateStorage) -> None:
    ref = any_storage.write("c/p", b"0123456789")
    overwrite(any_storage, ref.uri, b"01234")
    with pytest.raises(CorruptPayload, match="truncated"):
        any_storage.read(ref)


def test_missing_payload_raises(any_storage: StateStorage) -> None:
    ref = any_storage.write("c/p", b"x")
    any_storage.discard(ref.uri)
    with pytest.raises(PayloadMissing):
        any_storage.read(ref)


def test_discard_is_idempotent(any_storage: StateStorage) -> None:
    ref = any_storage.write("c/p", b"x")
    any_storage.discard(ref.uri)
    any_storage.discard(ref.uri)
    assert not any_storage.exists(ref.uri)


def test_list_sees_new_objects_without_stale_cache(any_storage: StateStorage) -> None:
    assert any_storage.list("c/jobs") == []
    first = any_storage.write("c/jobs/a/definition", b"1")
    assert [o.uri for o in any_storage.list("c/jobs")] == [first.uri]
    second = any_storage.write("c/jobs/b/definition", b"22")
    listed = {o.uri: o for o in any_storage.list("c/jobs")}
    assert set(listed) == {first.uri, second.uri}
    assert listed[second.uri].size == 2
    assert 0 <= listed[second.uri].age_seconds() < 120
    any_storage.discard(first.uri)
    assert [o.uri for o in any_storage.list("c/jobs")] == [second.uri]


def test_list_of_missing_prefix_is_empty(any_storage: StateStorage) -> None:
    assert any_storage.list("nothing/here") == []


@pytest.mark.parametrize(
    "uri",
    [
        "file:///etc/passwd",
        "s3://other-bucket/x",
        "{root}/../escape",
        "{root}/a/../../escape",
        "{root}",
        "{root}/",
    ],
)
def test_uri_outside_root_is_refused(any_storage: StateStorage, uri: str) -> None:
    ref = PayloadRef(uri.format(root=any_storage.root_url), 1, "0" * 64)
    with pytest.raises(UntrustedPayload, match="outside the storage root"):
        any_storage.read(ref)
    with pytest.raises(UntrustedPayload):
        any_storage.discard(ref.uri)


def test_unreachable_s3_fails_fast_with_clear_error() -> None:
    storage = StateStorage(
        "s3://bucket/root",
        {"endpoint_url": "http://127.0.0.1:9", "key": "k", "secret": "s"},
        timeout=1.0,
    )
    start = time.monotonic()
    with pytest.raises(StoreUnavailable, match="storage failed"):
        storage.write("c/p", b"x")
    assert time.monotonic() - start < 60, "not a hang"


def test_s3_write_is_create_only(s3_server: S3Server) -> None:
    """The S3 write sends If-None-Match: an existing key is never overwritten."""
    storage = make_storage("s3", None, s3_server)
    ref = storage.write("c/p", b"first")
    with pytest.raises(FileExistsError):
        storage.fs.pipe_file(storage.path_of(ref.uri), b"second", mode="create")
    assert storage.read(ref) == b"first"
