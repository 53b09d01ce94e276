"""What the command line accepts, the cluster does (issue 53, invariant 17), through the
installed ``zkstore`` script against real daemons:

- the leader publishes its settings (``zkstore cluster settings``), and every command that
  makes a job or a schedule checks against them, never against its own environment: a client
  that lowers ``ZKSTORE_SCHEDULE_MIN_INTERVAL`` or allows a host by ``ZKSTORE_NOTIFY_ALLOWED_HOSTS``
  is refused what the leader would not do, in the leader's words, naming its flag; a daemon
  started with lower bounds makes them work for a client that sets nothing;
- what the leader does not do for a job or a schedule (a notification it drops, windows it
  will not fire) is a condition on it, in ``jobs show`` / ``schedules show`` (text and JSON),
  cleared once it no longer holds; ``fleet status`` names a daemon whose settings differ;
- a script that only defines its entry point is refused before anything is written.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import script, zkstore
from tests.helpers import wait_for
from tests.servers import NotificationReceiver
from zkstore.cluster import Cluster
from zkstore.cluster.cluster_settings import ClusterSettings, read_settings
from zkstore.config import StoreConfig
from zkstore.layout import Layout
from zkstore.lifecycle.destinations import ALLOWED_ENV
from zkstore.schedules.schedule_limits import MIN_INTERVAL_ENV

pytestmark = pytest.mark.e2e

#: the daemons' environment: the production bounds (the suite lowers them for every process)
PRODUCTION = {MIN_INTERVAL_ENV: "", ALLOWED_ENV: ""}
#: a daemon whose bounds are lowered by its flags
LOWERED = ("--schedule-min-interval", "1s", "--notify-allowed-hosts", "127.0.0.1")
JOB = "def run(ctx):\n    pass\n"
#: how long a daemon may take to start, lead and act on a machine shared by the whole suite
#: (a daemon's start is bounded by no timeout under test)
BOUND = 120.0


def client_env(**variables: str) -> dict[str, str]:
    """A client's environment without the suite's lowered bounds, plus ``variables``."""
    env = {k: v for k, v in os.environ.items() if k not in (MIN_INTERVAL_ENV, ALLOWED_ENV)}
    return {**env, **variables}


@pytest.fixture
def fleet(local: LocalCluster, laptop: Path) -> Iterator[LocalCluster]:
    """Daemons with the production bounds unless their flags say otherwise; the user's job."""
    local.extra_env = dict(PRODUCTION)
    local.http = True  # each daemon serves the API on a free loopback port
    (laptop / "job.py").write_text(JOB)
    yield local


def published(local: LocalCluster, leader: str, timeout: float = BOUND) -> ClusterSettings:
    """The settings record once ``leader`` has written it."""
    layout = Layout(local.config.base_path)

    def written() -> ClusterSettings | None:
        found = read_settings(local.zk, layout)
        return found if found is not None and found.leader_id == leader else None

    return wait_for(written, timeout=timeout, what=f"{leader}'s settings published")


