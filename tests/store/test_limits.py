"""The longest ids, names, roots and signatures still fit a handle; one character more is
refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import jobs
from zkstore.config import StoreConfig
from zkstore.errors import ConfigError
from zkstore.jobs.definition import JobDefinition
from zkstore.records.handle import MAX_HANDLE_BYTES, Handle, PayloadRef

pytestmark = pytest.mark.unit


def test_limits_in_characters_fit_every_accepted_id_and_name(tmp_path: Path) -> None:
    """The longest ids, a name of 100 emoji, a filename of emoji, the longest storage root and
    a signature: the handle still fits. One character more is refused, in characters."""
    root = f"file://{tmp_path}/" + "r" * (300 - len(f"file://{tmp_path}/"))
    config = StoreConfig(storage_url=root, cluster_id="c" * 128)
    assert len(config.storage_url.encode()) == 300
    name = "\U0001f600" * 100
    job_id = "j" * 128
    definition = JobDefinition.for_script(
        job_id, "pass", filename="/" + "\U0001f600" * 200 + ".py", name=name, max_attempts=1000
    )
    summary = definition.summary()
    uri = f"{root}/{'c' * 128}/jobs/{job_id}/definition/{'f' * 32}.pkl"
    ref = PayloadRef(uri, 2**40, "a" * 64, "b" * 64)
    handle = Handle.for_payload(ref, "w" * 128, summary)
    assert len(handle.to_bytes()) <= MAX_HANDLE_BYTES
    with pytest.raises(ConfigError, match="1-100 characters"):
        JobDefinition.for_function("x", jobs.sleeper, name="\U0001f600" * 101)
    with pytest.raises(ConfigError, match="over 300"):
        StoreConfig(storage_url=root + "r")
