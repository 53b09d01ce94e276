"""Garbage planted in every node kind of the layout, while a real daemon runs: the daemon, the
command line and the HTTP API all survive it (no traceback, no exit code outside 0-8, no 500,
no daemon down).

One cluster per half of the kinds (:data:`PARTS`), deterministic: a daemon with one driver
slot, held by a live job (so that the other victims stay PENDING, each the target of one
kind), and for each node kind in turn three
kinds of garbage (nesting deeper than any stack, the writer's record with every value a token
no JSON writer makes, the writer's record with values of the wrong type and range), each
followed by the readers that meet that node. The table of kinds is :mod:`tests.node_kinds`'s.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from recovery.dev.localcluster import DaemonProcess, LocalCluster
from tests import jobs
from tests.cli import answers
from tests.helpers import hands_client, plant, wait_for
from tests.node_kinds import PARSED
from zkstore.config import StoreConfig
from zkstore.layout import Layout
from zkstore.records.job_states import SUCCEEDED
from zkstore.records.strict import is_time

pytestmark = pytest.mark.e2e

#: Deeper than any stack, and under ZooKeeper's own limit of 1 MB per node.
DEEP = b"[" * 60000

#: (kind, the job it is planted on, the CLI commands that read it) for the kinds of one job.
#: ``live`` is a running job (its driver's records exist); the others are PENDING.
JOB_KINDS: list[tuple[str, str, list[tuple[str, ...]]]] = [
    ("spark", "live", [("jobs", "show", "{job}")]),
    ("resources", "live", [("jobs", "show", "{job}")]),
    ("control-ack", "live", [("control", "get", "{job}"), ("jobs", "show", "{job}")]),
    ("control-keys", "live", [("control", "get", "{job}")]),
    ("control", "live", [("control", "get", "{job}"), ("control", "history", "{job}")]),
    ("artifacts", "live", [("jobs", "show", "{job}"), ("handles", "lingering", "--min-age", "0s")]),
    ("checkpoints", "live", [("checkpoints", "list", "{job}"), ("handles", "verify")]),
    ("outputs", "live", [("outputs", "list", "{job}"), ("outputs", "show", "{job}", "planted")]),
    ("output commits", "live", [("outputs", "paths", "{job}", "planted")]),
    ("outcome", "v-outcome", [("jobs", "show", "{job}")]),
    ("cancel", "v-cancel", [("jobs", "show", "{job}")]),
    ("status", "v-status", [("jobs", "show", "{job}")]),
    ("currentJobs handle", "v-handle", [("handles", "list"), ("handles", "verify")]),
    ("results", "v-result", [("jobs", "show", "{job}"), ("jobs", "forget", "{job}", "--dry-run")]),
    ("quarantine", "v-quarantine", [("quarantine", "list"), ("quarantine", "show", "{job}")]),
    # the driver's own running node, last: its writes are fenced on that node's version
    ("running", "live", [("jobs", "show", "{job}"), ("jobs", "logs", "{job}", "--tail", "5")]),
]

#: Nodes whose data nobody reads, planted on a PENDING job or the cluster: (what, path of
#: the layout, CLI commands).
PRESENCE_KINDS: list[tuple[str, Callable[[Layout], str], list[tuple[str, ...]]]] = [
    ("locks", lambda layout: f"{layout.job_handle('v-locks')}/locks", [("handles", "list")]),
    (
        "a lock",
        lambda layout: f"{layout.job_handle('v-locks')}/locks/planted",
        [("handles", "verify"), ("handles", "lingering", "--min-age", "0s")],
    ),
    ("cleanup", lambda layout: layout.cleanup_entry("v-cleanup"), [("jobs", "show", "v-cleanup")]),
    ("election", lambda layout: f"{layout.election}/planted", [("daemons", "list")]),
    # the leader's clock: only the stamps of its own writes are read (zkstore/zookeeper/clock.py)
    ("leader clock", lambda layout: layout.leader_clock, [("schedules", "list")]),
]

#: The kinds of the cluster: (kind, its path, CLI commands).
SCHEDULE_READERS = [
    ("schedules", "list", "--format", "json"),
    ("schedules", "show", "planted"),
    ("schedules", "pause", "planted"),
]
CLUSTER_KINDS: list[tuple[str, Callable[[Layout], str], list[tuple[str, ...]]]] = [
    (
        "leader/info",
        lambda layout: layout.leader_info,
        [("jobs", "wait", "v-outcome", "--wait-timeout", "0.2s")],
    ),
    ("members", lambda layout: layout.member("planted"), []),
    ("members", lambda layout: layout.member("d1"), []),
    ("drained", lambda layout: layout.drain_mark("planted"), []),
    ("fleet", lambda layout: layout.fleet, [("fleet", "status")]),
    ("settings", lambda layout: layout.settings, [("cluster", "settings"), ("fleet", "status")]),
    (
        "conditions",
        lambda layout: layout.conditions_of("jobs", "v-outcome"),
        [("jobs", "show", "v-outcome")],
    ),
    ("assignments", lambda layout: layout.assignment("d1", "v-assigned"), []),
    # the leader fires schedules: a garbage spec or state is that schedule's problem only
    ("schedules", lambda layout: f"{layout.schedules}/planted", SCHEDULE_READERS),
    ("schedule state", lambda layout: f"{layout.schedules}/planted/state", SCHEDULE_READERS),
]

#: What every plant is followed by, whatever the kind.
ALWAYS: list[tuple[str, ...]] = [("jobs", "list", "--all", "--format", "json"), ("daemons", "list")]


def tokens(valid: bytes) -> bytes:
    """The writer's record with every value a token no JSON writer makes from a valid value."""
    record = json.loads(valid) if valid.startswith(b"{") else {"a": 1}
    tokens = [b"NaN", b"-Infinity", b"1e400", b"1" * 40, b'"\\ud800"']
    parts = [
        f"{json.dumps(key)}:".encode() + tokens[i % len(tokens)] for i, key in enumerate(record)
    ]
    return b"{" + b",".join(parts) + b"}"


