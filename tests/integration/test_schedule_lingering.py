"""A schedule's definition payload that no spec references is found by ``handles lingering`` and
removed by ``handles cleanup``; the payload a schedule references never is. A crash between
writing the payload and publishing the spec leaves exactly such an orphan."""

from __future__ import annotations

import json

import pytest

from tests.cli import zkstore
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.schedules.records import ScheduleSpec
from zkstore.schedules.store import ScheduleStore
from zkstore.strict import utc_now

KIND = "orphan-schedule-payload"


def nightly(ctx: object) -> None:
    return None


def lingering(config: StoreConfig) -> list[dict[str, object]]:
    done = zkstore(config, "handles lingering", "--min-age", "0s", "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    found: list[dict[str, object]] = json.loads(done.stdout)["findings"]
    return [f for f in found if f["kind"] == KIND]


class Crash(Exception):
    """The death of the writer at a step the test names."""


def test_an_unreferenced_schedule_payload_is_lingering_and_cleaned_the_referenced_one_never(
    config: StoreConfig, cluster: Cluster
) -> None:
    store = ScheduleStore.for_config(config, cluster.zk)
    spec = ScheduleSpec(version=None, name="nightly", created=utc_now(), cron="0 2 * * *")
    created = store.create(spec, JobDefinition.for_function("nightly", nightly))
    assert lingering(config) == []

    def crash(step: str) -> None:
        if step == "create:payload-written":
            raise Crash(step)

    crashing = ScheduleStore.for_config(config, cluster.zk, on_step=crash)
    other = ScheduleSpec(version=None, name="hourly", created=utc_now(), cron="0 * * * *")
    with pytest.raises(Crash):
        crashing.create(other, JobDefinition.for_function("hourly", nightly))
    (orphan,) = lingering(config)
    assert orphan["job_id"] == "schedule:hourly"
    assert orphan["target"] != created.spec.handle.uri

    done = zkstore(config, "handles cleanup", "--min-age", "0s", "--yes")
    assert done.returncode == 0, done.stderr
    assert lingering(config) == []
    assert store.definition(store.spec("nightly")).job_id == "nightly", "the live one is kept"
    assert not cluster.storage.fs.exists(cluster.storage.path_of(str(orphan["target"])))


def test_handles_verify_checks_each_schedules_definition_without_unpickling_it(
    config: StoreConfig, cluster: Cluster
) -> None:
    store = ScheduleStore.for_config(config, cluster.zk)
    spec = ScheduleSpec(version=None, name="nightly", created=utc_now(), cron="0 2 * * *")
    created = store.create(spec, JobDefinition.for_function("nightly", nightly))
    fine = zkstore(config, "handles verify", "--format", "json")
    assert fine.returncode == 0 and json.loads(fine.stdout) == {"checked": 1, "problems": []}

    path = cluster.storage.path_of(created.spec.handle.uri)
    good = cluster.storage.fs.cat_file(path)
    cluster.storage.fs.pipe_file(path, good[:-1] + bytes([good[-1] ^ 1]))
    tampered = zkstore(config, "handles verify", "--format", "json")
    assert tampered.returncode == 1
    (problem,) = json.loads(tampered.stdout)["problems"]
    assert problem["kind"] == "schedule" and problem["job"] == "nightly"
