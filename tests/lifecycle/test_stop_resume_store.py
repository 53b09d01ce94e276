"""``jobs stop`` and ``jobs resume`` in the store (zkstore.lifecycle.stopstore) and the swap of a
stopped job's definition (zkstore.lifecycle.redefine), against the real ZooKeeper and storage,
with a crash (a child process dying) between every two of their writes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers import crash, quarantined
from zkstore.admin.lingering import find_lingering
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import (
    ConfigError,
    JobFinished,
    JobNotFound,
    JobQuarantined,
    WrongState,
)
from zkstore.jobs.control.values import CHECKPOINT
from zkstore.jobs.definition import JobDefinition
from zkstore.lifecycle.lifecycle_states import STOPPED
from zkstore.lifecycle.redefine import replace_definition
from zkstore.lifecycle.stopstore import StopStore
from zkstore.records.job_records import JobStatus, RunningInfo
from zkstore.records.job_states import FAILED, STARTING
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.ops import Create
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration

JOB = "pipeline"


def submit(cluster: Cluster, *, state: str = STOPPED, checkpoints: int = 3) -> None:
    """A job as a leader left it: status ``state`` at attempt 2, ``checkpoints`` taken."""
    cluster.jobs.submit(JobDefinition.for_script(JOB, "print('v1')", filename="v1.py"))
    status = JobStatus(
        version=None, state=state, attempt=2, failures=1, updated=parse_time(utc_now())
    )
    cluster.zk.ensure_path(cluster.layout.job_dir(JOB))
    cluster.zk.create(cluster.layout.status(JOB), status.to_bytes())
    store = cluster.checkpoints(JOB)
    for day in range(1, checkpoints + 1):
        store.add({"day": day})


def stopped(cluster: Cluster) -> None:
    """Asked to stop, and stopped."""
    submit(cluster)
    StopStore(cluster).request(JOB, checkpoint=False)


def source(cluster: Cluster) -> str | None:
    return cluster.jobs.recover(JOB, lock=False).state.source


def test_a_stop_asks_for_a_checkpoint_and_asking_again_keeps_the_first(cluster: Cluster) -> None:
    submit(cluster, state=STARTING)
    stops = StopStore(cluster)
    first = stops.request(JOB, checkpoint=True, timeout=90, reason="upgrade to v2")
    assert first.token is not None and first.timeout_ms == 90_000 and first.checkpoint
    assert stops.request_of(JOB) == first
    assert cluster.control(JOB).desired().values[CHECKPOINT] == first.token
    again = stops.request(JOB, checkpoint=True, timeout=5)
    assert again == first  # the first request stands (its token, its deadline)
    with pytest.raises(ConfigError, match="0 to 7 days"):
        stops.request(JOB, checkpoint=True, timeout=30 * 86400)


def test_a_stop_without_checkpoint_asks_nothing_of_the_job(cluster: Cluster) -> None:
    submit(cluster, state=STARTING)
    request = StopStore(cluster).request(JOB)
    assert not request.checkpoint and request.token is None
    assert CHECKPOINT not in cluster.control(JOB).desired().values


def test_a_stop_of_a_job_no_leader_saw_yet(cluster: Cluster) -> None:
    cluster.jobs.submit(JobDefinition.for_script(JOB, "print(1)", filename="v1.py"))
    assert StopStore(cluster).request(JOB).version == 0


def test_a_stop_is_refused_for_a_finished_quarantined_or_unknown_job(cluster: Cluster) -> None:
    stops = StopStore(cluster)
    with pytest.raises(JobNotFound):
        stops.request("nope")
    submit(cluster, state=STARTING)
    cluster.results.create_dirty(JOB, FAILED, attempts=2)
    with pytest.raises(JobFinished):
        stops.request(JOB)
    assert stops.request_of(JOB) is None


def test_a_stop_is_refused_for_a_quarantined_job(cluster: Cluster) -> None:
    quarantined(cluster, JOB)
    with pytest.raises(JobQuarantined):
        StopStore(cluster).request(JOB)
    with pytest.raises(JobQuarantined):
        StopStore(cluster).resume(JOB)
    assert StopStore(cluster).request_of(JOB) is None


def test_a_crash_between_the_stop_and_its_checkpoint_request_is_completed_by_asking_again(
    cluster: Cluster, config: StoreConfig
) -> None:
    submit(cluster, state=STARTING)
    crash(config, "stop", JOB, "stop:requested", module="tests.crash_lifecycle")
    stops = StopStore(cluster)
    left = stops.request_of(JOB)
    assert left is not None and left.checkpoint and left.token is not None
    assert CHECKPOINT not in cluster.control(JOB).desired().values
    assert stops.request(JOB, checkpoint=True) == left
    assert cluster.control(JOB).desired().values[CHECKPOINT] == left.token


def test_only_a_stopped_job_resumes(cluster: Cluster) -> None:
    submit(cluster, state=STARTING)
    stops = StopStore(cluster)
    with pytest.raises(WrongState, match="is STARTING, not STOPPED: stop it first"):
        stops.resume(JOB)
    stops.request(JOB)
    with pytest.raises(WrongState, match="is STOPPING, not STOPPED: it is still stopping"):
        stops.resume(JOB)
    with pytest.raises(JobNotFound):
        stops.resume("nope")


def test_a_resume_says_which_checkpoint_and_is_idempotent(cluster: Cluster) -> None:
    stopped(cluster)
    stops = StopStore(cluster)
    status_before = cluster.zk.get(cluster.layout.status(JOB))
    resumed = stops.resume(JOB)
    assert (resumed.checkpoint_id, resumed.definition_version, resumed.already) == (3, None, False)
    assert resumed.describe().startswith(f"job {JOB} resumes as it was from checkpoint 3 (taken ")
    assert stops.request_of(JOB) is None
    assert cluster.zk.get(cluster.layout.status(JOB)) == status_before  # the leader's to write
    again = stops.resume(JOB)
    assert again.already and again.checkpoint_id == 3


def test_a_resume_with_new_code_swaps_the_definition_and_discards_the_old(
    cluster: Cluster,
) -> None:
    stopped(cluster)
    old_uri = cluster.jobs.handles.get_handle(JOB).uri
    v2 = JobDefinition.for_script(JOB, "print('v2')", filename="v2.py", max_attempts=7)
    resumed = StopStore(cluster).resume(JOB, definition=v2, summary={"timeout": 3600.0})
    assert resumed.definition_version == 1
    handle = cluster.jobs.handles.get_handle(JOB)
    assert handle.summary["max_attempts"] == 7 and handle.summary["timeout"] == 3600.0
    assert source(cluster) == "print('v2')"
    assert not cluster.storage.exists(old_uri)
    assert [f for f in find_lingering(cluster, min_age=0) if f.job_id == JOB] == []


def test_a_resume_with_options_only_keeps_the_code(cluster: Cluster) -> None:
    stopped(cluster)
    resumed = StopStore(cluster).resume(JOB, summary={"progress_timeout": 120.0})
    assert resumed.definition_version == 1 and source(cluster) == "print('v1')"
    assert cluster.jobs.handles.get_handle(JOB).summary["progress_timeout"] == 120.0


#: after a crash at each step: (the code the handle points at, the stop still requested,
#: lingering payloads of the job)
STEPS: dict[str, tuple[str, bool, int]] = {
    "replace:payload-written": ("print('v1')", True, 1),
    "replace:committed": ("print('v2')", True, 1),
    "replace:old-discarded": ("print('v2')", True, 0),
    "resume:redefined": ("print('v2')", True, 0),
    "resume:requested": ("print('v2')", False, 0),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_a_crash_at_any_step_of_a_resume_leaves_a_consistent_job(
    cluster: Cluster, config: StoreConfig, step: str
) -> None:
    stopped(cluster)
    crash(config, "resume", JOB, step, module="tests.crash_lifecycle", marker="v2")
    code, stop_left, orphans = STEPS[step]
    # Invariant 1 holds: the handle verifies, whichever it is.
    assert source(cluster) == code
    assert (StopStore(cluster).request_of(JOB) is not None) == stop_left
    status = StopStore(cluster).status(JOB)
    assert status is not None and status.state == STOPPED
    findings = [f for f in find_lingering(cluster, min_age=0) if f.job_id == JOB]
    assert len(findings) == orphans and all(f.garbage for f in findings), findings
    # The user runs the resume again: it ends resumed with the new code.
    v2 = JobDefinition.for_script(JOB, "print('v2')", filename="v2.py")
    resumed = StopStore(cluster).resume(JOB, definition=v2 if stop_left else None)
    assert resumed.already == (not stop_left)
    assert source(cluster) == "print('v2')"
    assert StopStore(cluster).request_of(JOB) is None
    findings = [f for f in find_lingering(cluster, min_age=0) if f.job_id == JOB]
    assert len(findings) == orphans and all(f.garbage for f in findings)


def running(cluster: Cluster, driver: ZooKeeper) -> None:
    info = RunningInfo(version=None, attempt=2, host="h", pid=1, started=parse_time(utc_now()))
    driver.commit([Create(cluster.layout.running(JOB), info.to_bytes(), ephemeral=True)])


def test_no_definition_is_swapped_under_a_running_driver(
    cluster: Cluster, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    stopped(cluster)
    running(cluster, stand_in_session())  # a driver that should not be there (a stale launch)
    v2 = JobDefinition.for_script(JOB, "print('v2')", filename="v2.py")
    version = cluster.zk.get(cluster.layout.status(JOB))[1].version
    with pytest.raises(WrongState, match="a driver of pipeline runs"):
        replace_definition(cluster, JOB, v2, status_version=version)
    assert source(cluster) == "print('v1')"
    assert [f for f in find_lingering(cluster, min_age=0) if f.job_id == JOB] == []


def test_no_definition_is_swapped_once_the_status_moved(cluster: Cluster) -> None:
    stopped(cluster)
    path = cluster.layout.status(JOB)
    _, stat = cluster.zk.get(path)
    moved = JobStatus(version=None, state=STARTING, attempt=3, updated=parse_time(utc_now()))
    cluster.zk.set(path, moved.to_bytes(), version=stat.version)  # a leader placed attempt 3
    v2 = JobDefinition.for_script(JOB, "print('v2')", filename="v2.py")
    with pytest.raises(WrongState, match="changed since it was read"):
        replace_definition(cluster, JOB, v2, status_version=stat.version)
    with pytest.raises(ConfigError, match="job 'other'"):
        other = JobDefinition.for_script("other", "print(2)", filename="v2.py")
        replace_definition(cluster, JOB, other, status_version=stat.version + 1)
    assert source(cluster) == "print('v1')"


def test_a_resume_racing_the_leader_is_refused_and_changes_nothing(
    cluster: Cluster, config: StoreConfig
) -> None:
    stopped(cluster)
    path = cluster.layout.status(JOB)

    def leader_acts_meanwhile(step: str) -> None:
        if step == "resume:redefined":  # a cancel recorded, say: the status moved on
            cluster.zk.set(path, cluster.zk.get(path)[0])

    with (
        Cluster.open(config, on_step=leader_acts_meanwhile) as racing,
        pytest.raises(WrongState, match="changed while it was being resumed"),
    ):
        StopStore(racing).resume(JOB)
    assert cluster.zk.exists(cluster.layout.stop(JOB)) is not None