def api(url: str) -> Any:
    """``GET url``'s JSON (a daemon's HTTP API, no token: reads are open without one)."""
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_the_leaders_bounds_refuse_what_a_clients_environment_would_allow(
    fleet: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    fleet.start_daemon("d1")
    published(fleet, "d1")
    layout = Layout(runtime_config.base_path)

    fast = script(
        runtime_config,
        "schedules create",
        "fast",
        "job.py:run",
        "--every",
        "2s",
        cwd=laptop,
        env=client_env(**{MIN_INTERVAL_ENV: "1s"}),
    )
    assert fast.returncode == 2, (fast.stdout, fast.stderr)
    line = one_line(fast.stderr)
    assert "its windows are 2 s apart, under the cluster's minimum of 10 s" in line
    assert "the leader d1's --schedule-min-interval" in line and "cluster settings" in line
    assert fleet.zk.children(layout.schedules) == []

    hooked = script(
        runtime_config,
        "submit",
        "job.py:run",
        "--job-id",
        "hooked",
        "--notify",
        "http://127.0.0.1:18790/hook",
        cwd=laptop,
        env=client_env(**{ALLOWED_ENV: "127.0.0.1"}),
    )
    assert hooked.returncode == 2, (hooked.stdout, hooked.stderr)
    line = one_line(hooked.stderr)
    assert "127.0.0.1 is a loopback address" in line and "--notify-allowed-hosts" in line
    assert "allowed hosts (none" in line
    assert fleet.zk.exists(layout.job_handle("hooked")) is None

    shown = script(runtime_config, "cluster settings", "--format", "json", env=client_env())
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["settings"]["schedule_min_interval"] == 10
    assert data["settings"]["notify_allowed_hosts"] == []
    assert data["leader_id"] == "d1" and data["daemons_differing"] == []
    served = api(f"{fleet.daemons['d1'].url}/api/v1/cluster/settings")
    assert served == data

    needy = script(
        runtime_config,
        "submit",
        "job.py:run",
        "--job-id",
        "needy",
        "--require",
        "gpu=a100",
        cwd=laptop,
        env=client_env(),
    )
    assert needy.returncode == 0, needy.stderr
    unplaced = wait_for(
        lambda: condition(shown_json(runtime_config, "jobs show", "needy"), "Unplaceable"),
        timeout=BOUND,
        what="the job no daemon can run said so",
    )
    assert "no daemon with gpu=a100 is up" in unplaced["message"], unplaced
    table = script(runtime_config, "cluster settings", env=client_env())
    assert table.returncode == 0, table.stderr
    assert "schedule_min_interval" in table.stdout and "--schedule-min-interval" in table.stdout
    assert "published by leader d1" in table.stdout


def test_a_daemons_lower_bounds_work_for_a_client_that_sets_nothing(
    fleet: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    receiver = NotificationReceiver().start()
    try:
        fleet.start_daemon("d1", *LOWERED)
        settings = published(fleet, "d1")
        assert (settings.schedule_min_interval, settings.notify_allowed_hosts) == (
            1,
            ("127.0.0.1",),
        )
        layout = Layout(runtime_config.base_path)
        made = script(
            runtime_config,
            "schedules create",
            "fast",
            "job.py:run",
            "--every",
            "2s",
            cwd=laptop,
            env=client_env(),
        )
        assert made.returncode == 0, made.stderr
        hooked = script(
            runtime_config,
            "submit",
            "job.py:run",
            "--job-id",
            "hooked",
            "--notify",
            receiver.url("/hook"),
            "--wait",
            cwd=laptop,
            env=client_env(),
        )
        assert hooked.returncode == 0, hooked.stderr
        posted = wait_for(
            lambda: [body for _, body in receiver.snapshot()[0] if body.get("job_id") == "hooked"],
            timeout=BOUND,
            what="the job's notification received",
        )
        assert posted[0]["state"] == "SUCCEEDED", posted

        def runs() -> list[str]:
            names = fleet.zk.children(layout.current_jobs) + fleet.zk.children(layout.results)
            return [name for name in names if name.startswith("fast-")]

        wait_for(runs, timeout=BOUND, what="a window of the 2-s schedule fired")
    finally:
        receiver.stop()


def condition(data: dict[str, Any], kind: str) -> dict[str, str] | None:
    return next((c for c in data.get("conditions") or [] if c["type"] == kind), None)


def shown_json(config: StoreConfig, command: str, name: str) -> dict[str, Any]:
    """``<command> NAME --format json`` in this process (what a wait asks again and again; the
    text a user reads comes from the installed script)."""
    done = zkstore(config, command, name, "--format", "json", env=client_env())
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_what_the_leader_does_not_do_is_a_condition_on_the_object(
    fleet: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    """d1 leads with lowered bounds; a 2-s schedule and a job notifying a receiver that fails
    are accepted. d2 (production bounds) takes over: it will not fire the schedule and drops
    the notification, and says so on each; d1 back in the lead fires it again, which clears
    the schedule's condition."""
    receiver = NotificationReceiver(fail=lambda n, key: True).start()
    try:
        fleet.start_daemon("d1", *LOWERED)
        published(fleet, "d1")
        fleet.start_daemon("d2")
        layout = Layout(runtime_config.base_path)
        wait_for(  # a daemon's start is bounded by nothing under test: the suite's job bound
            lambda: fleet.zk.exists(layout.member("d2")),
            timeout=BOUND,
            what="d2 registered",
        )
        status = script(runtime_config, "fleet status", env=client_env())
        assert status.returncode == 0, status.stderr
        assert "settings differ from the leader's on d2" in status.stdout, status.stdout
        found = script(runtime_config, "fleet status", "--format", "json", env=client_env())
        assert json.loads(found.stdout)["settings_differ"] == ["d2"], found.stdout
        made = script(
            runtime_config,
            "schedules create",
            "fast",
            "job.py:run",
            "--every",
            "2s",
            cwd=laptop,
            env=client_env(),
        )
        assert made.returncode == 0, made.stderr
        hooked = script(
            runtime_config,
            "submit",
            "job.py:run",
            "--job-id",
            "hooked",
            "--notify",
            receiver.url("/hook"),
            "--wait",
            cwd=laptop,
            env=client_env(),
        )
        assert hooked.returncode == 0, hooked.stderr
        wait_for(lambda: receiver.snapshot()[0], timeout=BOUND, what="a try of the notification")

        fleet.daemons["d1"].signal(signal.SIGTERM)
        fleet.wait_for_leader(exclude="d1", timeout=BOUND)
        published(fleet, "d2")

        dropped = wait_for(
            lambda: condition(
                shown_json(runtime_config, "jobs show", "hooked"), "NotificationDropped"
            ),
            timeout=BOUND,
            what="the dropped notification said on the job",
        )
        assert dropped["reason"] == "RefusedDestination", dropped
        assert "loopback address" in dropped["message"], dropped
        assert "--notify-allowed-hosts" in dropped["message"], dropped
        text = script(runtime_config, "jobs show", "hooked", env=client_env())
        assert "NotificationDropped (RefusedDestination)" in text.stdout, text.stdout
        served = api(f"{fleet.daemons['d2'].url}/api/v1/jobs/hooked")
        assert condition(served, "NotificationDropped") == dropped
        with urllib.request.urlopen(f"{fleet.daemons['d2'].url}/jobs/hooked", timeout=30) as page:
            html = page.read().decode()
        assert "<b>NotificationDropped</b> (RefusedDestination)" in html, html[-3000:]
        with urllib.request.urlopen(f"{fleet.daemons['d2'].url}/metrics", timeout=30) as answer:
            metrics = answer.read().decode()
        assert (
            'zkstore_conditions_raised_total{daemon="d2",type="NotificationDropped"} 1.0' in metrics
        ), metrics[-3000:]

        stuck = wait_for(
            lambda: condition(shown_json(runtime_config, "schedules show", "fast"), "CannotFire"),
            timeout=BOUND,
            what="the schedule's condition",
        )
        assert stuck["reason"] == "UnderMinimumInterval", stuck
        assert "under the cluster's minimum of 10 s" in stuck["message"], stuck
        first = script(runtime_config, "schedules show", "fast", env=client_env())
        assert first.stdout.splitlines()[0].startswith("fast: CANNOT FIRE"), first.stdout

        fleet.daemons["d1"].process.wait(timeout=BOUND)
        fleet.start_daemon("d1", *LOWERED)
        fleet.daemons["d2"].signal(signal.SIGTERM)
        fleet.wait_for_leader(exclude="d2", timeout=BOUND)
        wait_for(
            lambda: (
                condition(shown_json(runtime_config, "schedules show", "fast"), "CannotFire")
                is None
            ),
            timeout=BOUND,
            what="the schedule's condition cleared once it fires again",
        )
    finally:
        receiver.stop()


ORDERS = '''"""Orders of the day."""
import json

TABLE = "orders"


def count(rows):
    return len(rows)


def run(ctx, day="today"):
    ctx.spark.range(3).count()
'''


def test_a_file_that_only_defines_its_entry_point_is_refused_naming_it(
    config: StoreConfig, cluster: Cluster, laptop: Path
) -> None:
    jobs = laptop / "jobs"
    jobs.mkdir()
    (jobs / "orders.py").write_text(ORDERS)
    layout = Layout(config.base_path)
    for words in (
        ("submit", "jobs/orders.py", "--job-id", "x", "--wait"),
        ("schedules create", "nightly", "jobs/orders.py", "--every", "1h"),
    ):
        done = script(config, words[0], *words[1:], cwd=laptop)
        assert done.returncode == 2, (words, done.stdout, done.stderr)
        line = one_line(done.stderr)
        assert "jobs/orders.py:run" in line and "runs nothing at its top level" in line, line
    assert cluster.zk.exists(layout.job_handle("x")) is None
    assert cluster.zk.children(layout.schedules) == []

    (jobs / "script.py").write_text(ORDERS + "\nif __name__ == '__main__':\n    print(count([]))\n")
    ran = script(config, "submit", "jobs/script.py", "--job-id", "y", cwd=laptop)
    assert ran.returncode == 0, ran.stderr
