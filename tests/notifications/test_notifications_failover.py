"""``zkstore daemon --notify URL`` and ``submit --notify URL`` across leader kills: a real
local HTTP receiver counts what arrives while the leader is SIGKILLed twice. Every event a user
cares about (failed attempt, timed out, finished) is delivered at least once, each delivery
carries its event's key, and duplicates carry the same key. The receiver refuses each key's
first delivery, so that undelivered entries are left for the next leader.
"""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import script, show
from tests.helpers import SESSION_TIMEOUT, wait_for
from tests.servers import NotificationReceiver
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.history import LOST, PLACED, JobHistory
from zkstore.jobs.logs import JobLogs

pytestmark = pytest.mark.e2e

JOBS = """
import time


def flaky(ctx):
    if ctx.attempt == 1:
        raise RuntimeError("the first attempt fails")


def broken(ctx):
    raise RuntimeError("always fails")


def slow(ctx):
    time.sleep(600)
"""

JOBS_ENDING = {"flaky": ["SUCCEEDED"], "broken": ["FAILED"], "slow": ["TIMED_OUT", "FAILED"]}


def expected_events(config: StoreConfig) -> tuple[set[str], list[set[str]]] | None:
    """Every event the three jobs' histories call for, once all three ended (None before): the
    events that must be delivered, and the attempts whose end the history never told, each as
    its two possible events (exactly one of them must be delivered).

    Without losses: flaky:1:ATTEMPT_FAILED, flaky:2:SUCCEEDED, broken:1:ATTEMPT_FAILED,
    broken:2:FAILED, slow:1:TIMED_OUT, slow:1:FAILED. A leader SIGKILLed while it launched an
    attempt on its own host loses that attempt (issue 21: buried as "did not start"): then that
    attempt's event is ATTEMPT_LOST and the job's later ones come one attempt later. Which
    attempts were lost is read from the job's history, kept beside its logs. The history is
    for people and written after what it tells of (``recovery/leader/actions.py``): a leader
    SIGKILLed between an attempt's end and its history write leaves that attempt PLACED (or
    absent), and the test cannot tell from it whether it failed or was lost."""
    found: set[str] = set()
    either: list[set[str]] = []
    for job, finals in JOBS_ENDING.items():
        shown = show(config, job)
        result = shown["result"]
        if result is None:
            return None
        attempts = int(result["attempts"])
        found |= {f"{job}:{attempts}:{final}" for final in finals}
        with Cluster.open(config) as cluster:
            kept = JobLogs(cluster.storage, cluster.storage_layout, job).kept_history()
        if kept is None:
            return None  # its cleanup has not kept the history yet
        told = {e.attempt: e.outcome for e in JobHistory.from_znode(kept, None, job).entries()}
        for attempt in range(1, attempts):
            lost, failed = f"{job}:{attempt}:ATTEMPT_LOST", f"{job}:{attempt}:ATTEMPT_FAILED"
            outcome = told.get(attempt, PLACED)
            if outcome == PLACED:
                either.append({lost, failed})
            else:
                found.add(lost if outcome == LOST else failed)
    return found, either


def histories(config: StoreConfig) -> dict[str, list[tuple[int, str | None]]]:
    """Each job's kept history as (attempt, outcome) pairs, for a failure's message."""
    found = {}
    with Cluster.open(config) as cluster:
        for job in JOBS_ENDING:
            kept = JobLogs(cluster.storage, cluster.storage_layout, job).kept_history()
            entries = JobHistory.from_znode(kept, None, job).entries() if kept else []
            found[job] = [(entry.attempt, entry.outcome) for entry in entries]
    return found


def test_every_event_is_delivered_across_leader_kills(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    daemons = NotificationReceiver(lambda seen, key: seen == 0).start()
    own = NotificationReceiver().start()  # flaky's own --notify
    try:
        (laptop / "jobs.py").write_text(JOBS)
        local.extra_args = ("--notify", daemons.url(), "--end-grace", "1s")
        for daemon_id in ("d1", "d2"):
            local.start_daemon(daemon_id)
        first = local.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
        for job, options in (
            ("flaky", ["--max-attempts", "2", "--notify", own.url("/own/SECRET")]),
            ("broken", ["--max-attempts", "2"]),
            ("slow", ["--max-attempts", "1", "--timeout", "3s"]),
        ):
            done = script(
                runtime_config, "submit", f"jobs.py:{job}", "--job-id", job, *options, cwd=laptop
            )
            assert done.returncode == 0, done.stderr
        # The first leader is killed once events were recorded and refused once.
        wait_for(lambda: len(daemons.snapshot()[0]) >= 2, timeout=60, what="first events")
        first.signal(signal.SIGKILL)
        first.process.wait()
        second = local.wait_for_leader(exclude=first.daemon_id, timeout=SESSION_TIMEOUT * 10)
        local.start_daemon(first.daemon_id)
        # ...and the second, once more of them are in.
        wait_for(lambda: len(daemons.snapshot()[1]) >= 3, timeout=60, what="more deliveries")
        second.signal(signal.SIGKILL)
        second.process.wait()
        local.wait_for_leader(exclude=second.daemon_id, timeout=SESSION_TIMEOUT * 10)
        local.start_daemon(second.daemon_id)
        required, either = wait_for(
            lambda: expected_events(runtime_config), timeout=120, what="every job's end"
        )
        missing: set[str] = set()

        def every_event_in() -> bool:
            delivered = set(daemons.snapshot()[1])
            missing.clear()
            missing.update(required - delivered)
            missing.update(" or ".join(sorted(pair)) for pair in either if not pair & delivered)
            return not missing

        try:
            wait_for(every_event_in, timeout=120, what="every event")
        except AssertionError as exc:  # say which, and what the histories called for
            raise AssertionError(
                f"{exc}: {sorted(missing)} of {sorted(required)} and {either} never delivered; "
                f"the jobs' histories: {histories(runtime_config)}"
            ) from None
        delivered_now = set(daemons.snapshot()[1])
        assert all(len(pair & delivered_now) == 1 for pair in either), (either, delivered_now)
        expected = required | {key for pair in either for key in pair & delivered_now}
        flaky = {key for key in expected if key.startswith("flaky:")}
        wait_for(
            lambda: flaky <= set(own.snapshot()[1]),
            timeout=60,
            what="the job's own URL's events",
        )
    finally:
        daemons.stop()
        own.stop()
    requests, delivered = daemons.snapshot()
    tries = Counter(key for key, _ in requests)
    print(f"\nnotifications: {len(requests)} POSTs, {sum(delivered.values())} answered 2xx")
    for key in sorted(tries):
        print(f"  {key}: {tries[key]} POST(s), {delivered[key]} delivered")
    assert set(delivered) == expected, set(delivered) ^ expected
    # Every delivery carries its event's key, in the header and the body alike.
    assert all(body["key"] == key for key, body in requests)
    assert all(body["job_id"] == key.split(":")[0] for key, body in requests)
    # No URL's secret path in any daemon's log.
    for daemon in local.daemons.values():
        assert "SECRET" not in daemon.log()