def wrong(valid: bytes) -> bytes:
    """The writer's record with values of the wrong type and range: numbers past 32 bits, times
    that overflow, texts with control characters, objects where scalars go."""
    record: dict[str, Any] = json.loads(valid) if valid.startswith(b"{") else {"a": 1}

    def worse(value: Any) -> Any:
        if isinstance(value, bool):
            return "yes"
        if isinstance(value, int):
            return 2**40
        if isinstance(value, str) and is_time(value):
            return "9999-12-31T23:59:59-23:59"
        if isinstance(value, str):
            return "\x1b[2J\x00" + value
        if isinstance(value, dict):
            return {"\x00": [[{"x": None}]], **{k: [v] for k, v in value.items()}}
        return {"x": [value]}

    return json.dumps({key: worse(value) for key, value in record.items()}).encode()


def variants(valid: bytes) -> list[bytes]:
    return [DEEP, tokens(valid), wrong(valid)]


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def every_route_answers(daemon: DaemonProcess, job: str) -> None:
    """The HTTP API and the page: never a 500, JSON where JSON is promised."""
    assert daemon.url is not None
    for route in (
        "/health",
        "/leader",
        "/metrics",
        "/",
        "/api/v1/cluster",
        "/api/v1/jobs?all=true",
        f"/api/v1/jobs/{job}",
        f"/api/v1/jobs/{job}/control",
        f"/api/v1/jobs/{job}/control/history",
        f"/api/v1/jobs/{job}/logs?tail=5",
        "/api/v1/schedules",
        "/api/v1/schedules/planted",
    ):
        status, body = get(daemon.url + route)
        assert status < 500 or (route, status) in {("/leader", 503), ("/health", 503)}, (
            route,
            status,
            body[:500],
        )
        if route.startswith("/api/v1/") and not route.endswith("logs?tail=5"):
            json.loads(body)  # strict JSON: NaN or a lone surrogate would not parse in a browser


#: The test's two halves (a daemon each, each under half a minute): the kinds of one job, then
#: the nodes nobody reads and the kinds of the cluster.
PARTS = ("job kinds", "cluster kinds")


