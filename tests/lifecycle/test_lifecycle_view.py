"""What ``jobs show`` (and the HTTP API, which serves the same view) says of a job's
lifecycle: its limits and retry options, its notify URL redacted, a stop under way, the
attempt being ended, STOPPING/STOPPED, and when the next attempt is due."""

from __future__ import annotations

import json

import pytest

from recovery.cli.jobs.job_commands import _show_lines
from tests import builders
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.stops import EndRequest, StopRequest
from zkstore.records.job_records import JobStatus, RunningInfo
from zkstore.records.job_states import RESTARTING, STARTING, STOPPED, STOPPING, TIMED_OUT
from zkstore.records.strict import parse_time
from zkstore.service.job_view import describe

pytestmark = pytest.mark.unit

T = "2026-11-21T12:00:00.000Z"
URL = "https://hooks.example.com:8443/services/T000/SECRET-token?sig=SECRET"


def snapshot(**records: object) -> JobSnapshot:
    summary = {
        "name": "n",
        "max_attempts": 3,
        "timeout": 3600,
        "progress_timeout": 600,
        "retry_delay": 5,
        "retry_jitter": 0.1,
        "notify": URL,
    }
    return builders.snapshot(summary=summary, created=T, **records)


def test_the_limits_and_the_redacted_url_are_shown_never_the_secret() -> None:
    item = describe(
        snapshot(status=JobStatus(version=1, state=STARTING, attempt=1, updated=parse_time(T)))
    )
    assert item["lifecycle"] == {
        "timeout": 3600,
        "progress_timeout": 600,
        "retry_delay": 5,
        "retry_jitter": 0.1,
        "notify": "https://hooks.example.com:8443/...",
    }
    lines = _show_lines({**item, "checkpoints": [], "control": None})
    assert lines["limits"] == "--timeout 3600s, --progress-timeout 600s"
    assert lines["retry"] == "--retry-delay 5s, --retry-jitter 0.1"
    assert lines["notify"] == "https://hooks.example.com:8443/..."
    assert "SECRET" not in json.dumps(item) and "SECRET" not in json.dumps(lines)


def test_a_stop_under_way_and_the_attempt_being_ended() -> None:
    stop = StopRequest(
        version=0,
        requested=parse_time(T),
        by="ann@h",
        checkpoint=True,
        token="t",
        timeout_ms=300_000,
    )
    end = EndRequest(
        version=0,
        attempt=2,
        reason=STOPPED,
        requested=parse_time(T),
        grace_ms=30_000,
        detail="stopped",
    )
    running = RunningInfo(version=0, attempt=2, host="h", pid=7, started=parse_time(T))
    item = describe(
        snapshot(
            status=JobStatus(version=1, state=STARTING, attempt=2, updated=parse_time(T)),
            running=running,
            stop=stop,
            end=end,
        )
    )
    assert item["state"] == STOPPING
    lines = _show_lines({**item, "checkpoints": [], "control": None})
    assert lines["stop"] == (f"requested {T} by ann@h, after a checkpoint (waiting up to 300 s)")
    assert lines["ending"] == "attempt 2 STOPPED: stopped (SIGKILL after 30 s)"


def test_stopped_and_how_the_last_attempt_was_ended_and_when_the_next_is_due() -> None:
    stopped = describe(
        snapshot(status=JobStatus(version=1, state=STOPPED, attempt=2, updated=parse_time(T)))
    )
    assert stopped["state"] == STOPPED and stopped["driver"] is None
    waiting = describe(
        snapshot(
            status=JobStatus(
                version=1,
                state=RESTARTING,
                attempt=1,
                failures=1,
                updated=parse_time(T),
                not_before=parse_time("2026-11-21T12:00:05.000Z"),
                ended=TIMED_OUT,
            )
        )
    )
    assert waiting["next_attempt_at"] == "2026-11-21T12:00:05.000Z"
    assert waiting["lifecycle"]["last_ended"] == TIMED_OUT
    lines = _show_lines({**waiting, "checkpoints": [], "control": None})
    assert lines["last_ended"] == TIMED_OUT
    assert lines["next_attempt_at"] == "2026-11-21T12:00:05.000Z"


def test_the_status_page_shows_stopping_and_stopped_and_never_the_url() -> None:
    from recovery.observe.cluster_view import ClusterView
    from recovery.observe.page import render

    stop = StopRequest(version=0, requested=parse_time(T), by="ann@h", timeout_ms=0)
    stopping = snapshot(
        status=JobStatus(version=1, state=STARTING, attempt=1, updated=parse_time(T)),
        running=RunningInfo(version=0, attempt=1, host="h", pid=7, started=parse_time(T)),
        stop=stop,
    )
    stopped = JobSnapshot(
        job_id="k",
        handle=stopping.handle,
        status=JobStatus(version=1, state=STOPPED, attempt=2, updated=parse_time(T)),
        stop=stop,
    )
    view = ClusterView(leader=None, daemons=[], jobs={"j": stopping, "k": stopped})
    page = render(view, daemon_id="d1", leading=True, cluster_id="default")
    assert 'class="badge STOPPING "' in page and 'class="badge STOPPED "' in page
    assert "SECRET" not in page
