"""The status page in a real browser: headless Chromium renders it from a live cluster.

Not part of ``make test`` (it needs Debian's ``chromium``): run ``make browser-test``. With
``ZKSTORE_SCREENSHOT=docs/status-page.png`` it also keeps the screenshot for the README.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from recovery.observe.page import FINISHED_HEADERS, JOB_HEADERS
from tests import jobs
from tests.helpers import hands_client, step_runs, wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.records.job_states import FAILED, QUARANTINED, RUNNING, SUCCEEDED

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium: make browser-test installs it"),
]


class Rows(HTMLParser):
    """The text of every table row of a page, cell by cell, under the title of its section."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.sections: list[str] = []
        self._cell: list[str] | None = None
        self._title: list[str] | None = None

    def table(self, title: str) -> dict[str, list[str]]:
        """The rows of the section whose title starts with ``title``, by their first cell."""
        return {r[1]: r[1:] for r in self.rows if r[0].startswith(title) and len(r) > 1}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "h2":
            self._title = []
        elif tag == "tr":
            self.rows.append([self.sections[-1] if self.sections else ""])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2" and self._title is not None:
            self.sections.append("".join(self._title))
            self._title = None
        elif tag == "td" and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        for part in (self._cell, self._title):
            if part is not None:
                part.append(data)


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    flags = [
        "--headless",
        "--no-sandbox",  # as root in a container
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-extensions",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ]
    return subprocess.run(
        [CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=True
    )


def a_busy_cluster(local: LocalCluster, config: StoreConfig, tmp_path: Path) -> None:
    """Two daemons; jobs that succeeded, failed, run (with checkpoints) and one in quarantine."""
    with hands_client(config) as client:
        odd = client.submit_function(jobs.sleeper, str(tmp_path / "odd"), 1.0, job_id="odd-one")
        with Cluster.open(config) as cluster:
            cluster.storage.discard(cluster.jobs.handles.get_handle(odd).uri)  # unloadable
        local.start_daemon("daemon-a")
        local.wait_for_leader()
        local.start_daemon("daemon-b")
        done = client.submit_function(jobs.steps, str(tmp_path / "d"), 3, 0.0, job_id="nightly-etl")
        bad = client.submit_function(
            jobs.flaky, str(tmp_path / "f"), 9, job_id="flaky-report", max_attempts=2
        )
        live = tmp_path / "live"
        client.submit_function(jobs.steps, str(live), 500, 0.5, job_id="sales-rollup")
        assert client.wait(done, timeout=90).outcome == SUCCEEDED
        assert client.wait(bad, timeout=90).outcome == FAILED
        wait_for(lambda: len(step_runs(live)) >= 3, timeout=90, what="checkpoints")
        wait_for(lambda: client.status(odd).state == QUARANTINED, timeout=90, what="quarantine")
        for job in (done, bad):
            wait_for(lambda j=job: client.status(j).result.state == "CLEAN", timeout=60)  # type: ignore[union-attr]


def test_status_page_in_a_real_browser(runtime_config: StoreConfig, tmp_path: Path) -> None:
    local = LocalCluster(runtime_config, tmp_path / "rt", restart_backoff=0.2, http=True)
    try:
        a_busy_cluster(local, runtime_config, tmp_path)
        url = local.daemons["daemon-b"].url
        assert url is not None
        dom = chromium(tmp_path, "--dump-dom", url + "/").stdout
        page = Rows()
        page.feed(dom)
        live = {
            job: dict(zip(JOB_HEADERS, row, strict=True)) for job, row in page.table("Jobs").items()
        }
        done = {
            job: dict(zip(FINISHED_HEADERS, row, strict=True))
            for job, row in page.table("Finished").items()
        }
        assert live["sales-rollup"]["state"] == RUNNING
        assert live["sales-rollup"]["daemon"] in ("daemon-a", "daemon-b")
        assert live["sales-rollup"]["driver"].startswith(os.uname().nodename)
        assert live["sales-rollup"]["checkpoint"] not in ("", "-"), "its last checkpoint's age"
        assert done["nightly-etl"]["outcome"] == SUCCEEDED
        assert done["nightly-etl"]["attempts"].startswith("1")
        assert done["nightly-etl"]["daemon"] in ("daemon-a", "daemon-b")
        assert done["flaky-report"]["outcome"] == FAILED
        assert "attempt 2 fails on purpose" in done["flaky-report"]["error or reason"]
        assert "latest #1 #2" in done["flaky-report"]["logs"]
        assert live["odd-one"]["state"] == QUARANTINED
        assert "definition" in page.table("Quarantine")["odd-one"][1]
        daemons = {job: row[3] for job, row in page.table("Leader").items()}
        assert daemons == {"daemon-a": "leader", "daemon-b": "member"}
        shot = Path(os.environ.get("ZKSTORE_SCREENSHOT") or tmp_path / "page.png").absolute()
        chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,900", url + "/")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
        assert '<a href="/jobs/sales-rollup">' in dom, "job ids link to their pages"
        job_pages(local, runtime_config, tmp_path, url, shot.parent / "job-page.png")
    finally:
        local.stop()


class Bars(HTMLParser):
    """The timeline's attempt bars of a job page: (attempt, how it ended), left to right."""

    def __init__(self) -> None:
        super().__init__()
        self.bars: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        classes = (found.get("class") or "").split()
        if tag == "rect" and classes[:1] == ["attempt"]:
            self.bars.append((found.get("data-attempt") or "", " ".join(classes[1:])))


def job_pages(
    local: LocalCluster, config: StoreConfig, tmp_path: Path, url: str, shot: Path
) -> None:
    """The job page of a job whose first attempt was lost (its driver SIGKILLed) while its
    second runs, and of a finished job that failed twice: one bar per attempt, coloured by how
    it ended; the picture of the first kept in docs/."""
    pid = local.driver_pid("sales-rollup")
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    with hands_client(config) as client:
        wait_for(
            lambda: (
                client.status("sales-rollup").attempt == 2
                and client.status("sales-rollup").state == RUNNING
            ),
            timeout=90,
            what="attempt 2 running",
        )
    page = url + "/jobs/sales-rollup"
    # Attempt 2's first lines reach storage within a shipping interval or two.

    def with_second_log() -> str:
        dom = chromium(tmp_path, "--dump-dom", page).stdout
        return dom if "?attempt=2" in dom else ""

    dom = wait_for(with_second_log, timeout=30, what="attempt 2's log linked from the job page")
    bars = Bars()
    bars.feed(dom)
    assert bars.bars == [("1", "lost"), ("2", "running")], bars.bars
    assert "steps" in dom and "Latest log" in dom and "?attempt=1" in dom
    dom = chromium(tmp_path, "--dump-dom", url + "/jobs/flaky-report").stdout
    bars = Bars()
    bars.feed(dom)
    assert bars.bars == [("1", "failed"), ("2", "failed")], bars.bars
    assert "attempt 2 fails on purpose" in dom
    missing = chromium(tmp_path, "--dump-dom", url + "/jobs/no-such-job").stdout
    assert "No such job" in missing
    chromium(
        tmp_path, f"--screenshot={shot}", "--window-size=1400,1000", url + "/jobs/sales-rollup"
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
