"""Issue 27: the job page and the records it draws from, against a real ZooKeeper.

The leader's history writes (:mod:`zkstore.jobs.history`) never fail on what they find (garbage,
a stale record of an earlier job with the same id); the page draws one bar per attempt, the
current one from the job's status when the history lacks it, escapes what jobs carry, and still
draws a finished job's timeline once its records are gone (the cleanup keeps the history beside
its logs). The leader's side as a user meets it: ``make browser-test``
(tests/http/test_browser.py: a lost attempt and the running one, two bars).
"""

from __future__ import annotations

import re

import pytest

from recovery.observe.jobpage import read_job_page, render_job_page, render_missing, timeline
from recovery.observe.timeline import LOST, RUNNING, UNKNOWN
from tests.helpers import plant
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up
from zkstore.errors import JobNotFound
from zkstore.jobs import history
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.history import AttemptEntry, JobHistory, LeaderHistory
from zkstore.records.job_records import JobStatus
from zkstore.records.strict import parse_time, utc_in, utc_moment, utc_moment_in, utc_now
from zkstore.zookeeper.ops import Fence

pytestmark = pytest.mark.integration

HOSTILE = "<script>alert(1)</script>"


def job(ctx: object, *args: object) -> None:
    return None


def note(cluster: Cluster, job_id: str, entry: AttemptEntry) -> bool:
    cluster.zk.ensure_path(cluster.layout.job_dir(job_id))  # the leader made it with the status
    path = cluster.layout.history(job_id)
    return history.note_attempt(cluster.zk, path, entry, fence=Fence(), job_id=job_id)


def bars(html: str) -> list[tuple[str, str]]:
    found = re.findall(r'<rect class="attempt ([a-z]+)" data-attempt="(\d+)"', html)
    return [(n, how) for how, n in found]


def page_of(cluster: Cluster, job_id: str) -> str:
    data = read_job_page(cluster, job_id)
    return render_job_page(data, daemon_id="d1", leading=True, cluster_id="c")


def test_a_lost_attempt_and_the_running_one_are_two_bars_and_nothing_is_unescaped(
    cluster: Cluster,
) -> None:
    cluster.jobs.submit(JobDefinition.for_function("etl", job, args=[HOSTILE], name=HOSTILE))
    assert note(cluster, "etl", AttemptEntry(1, "d1", utc_moment_in(-60)))
    ended = AttemptEntry(
        1, "?", utc_moment(), history.LOST, utc_moment_in(-30), "killed by signal 9"
    )
    assert note(cluster, "etl", ended)
    assert note(cluster, "etl", AttemptEntry(2, "d2", utc_moment_in(-29)))
    status = JobStatus(
        version=None, state="STARTING", attempt=2, lost=1, updated=parse_time(utc_now())
    )
    plant(cluster.zk, cluster.layout.status("etl"), status.to_bytes())
    terms = LeaderHistory(version=None).with_term("d2-n_0000000002", "d2", utc_in(-31))
    plant(cluster.zk, cluster.layout.leader_history, terms.to_bytes())

    recorded = history.read(cluster.zk, cluster.layout.history("etl"), JobHistory)
    assert recorded is not None
    first = recorded.entries()[0]
    assert (first.daemon, first.outcome, first.note) == ("d1", "LOST", "killed by signal 9")
    html = page_of(cluster, "etl")
    assert bars(html) == [("1", "lost"), ("2", "starting")]
    assert 'class="leader-change"' in html and "d2 leads" in html
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "2 (1 lost to the infrastructure)" in html


def test_garbage_and_a_stale_history_cost_bars_never_the_page_or_the_write(
    cluster: Cluster,
) -> None:
    cluster.jobs.submit(JobDefinition.for_function("odd", job))
    path = cluster.layout.history("odd")
    plant(cluster.zk, path, b"\xff{not json")
    running = JobStatus(
        version=None, state="STARTING", attempt=3, updated=parse_time(utc_now()), daemon_id="d1"
    )
    plant(cluster.zk, cluster.layout.status("odd"), running.to_bytes())
    html = page_of(cluster, "odd")
    assert "the attempt history is unreadable" in html
    assert bars(html) == [("3", "starting")], "the current attempt, from the job's status"

    assert note(cluster, "odd", AttemptEntry(1, "d1", utc_moment())), "garbage is replaced"
    stale = JobHistory(version=None)
    for n in (1, 2, 3):
        stale = stale.with_entry(
            AttemptEntry(n, "old", utc_moment_in(-999), history.FAILED, utc_moment())
        )
    plant(cluster.zk, path, stale.to_bytes())
    assert note(cluster, "odd", AttemptEntry(1, "d1", utc_moment()))
    fresh = history.read(cluster.zk, path, JobHistory)
    assert fresh is not None
    assert [(e.attempt, e.daemon, e.outcome) for e in fresh.entries()] == [(1, "d1", "PLACED")]


