"""A schedule's definition payload that no spec references is found by ``handles lingering`` and
removed by ``handles cleanup``; the payload a schedule references never is. A crash between
writing the payload and publishing the spec leaves exactly such an orphan."""

from __future__ import annotations

import json

import pytest

from recovery.leader.election import LeaderElection
from tests.cli import zkstore
from tests.helpers import plant
from zkstore.cluster import Cluster
from zkstore.conditions import CANNOT_FIRE, JOB, SCHEDULE, Condition, ConditionStore
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.records.strict import utc_moment
from zkstore.schedules.schedule_records import ScheduleSpec
from zkstore.schedules.schedule_store import ScheduleStore
from zkstore.zookeeper.ops import Delete

pytestmark = pytest.mark.integration

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
    spec = ScheduleSpec(version=None, name="nightly", created=utc_moment(), cron="0 2 * * *")
    created = store.create(spec, JobDefinition.for_function("nightly", nightly))
    assert lingering(config) == []

    def crash(step: str) -> None:
        if step == "create:payload-written":
            raise Crash(step)

    crashing = ScheduleStore.for_config(config, cluster.zk, on_step=crash)
    other = ScheduleSpec(version=None, name="hourly", created=utc_moment(), cron="0 * * * *")
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
    spec = ScheduleSpec(version=None, name="nightly", created=utc_moment(), cron="0 2 * * *")
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


# -- the leader's conditions on a schedule (issue 60 loose ends, item 4) --------------------------


def conditions_found(config: StoreConfig) -> list[dict[str, object]]:
    done = zkstore(config, "handles lingering", "--min-age", "0s", "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    found: list[dict[str, object]] = json.loads(done.stdout)["findings"]
    return [f for f in found if f["kind"] == "orphan-conditions"]


def cannot_fire(cluster: Cluster, name: str) -> bool:
    """The leader says on schedule ``name`` that it fires none of its windows (fenced); True
    if that changed anything."""
    election = LeaderElection(cluster.zk, cluster.layout, "d1", lambda: None)
    election.contend()
    condition = Condition(CANNOT_FIRE, "UnderMinimum", "cannot fire: 1 s apart", utc_moment())
    return ConditionStore(cluster.zk, cluster.layout).hold(
        SCHEDULE, name, condition, fence=election.fence()
    )


def test_a_schedules_conditions_go_with_it_and_are_never_made_after_it(
    config: StoreConfig, cluster: Cluster
) -> None:
    store = ScheduleStore.for_config(config, cluster.zk)
    spec = ScheduleSpec(version=None, name="nightly", created=utc_moment(), cron="0 2 * * *")
    store.create(spec, JobDefinition.for_function("nightly", nightly))
    assert cannot_fire(cluster, "nightly")
    path = cluster.layout.conditions_of(SCHEDULE, "nightly")
    assert cluster.zk.exists(path) is not None

    done = zkstore(config, "schedules delete", "nightly", "--yes")
    assert done.returncode == 0, done.stderr
    assert cluster.zk.exists(path) is None  # in the schedule's own transaction
    # a leader that read the schedule before it went makes no conditions for it after
    assert not cannot_fire(cluster, "nightly")
    assert cluster.zk.exists(path) is None
    assert conditions_found(config) == []


def test_conditions_of_what_is_gone_are_lingering_and_cleaned_the_others_never(
    config: StoreConfig, cluster: Cluster
) -> None:
    """Conditions left by a release that deleted a schedule without them, and by a job whose
    records are all gone, are found and removed; a live schedule's and a current job's are
    kept."""
    store = ScheduleStore.for_config(config, cluster.zk)
    for name in ("nightly", "hourly"):
        spec = ScheduleSpec(version=None, name=name, created=utc_moment(), cron="0 2 * * *")
        store.create(spec, JobDefinition.for_function(name, nightly))
        assert cannot_fire(cluster, name)
    cluster.zk.commit(  # the old delete: the spec and its state only
        [Delete(store.layout.schedule_state("hourly")), Delete(store.layout.schedule("hourly"))]
    )
    cluster.jobs.submit(JobDefinition.for_function("current", nightly))
    for job in ("current", "forgotten"):
        plant(
            cluster.zk,
            cluster.layout.conditions_of(JOB, job),
            b'{"items": {}}',
        )
    found = sorted((f["job_id"], f["target"]) for f in conditions_found(config))
    assert found == [
        ("forgotten", cluster.layout.conditions_of(JOB, "forgotten")),
        ("schedule:hourly", cluster.layout.conditions_of(SCHEDULE, "hourly")),
    ]
    done = zkstore(config, "handles cleanup", "--min-age", "0s", "--yes")
    assert done.returncode == 0, done.stderr
    assert conditions_found(config) == []
    kept = [cluster.layout.conditions_of(SCHEDULE, "nightly")]
    kept.append(cluster.layout.conditions_of(JOB, "current"))
    assert all(stat is not None for stat in cluster.zk.exists_many(kept))
