"""Artifact roots come from flags or the environment, and travel to drivers."""

from __future__ import annotations

import pytest

from zkstore.config import StoreConfig
from zkstore.errors import ConfigError

pytestmark = pytest.mark.unit


def test_artifact_roots_come_from_flags_or_the_environment_and_travel_to_drivers() -> None:
    env = {"ZKSTORE_ARTIFACT_ROOTS": "file:///scratch, s3://bucket/runs"}
    config = StoreConfig.from_env(env)
    assert config.artifact_roots == ("file:///scratch", "s3://bucket/runs")
    assert StoreConfig.from_env(env, artifact_roots=("file:///x",)).artifact_roots == (
        "file:///x",
    ), "a flag wins"
    assert StoreConfig.from_json(config.to_json()) == config, "the driver's pipe carries them"
    for bad in ("file:///", "s3://", "/no/protocol", "file:///a/../b", "file:///a b"):
        with pytest.raises(ConfigError, match="artifact root"):
            StoreConfig.from_env({}, artifact_roots=(bad,))
