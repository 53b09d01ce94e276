"""Issue 27: the status page's tables say what a user looks for (real ZooKeeper, the page as
rendered from a view of it).

Before (01c8155): no waiting reason and no daemon column, "3 of 3" whether the earlier attempts
failed or were lost, no cancel reason, job ids not links, no finish time or duration, the
finished table's driver and checkpoint columns always empty, errors cut mid-word with no
ellipsis, and a daemon that was lost with attempts on it simply absent.
"""

from __future__ import annotations

import re

import pytest

from recovery.observe.cluster_view import read_view
from recovery.observe.page import CELL_CHARS, FINISHED_HEADERS, JOB_HEADERS, render
from tests.helpers import plant
from zkstore.cluster import Cluster
from zkstore.jobs.definition import JobDefinition
from zkstore.records.job_records import CancelRequest, JobStatus
from zkstore.records.strict import parse_time, utc_now

pytestmark = pytest.mark.integration


def job(ctx: object) -> None:
    return None


def cells(page: str, job_id: str) -> list[str]:
    """The cells of the row of ``job_id`` (tags left out)."""
    row = next(r for r in page.split("<tr>") if f"<code>{job_id}</code>" in r)
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]


def test_tables_say_why_where_how_and_when(cluster: Cluster) -> None:
    layout = cluster.layout
    cluster.jobs.submit(JobDefinition.for_function("waits", job, require={"zone": "eu"}))
    waiting = JobStatus(
        version=None,
        state="PENDING",
        updated=parse_time(utc_now()),
        reason="no daemon with zone=eu is up",
    )
    plant(cluster.zk, layout.status("waits"), waiting.to_bytes())

    cluster.jobs.submit(JobDefinition.for_function("runs", job, max_attempts=3))
    running = JobStatus(
        version=None,
        state="STARTING",
        attempt=3,
        lost=2,
        updated=parse_time(utc_now()),
        daemon_id="d1",
    )
    plant(cluster.zk, layout.status("runs"), running.to_bytes())

    long_error = "ValueError: " + "a very long error message " * 20
    cluster.jobs.submit(JobDefinition.for_function("broke", job))
    cluster.results.create_dirty(
        "broke", "FAILED", attempts=3, error=long_error, daemon="d2", failures=3, lost=0
    )
    cluster.jobs.submit(JobDefinition.for_function("stopped", job))
    cancel = CancelRequest(
        version=None, requested=parse_time(utc_now()), by="ann", reason="wrong day"
    )
    cluster.results.create_dirty(
        "stopped", "CANCELLED", attempts=1, error="cancelled", cancel=cancel, daemon="d1"
    )
    for done in ("broke", "stopped"):  # cleaned up: the Finished table
        cluster.results.mark_clean(done)
    cluster.zk.ensure_path(f"{layout.assignments}/gone/runs")  # d-gone's session ended

    page = render(read_view(cluster), daemon_id="d1", leading=True, cluster_id="default")

    assert '<a href="/jobs/waits"><code>waits</code></a>' in page
    assert cells(page, "waits")[2] == "PENDINGno daemon with zone=eu is up"
    runs = dict(zip(JOB_HEADERS, cells(page, "runs"), strict=True))
    assert (runs["attempts"], runs["daemon"]) == ("3 of 3 (2 lost)", "d1")

    broke = dict(zip(FINISHED_HEADERS, cells(page, "broke"), strict=True))
    assert (broke["outcome"], broke["attempts"], broke["daemon"]) == (
        "FAILED",
        "3 of 3 (3 failed)",
        "d2",
    )
    assert broke["finished"].endswith(" ago") and broke["took"].endswith("s")
    error = broke["error or reason"]
    assert error.endswith("…") and len(error) <= CELL_CHARS
    assert long_error.startswith(error[:-1]) and long_error[len(error) - 1] == " ", "at a word"
    stopped = dict(zip(FINISHED_HEADERS, cells(page, "stopped"), strict=True))
    assert stopped["error or reason"] == "cancelled by ann: wrong day"
    assert "driver" not in FINISHED_HEADERS and "checkpoint" not in FINISHED_HEADERS

    gone = cells(page, "gone")
    assert gone[3].startswith("GONE left the fleet; 1 attempt(s) still placed on it"), gone
    assert "not re-placed" not in gone[3], "it says what is known, not what may happen"
