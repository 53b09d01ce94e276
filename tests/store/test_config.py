"""Configuration: flags > environment > defaults, validated at the edge; handles parsed strictly."""

from __future__ import annotations

import json

import pytest

from zkstore.config import StoreConfig, parse_storage_options
from zkstore.errors import (
    ConfigError,
    CorruptHandle,
    CorruptRecord,
    InvalidJobId,
    NewerRecord,
    SerializationError,
)
from zkstore.layout import Layout, validate_job_id
from zkstore.protocol import PROTOCOL
from zkstore.records.handle import MAX_HANDLE_BYTES, Handle, PayloadRef

pytestmark = pytest.mark.unit


def test_explicit_values_win_over_environment() -> None:
    env = {"ZKSTORE_ZK": "zk1:2181", "ZKSTORE_ROOT": "/envroot", "ZKSTORE_STORAGE": "memory://e"}
    config = StoreConfig.from_env(env, zk_hosts="zk2:2181", root=None)
    assert config.zk_hosts == "zk2:2181"
    assert config.root == "/envroot"
    assert config.storage_url == "memory://e"
    assert config.base_path == "/envroot/default"


def test_signing_key_from_environment_is_bytes() -> None:
    config = StoreConfig.from_env({"ZKSTORE_SIGNING_KEY": "s3cret"})
    assert config.signing_key == b"s3cret"
    assert "s3cret" not in repr(config)


@pytest.mark.parametrize(
    "changes",
    [
        {"zk_hosts": ""},
        {"zk_hosts": "no-port"},
        {"root": "relative"},
        {"root": "/a//b"},
        {"root": "/a/"},
        {"root": "/../x"},
        {"cluster_id": "a/b"},
        {"cluster_id": ".."},
        {"session_timeout": 0.1},
        {"timeout": 0},
    ],
)
def test_invalid_configuration_is_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        StoreConfig(**changes)  # type: ignore[arg-type]


def test_storage_options_parse_json_values_and_nest_dotted_keys() -> None:
    options = parse_storage_options(
        ["endpoint_url=http://minio:9000", "anon=false", "config_kwargs.s3.addressing_style=path"]
    )
    assert options == {
        "endpoint_url": "http://minio:9000",
        "anon": False,
        "config_kwargs": {"s3": {"addressing_style": "path"}},
    }
    with pytest.raises(ConfigError):
        parse_storage_options(["novalue"])


@pytest.mark.parametrize("job_id", ["../x", "a/b", "has space", "x" * 200, "", ".", "..", "-lead"])
def test_hostile_job_ids_are_refused(job_id: str) -> None:
    with pytest.raises(InvalidJobId):
        validate_job_id(job_id)
    with pytest.raises(InvalidJobId):
        Layout("/zkstore/default").job_handle(job_id)


def test_valid_job_ids() -> None:
    for job_id in ["a", "wordcount-2026.11.21_1", "X" * 128]:
        assert validate_job_id(job_id) == job_id


def handle(**summary: object) -> Handle:
    return Handle.for_payload(
        PayloadRef("file:///s/c/jobs/a/definition/x.pkl", 10, "a" * 64),
        "writer-1",
        summary,  # type: ignore[arg-type]
    )


def test_handle_round_trip_and_size() -> None:
    original = handle(name="etl", max_attempts=3)
    data = original.to_bytes()
    assert len(data) < MAX_HANDLE_BYTES
    parsed = Handle.parse(data, "/p")
    assert parsed == original
    assert parsed.summary == {"name": "etl", "max_attempts": 3}


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff\xfe",
        b"[]",
        b'{"format": 0}',
        json.dumps(
            {
                "format": 1,
                "uri": "u",
                "size": -1,
                "sha256": "a" * 64,
                "created": "2026-01-01T00:00:00Z",
                "writer": "w",
            }
        ).encode(),
        json.dumps(
            {
                "format": 1,
                "uri": "u",
                "size": 1,
                "sha256": "xyz",
                "created": "2026-01-01T00:00:00Z",
                "writer": "w",
            }
        ).encode(),
        json.dumps(
            {
                "format": 1,
                "uri": "u",
                "size": 1,
                "sha256": "a" * 64,
                "created": "yesterday",
                "writer": "w",
            }
        ).encode(),
        json.dumps(
            {
                "format": 1,
                "uri": "u",
                "size": 1,
                "sha256": "a" * 64,
                "created": "2026-01-01T00:00:00Z",
                "writer": "w",
                "x": {"nested": 1},
            }
        ).encode(),
        b"x" * (MAX_HANDLE_BYTES + 1),
    ],
)
def test_garbage_handles_are_refused_with_the_path(data: bytes) -> None:
    with pytest.raises(CorruptHandle, match="/jobs/a"):
        Handle.parse(data, "/jobs/a")


def test_a_handle_of_a_newer_format_is_newer_not_garbage() -> None:
    """A newer protocol's handle is not garbage: NewerRecord (a CorruptRecord, so that every
    reader that survives garbage survives it), saying it needs a newer daemon."""
    data = json.dumps({"format": PROTOCOL + 1, "anything": "a newer writer's"}).encode()
    with pytest.raises(NewerRecord, match=r"/jobs/a.*needs a newer daemon") as raised:
        Handle.parse(data, "/jobs/a")
    assert raised.value.protocol == PROTOCOL + 1
    assert isinstance(raised.value, CorruptRecord) and not isinstance(raised.value, CorruptHandle)


def test_oversized_handle_cannot_be_built() -> None:
    with pytest.raises(SerializationError):
        handle(name="x" * 2000).to_bytes()