def test_an_end_is_told_once_and_a_gap_is_drawn_as_unknown(cluster: Cluster) -> None:
    cluster.jobs.submit(JobDefinition.for_function("gap", job))
    assert note(cluster, "gap", AttemptEntry(1, "d1", utc_moment_in(-90)))  # its end never told
    assert note(cluster, "gap", AttemptEntry(2, "d1", utc_moment_in(-60)))
    assert note(
        cluster, "gap", AttemptEntry(2, "d1", utc_moment(), history.FAILED, utc_moment_in(-40))
    )
    cancel = AttemptEntry(2, "d1", utc_moment(), history.CANCELLED, utc_moment())
    note(cluster, "gap", cancel)  # the job was cancelled while it waited: attempt 2 had failed
    assert note(cluster, "gap", AttemptEntry(3, "d2", utc_moment_in(-20)))
    status = JobStatus(
        version=None, state="STARTING", attempt=3, updated=parse_time(utc_now()), daemon_id="d2"
    )
    plant(cluster.zk, cluster.layout.status("gap"), status.to_bytes())
    data = read_job_page(cluster, "gap")
    data.item["driver"] = {"attempt": 3}  # as a driver holding its running node makes it
    spans = timeline(data).attempts
    assert [(s.attempt, s.outcome) for s in spans] == [(1, UNKNOWN), (2, "FAILED"), (3, RUNNING)]
    assert spans[0].ended == spans[1].placed, "an untold end: over when the next was placed"


def test_a_finished_jobs_timeline_outlives_its_records(cluster: Cluster) -> None:
    cluster.jobs.submit(JobDefinition.for_function("done", job))
    assert note(cluster, "done", AttemptEntry(1, "d1", utc_moment_in(-30)))
    assert note(
        cluster, "done", AttemptEntry(1, "d1", utc_moment(), history.LOST, utc_moment_in(-20))
    )
    assert note(cluster, "done", AttemptEntry(2, "d2", utc_moment_in(-19)))
    assert note(
        cluster, "done", AttemptEntry(2, "d2", utc_moment(), history.SUCCEEDED, utc_moment())
    )
    cluster.results.create_dirty("done", "SUCCEEDED", attempts=2, daemon="d2", lost=1)
    assert clean_up(cluster, "done")
    assert cluster.zk.exists(cluster.layout.job_dir("done")) is None
    assert bars(page_of(cluster, "done")) == [("1", "lost"), ("2", "succeeded")]
    assert timeline(read_job_page(cluster, "done")).attempts[0].outcome == LOST


def test_a_job_without_any_trace_is_a_404_page(cluster: Cluster) -> None:
    with pytest.raises(JobNotFound):
        read_job_page(cluster, "never")
    html = render_missing("never", daemon_id="d1", leading=False, cluster_id="c")
    assert "No such job" in html and "<code>never</code>" in html


def test_a_lost_daemon_says_since_when(cluster: Cluster) -> None:
    from recovery.observe.cluster_view import read_view
    from recovery.observe.page import render

    cluster.zk.ensure_path(f"{cluster.layout.assignments}/gone/etl")  # its session ended
    since = utc_in(-12)
    left = LeaderHistory(version=None).with_departed({"gone": since}, set())
    plant(cluster.zk, cluster.layout.leader_history, left.to_bytes())
    view = read_view(cluster)
    (lost,) = [d for d in view.daemons if d.lost]
    assert (lost.daemon_id, lost.lost_since) == ("gone", parse_time(since))
    assert lost.as_dict()["lost_since"] == since
    page = render(view, daemon_id="d1", leading=True, cluster_id="c")
    assert re.search(
        rf"left the fleet since {re.escape(since)} \(1\ds ago\); 1 attempt\(s\) still placed",
        page,
    )
