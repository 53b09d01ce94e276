"""The job of the exactly-once outputs' end-to-end tests (``tests/output_jobs.py:days``), its
submission, and the check that every day was committed once as each reader sees it: the
manifest, ``zkstore outputs``, fsspec alone, Spark in the job, the staging place.
"""

from __future__ import annotations

import json
from pathlib import Path

import fsspec

from tests import output_jobs
from tests.cli import script_json
from tests.helpers import hands_client
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.outputs.manifest import read_paths

DAYS = 4
ROWS = sum(len(output_jobs.rows(d)) for d in range(1, DAYS + 1))
TOTAL = sum(r["value"] for d in range(1, DAYS + 1) for r in output_jobs.rows(d))


def submit(config: StoreConfig, out: Path, hold_before: int, hold_after: int) -> str:
    with hands_client(config) as client:
        return client.submit_function(
            output_jobs.days,
            str(out),
            str(DAYS),
            str(hold_before),
            str(hold_after),
            job_id="days",
            max_attempts=1,
        )


def read_rows(config: StoreConfig, paths: list[str]) -> list[dict[str, int]]:
    """Every row of the committed parts, read with fsspec alone (as pandas would)."""
    found = []
    for path in paths:
        fs, root = fsspec.core.url_to_fs(path, **config.storage_options)
        for name in fs.find(root):
            found += [json.loads(line) for line in fs.cat_file(name).decode().splitlines()]
    return found


def staged(config: StoreConfig, place: str) -> list[str]:
    """What is under the output's place (relative names)."""
    with Cluster.open(config) as cluster:
        return sorted(
            o.uri[len(place) + 1 :] for o in cluster.artifact_space.objects("days", place)
        )


def check_committed_once(config: StoreConfig, out: Path, expected_parts: list[str]) -> None:
    """One part per day, as each reader sees it."""
    shown = script_json(config, "outputs show", "days", "days")
    place = shown["uri"]
    assert [p for c in shown["commits"] for p in c["parts"]] == expected_parts
    assert [c["commit"] for c in shown["commits"]] == list(range(1, DAYS + 1)), "one per day"
    assert shown["from"] == "manifest", "the job is over: its kept output's manifest file"
    paths = script_json(config, "outputs paths", "days", "days")
    assert paths == [f"{place}/{p}" for p in expected_parts]
    assert read_paths(place, **config.storage_options) == paths
    rows = read_rows(config, paths)
    assert (len(rows), sum(r["value"] for r in rows)) == (ROWS, TOTAL)
    assert sorted(r["day"] for r in rows) == sorted(
        d for d in range(1, DAYS + 1) for _ in range(d)
    ), "each day's rows once"
    done = json.loads((out / "done-attempt-2").read_text())
    assert done["paths"] == paths
    if place.startswith("file://"):
        assert (done["spark_rows"], done["spark_sum"]) == (ROWS, TOTAL), "Spark's read"
    [listed] = script_json(config, "outputs list", "days")
    assert (listed["name"], listed["commits"], listed["parts"]) == ("days", DAYS, DAYS)
    left = staged(config, place)
    assert [n for n in left if not n.startswith("_manifests/")] == [
        f"{p}/rows.json" for p in expected_parts
    ], "nothing but the committed parts is kept"
