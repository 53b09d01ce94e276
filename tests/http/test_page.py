"""The status page shows anybody's text as text."""

from __future__ import annotations

import pytest

from recovery.observe.cluster_view import read_view
from recovery.observe.page import render
from zkstore.cluster import Cluster
from zkstore.jobs.definition import JobDefinition

pytestmark = pytest.mark.integration


def test_page_shows_planted_text_as_text(cluster: Cluster) -> None:
    """Job names and reasons are anybody's text: the page escapes every one of them."""
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'

    def job(ctx: object) -> None:
        return None

    cluster.jobs.submit(JobDefinition.for_function("named", job, name=evil))
    cluster.quarantine.move_in("named", f"reason {evil}")
    view = read_view(cluster)
    page = render(view, daemon_id=evil, leading=False, cluster_id="default")
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert page.count("named") >= 2, "in the jobs table and in quarantine"