def plan(layout: Layout, part: str) -> list[tuple[str, str, bytes, str, list[tuple[str, ...]]]]:
    """Every plant of ``part``, in order: (what, its path, the bytes its writer writes, the job
    whose commands read it, the commands)."""
    if part == PARTS[1]:
        return _cluster_plan(layout)
    plants = []
    for kind, job, commands in JOB_KINDS:
        method, _, valid = PARSED[kind]
        if kind == "artifacts":
            path = layout.artifact(job, "planted")
        elif kind == "checkpoints":
            path = f"{layout.checkpoints(job)}/{'1'.zfill(19)}"
        elif kind == "outputs":
            path = layout.output(job, "planted")
        elif kind == "output commits":
            path = f"{layout.output(job, 'planted')}/{'1'.zfill(19)}"
        else:
            path = getattr(layout, method)(job)
        plants.append((kind, path, valid, job, commands))
    return plants


def _cluster_plan(layout: Layout) -> list[tuple[str, str, bytes, str, list[tuple[str, ...]]]]:
    plants = []
    for what, where, commands in PRESENCE_KINDS:
        plants.append((what, where(layout), b"{}", "v-locks", commands))
    for kind, where, commands in CLUSTER_KINDS:
        plants.append((kind, where(layout), PARSED[kind][2], "v-outcome", commands))
    return plants


def test_every_node_kind_is_planted_once_by_one_part() -> None:
    planned = [what for part in PARTS for what, *_ in plan(Layout("/x"), part)]
    assert len(planned) == len(JOB_KINDS) + len(PRESENCE_KINDS) + len(CLUSTER_KINDS)
    assert len(set(planned)) == len(planned) - 1  # "members": a stranger's and d1's own


@pytest.mark.parametrize("part", PARTS)
def test_garbage_in_every_node_kind_is_survived_by_the_daemon_cli_and_http(
    runtime_config: StoreConfig, tmp_path: Path, part: str
) -> None:
    local = LocalCluster(
        runtime_config, tmp_path / "rt", restart_backoff=0.2, http=True, verbose=False
    )
    try:
        with hands_client(runtime_config) as client:
            daemon = local.start_daemon("d1", "--max-drivers", "1")
            local.wait_for_leader(timeout=60)
            client.submit_function(jobs.tunable, str(tmp_path / "live"), job_id="live")
            wait_for((tmp_path / "live" / "declared").exists, timeout=60, what="live job")
            victims = {job for _, job, _ in JOB_KINDS} | {"v-locks", "v-cleanup", "v-assigned"}
            for job in sorted(victims - {"live"}):
                client.submit_function(jobs.steps, str(tmp_path / job), 1, 0.01, job_id=job)
            zk, layout = client.cluster.zk, client.cluster.layout
            planted: list[str] = []

            def readers(commands: list[tuple[str, ...]], job: str, what: str) -> None:
                for words in [*commands, *ALWAYS]:
                    answers(runtime_config, *(word.format(job=job) for word in words))
                every_route_answers(daemon, job)
                assert daemon.alive, f"the daemon died after {what}"
                planted.append(what)

            for what, path, valid, job, commands in plan(layout, part):
                before = zk.get_if_exists(path)
                for number, data in enumerate(variants(valid)):
                    plant(zk, path, data)
                    readers(commands, job, f"{what} #{number}")
                if path == layout.member("d1") and before is not None:
                    # A daemon does not heal its own member record: garbled, it takes no more
                    # attempts (it would until its next session). Put it back for what follows.
                    plant(zk, path, before[0])

            # Still a working daemon: the live job is cancelled, and a new job, queued behind
            # every victim, gets the slot and runs to its end.
            answers(runtime_config, "jobs", "cancel", "live")
            client.submit_function(jobs.steps, str(tmp_path / "healthy"), 1, 0.01, job_id="ok")
            assert client.wait("ok", timeout=180).outcome == SUCCEEDED
            status, _ = get(f"{daemon.url}/health")
            assert status == 200 and daemon.alive
    finally:
        local.stop()
    log = daemon.log()
    for driver_log in sorted((tmp_path / "rt" / "drivers").rglob("*.log")):
        text = driver_log.read_text()
        assert "Traceback" not in text, (driver_log, text[-4000:])
    assert "Traceback" not in log, log[-6000:]
    assert len(planted) == 3 * len(plan(Layout("/x"), part))
