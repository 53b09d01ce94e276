"""Issue 53 item 4: the status page, the job page and ``/metrics`` take the times of the records
they show from the view built from those records, typed; the JSON the view serves stays as it
was, and nothing of it is parsed back for a decision or a number."""

from __future__ import annotations

import re
import time
from typing import Any, cast

import pytest

from recovery.observe.cluster_view import read_view
from recovery.observe.jobpage import read_job_page, render_job_page
from recovery.observe.metrics import ClusterCollector
from recovery.observe.page import render
from tests.helpers import plant
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up
from zkstore.jobs.definition import JobDefinition
from zkstore.records.fleet_records import LeaderInfo
from zkstore.records.strict import time_text, utc_moment_in

pytestmark = pytest.mark.integration


def job(ctx: object) -> None:
    return None


def test_the_leaders_since_is_a_time_in_the_view_and_its_metric_and_page_come_from_it(
    cluster: Cluster,
) -> None:
    since = utc_moment_in(-75)
    info = LeaderInfo(version=None, daemon_id="d1", host="h", pid=7, since=since, contender="c")
    plant(cluster.zk, cluster.layout.leader_info, info.to_bytes())
    view = read_view(cluster)
    assert view.leader_since == since
    assert view.leader == {"id": "d1", "host": "h", "pid": 7, "since": time_text(since)}
    view.leader["since"] = "not a time"  # the JSON is for people and the API: never read back
    collector = ClusterCollector(cast(Any, None), cast(Any, None))
    found = {m.name: m for m in collector._cluster(view)}
    assert found["zkstore_leader_since_timestamp_seconds"].samples[0].value == since.timestamp()
    page = render(view, daemon_id="d1", leading=True, cluster_id="c")
    shown = re.search(r"\(pid 7\), since (\d+)s ago</p>", page)
    assert shown is not None, "the age, from the typed time"
    assert 75 <= int(shown.group(1)) <= time.time() - since.timestamp() + 1


def test_a_finished_job_says_when_it_finished_and_how_long_it_took_from_its_records(
    cluster: Cluster,
) -> None:
    handle = cluster.jobs.submit(JobDefinition.for_function("done", job))
    result = cluster.results.create_dirty(
        "done", "SUCCEEDED", attempts=1, daemon="d1", summary=handle.summary
    )
    assert clean_up(cluster, "done")
    data = read_job_page(cluster, "done")
    submitted = data.started
    assert submitted is not None and data.finished == result.finished
    assert data.item["result"]["finished"] == time_text(result.finished)
    assert data.item["submitted"] == time_text(submitted), "the summary's text, as it was"
    data.item["result"]["finished"] = "not a time"  # the page reads the record's time
    html = render_job_page(data, daemon_id="d1", leading=True, cluster_id="c")
    assert re.search(r"finished \d+s ago", html)
    view = read_view(cluster)
    (snapshot,) = [j for j in view.jobs.values() if j.job_id == "done"]
    assert snapshot.submitted_at == submitted
    page = render(view, daemon_id="d1", leading=True, cluster_id="c")
    took = (result.finished - submitted).total_seconds()
    assert took < 60 and re.search(rf"<td>{int(took)}s</td>", page) is not None, page
    assert time.time() - result.finished.timestamp() < 60
