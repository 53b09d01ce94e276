"""Result retention (``zkstore daemon --keep-results``) and the cleanup index a takeover lists."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from recovery.cli.main import cli
from tests.helpers import requests_sent
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.snapshot import read_listing
from zkstore.records.job_states import CLEAN, SUCCEEDED
from zkstore.records.result_records import JobResult
from zkstore.records.strict import parse_time, utc_now

pytestmark = pytest.mark.integration


def test_the_index_follows_the_results_state(cluster: Cluster) -> None:
    layout = cluster.layout
    with requests_sent(cluster.zk) as recording:
        cluster.results.create_dirty("a", SUCCEEDED, attempts=1)
    assert recording == ["Transaction"], "no look for an index entry a DIRTY result never has"
    assert cluster.results.cleanup_pending() == ["a"]
    assert read_listing(cluster.zk, layout, results=False).cleanup == {"a"}
    with requests_sent(cluster.zk) as cleaning:
        cluster.results.mark_clean("a")
    assert cleaning == ["GetData", "Transaction"], "no look for the entry a DIRTY result has"
    assert cluster.results.cleanup_pending() == []
    assert cluster.zk.exists(layout.cleanup_entry("a")) is None
    cluster.zk.create(layout.cleanup_entry("b"))  # stale: planted, or left by an older writer
    cluster.results.create_dirty("b", SUCCEEDED, attempts=1)  # never blocked by it
    cluster.results.mark_clean("b")
    assert cluster.results.cleanup_pending() == []
    legacy = JobResult(version=None, job_id="c", finished=parse_time(utc_now()))
    cluster.zk.create(layout.result("c"), legacy.to_bytes())
    assert cluster.results.mark_clean("c").state == CLEAN, "a DIRTY result without an entry"
    listing = read_listing(cluster.zk, layout, results=False)
    assert listing.results is None and listing.job_ids() == set()


def test_keep_results_is_validated(config: StoreConfig) -> None:
    for bad in ("0", "-1h", "soon"):
        result = CliRunner().invoke(cli, ["daemon", "--keep-results", bad, "--zk", "127.0.0.1:9"])
        assert result.exit_code == 2, (bad, result.output)
    help_text = CliRunner().invoke(cli, ["daemon", "--help"]).output
    assert "--keep-results" in help_text and "7d]" in " ".join(help_text.split())


def test_a_result_is_marked_clean_over_the_version_its_writer_knows(cluster: Cluster) -> None:
    """The leader marks the result it recorded with no read of it; a version that is stale by
    then (the result changed since) is read again, and the result marked clean all the same."""
    recorded = cluster.results.create_dirty("a", SUCCEEDED, attempts=1)
    with requests_sent(cluster.zk) as sent:
        assert cluster.results.mark_clean("a", known=recorded).state == CLEAN
    assert sent == ["Transaction"], sent
    stale = cluster.results.create_dirty("b", SUCCEEDED, attempts=1)
    cluster.results.record_outputs("b", {"model": "file:///m"})  # the version moves on
    with requests_sent(cluster.zk) as sent:
        clean = cluster.results.mark_clean("b", known=stale)
    assert sent == ["Transaction", "GetData", "Transaction"], sent
    assert clean.state == CLEAN and clean.outputs == {"model": "file:///m"}
    assert cluster.results.cleanup_pending() == []
