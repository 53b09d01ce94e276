"""The suite's shared fleets (tests/fleets.py): a test leaves nothing another sees, and a test
that changes the fleet is caught, named, and the fleet replaced."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.cli import zkstore
from tests.fleets import Fleets, Shape, SharedCluster, SharedFleet
from tests.helpers import hands_client, http_status, session, wait_for
from zkstore.config import StoreConfig
from zkstore.errors import AccessDenied
from zkstore.records.job_states import SUCCEEDED

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _only_where_fleets_are_shared(request: pytest.FixtureRequest) -> None:
    """A test of what its ``shared_fleet`` or ``web`` marker gives it is skipped under
    ``--own-fleets``, which gives every test daemons of its own (the fleet it asserts is then
    not there: four tests failed so); the tests of fleets made here, and one that disturbs
    its fleet (its own in any case), run either way."""
    node = request.node
    marked = node.get_closest_marker("shared_fleet") or node.get_closest_marker("web")
    shared = marked is not None and node.get_closest_marker("disturbs") is None
    if shared and request.config.getoption("own_fleets"):
        pytest.skip("--own-fleets: this test is about the shared fleet its marker gives it")


@pytest.fixture
def own_fleets(runtime_config: StoreConfig, tmp_path: Path) -> Iterator[Fleets]:
    """Fleets of this test's own (the suite's, which other tests share, are not touched)."""
    made = Fleets(runtime_config, tmp_path / "fleets")
    yield made
    made.close()


@pytest.fixture
def fleet(own_fleets: Fleets) -> SharedFleet:
    return own_fleets.of(Shape())


def listed(config: StoreConfig) -> list[str]:
    done = zkstore(config, "jobs list", "--all", "--format", "json")
    assert done.returncode == 0, done.stderr
    return [job["job_id"] for job in json.loads(done.stdout)]


def test_the_next_test_sees_none_of_the_jobs_a_test_left(
    fleet: SharedFleet, tmp_path: Path
) -> None:
    local = fleet.begin()
    with hands_client(fleet.config) as client:
        done = client.submit_function(jobs.steps, str(tmp_path / "a"), 2, 0.01, job_id="same")
        assert client.wait(done, timeout=60).outcome == SUCCEEDED
        client.submit_function(jobs.sleeper, str(tmp_path / "b"), 120, job_id="left-running")
        wait_for(lambda: local.driver_pid("left-running") is not None, timeout=30, what="driver up")
    assert sorted(listed(fleet.config)) == ["left-running", "same"]
    assert fleet.reset() == []
    assert listed(fleet.config) == []
    # The next test may use the same ids, on the same daemon.
    again = fleet.begin()
    assert again.start_daemon("d1").pid == local.daemons["d1"].pid
    with hands_client(fleet.config) as client:
        done = client.submit_function(jobs.steps, str(tmp_path / "c"), 2, 0.01, job_id="same")
        result = client.wait(done, timeout=60)
    assert (result.outcome, result.attempts) == (SUCCEEDED, 1)
    assert fleet.reset() == []


def test_a_daemon_killed_is_named(fleet: SharedFleet) -> None:
    local = fleet.begin()
    local.daemons["d1"].signal(signal.SIGKILL)
    wait_for(lambda: not local.daemons["d1"].alive, timeout=10, what="d1 gone")
    changed = fleet.reset()
    assert any(line.startswith("daemons: ") and "False" in line for line in changed), changed


def test_a_pool_and_a_drain_left_are_named(fleet: SharedFleet) -> None:
    fleet.begin()
    assert zkstore(fleet.config, "pools set", "nightly", "--max-running", "1").returncode == 0
    assert zkstore(fleet.config, "daemons drain", "d1").returncode == 0
    changed = fleet.reset()
    assert any(line.startswith("pools: [] -> ['nightly']") for line in changed), changed
    assert any(line.startswith("drained: [] -> ['d1']") for line in changed), changed


def test_a_daemon_the_fleet_lacks_is_refused(fleet: SharedFleet) -> None:
    local = fleet.begin()
    with pytest.raises(AssertionError, match=r"mark the test @pytest\.mark\.disturbs"):
        local.start_daemon("d2")
    with pytest.raises(AssertionError, match="changes it"):
        local.start_daemon("d1", "--max-drivers", "1")
    assert fleet.reset() == []


def test_a_daemons_log_shows_the_test_its_own_part(fleet: SharedFleet, tmp_path: Path) -> None:
    with hands_client(fleet.config) as client:
        fleet.begin()
        first = client.submit_function(jobs.steps, str(tmp_path / "a"), 1, 0.01, job_id="first")
        assert client.wait(first, timeout=60).outcome == SUCCEEDED
        assert fleet.reset() == []
        local = fleet.begin()
        second = client.submit_function(jobs.steps, str(tmp_path / "b"), 1, 0.01, job_id="next")
        assert client.wait(second, timeout=60).outcome == SUCCEEDED
    wait_for(lambda: "job next" in local.daemons["d1"].log(), timeout=10, what="logged")
    assert "job first" not in local.daemons["d1"].log()
    assert fleet.reset() == []


@pytest.mark.shared_fleet
def test_a_marked_test_gets_the_fleet_of_its_process_running(
    local: LocalCluster, runtime_config: StoreConfig, client: Client, tmp_path: Path
) -> None:
    assert isinstance(local, SharedCluster)
    assert runtime_config.root.startswith("/fleet") and local.config.root == runtime_config.root
    assert local.daemons["d1"].alive and local.leader() is not None
    assert local.start_daemon("d1") is local.daemons["d1"]
    done = client.submit_function(jobs.steps, str(tmp_path / "o"), 1, 0.01, job_id="here")
    assert client.wait(done, timeout=60).outcome == SUCCEEDED


def test_a_shape_with_http_and_arguments_starts_its_daemons_so(own_fleets: Fleets) -> None:
    """A module whose daemons serve HTTP or take arguments (``--end-grace``) shares a fleet of
    that shape: each daemon answers ``/health`` before the first test, started with them."""
    fleet = own_fleets.of(Shape(http=True, args=("--end-grace", "7s")))
    local = fleet.begin()
    daemon = local.daemons["d1"]
    assert daemon.url is not None and http_status(daemon, "/health") == 200
    command = [str(word) for word in daemon.process.args]  # its title hides its arguments
    assert ["--end-grace", "7s"] in [command[i : i + 2] for i in range(len(command))], command
    assert own_fleets.of(Shape()) is not fleet, "another shape, another fleet"
    assert fleet.reset() == []


@pytest.mark.shared_fleet(http=True, args=["--end-grace", "7s"])
def test_a_marked_shape_with_arguments_is_the_fleet_of_its_process(local: LocalCluster) -> None:
    assert isinstance(local, SharedCluster)
    assert local.extra_args == ("--end-grace", "7s") and local.http
    assert local.start_daemon("d1") is local.daemons["d1"]
    assert http_status(local.daemons["d1"], "/health") == 200


def test_a_shape_with_credentials_closes_its_fleet_to_strangers(
    own_fleets: Fleets, tmp_path: Path
) -> None:
    fleet = own_fleets.of(Shape(credentials=True))
    assert fleet.config.zk_auth is not None and fleet.config.zk_read_acl
    fleet.begin()
    with hands_client(fleet.config) as client:
        done = client.submit_function(jobs.steps, str(tmp_path / "a"), 1, 0.01, job_id="closed")
        assert client.wait(done, timeout=60).outcome == SUCCEEDED
    with session(fleet.config, None) as stranger, pytest.raises(AccessDenied):
        stranger.get(fleet.layout.settings)
    assert fleet.reset() == []


@pytest.mark.shared_fleet(credentials=True)
def test_a_marked_shape_with_credentials_gives_them_to_the_test(
    local: LocalCluster, config: StoreConfig
) -> None:
    assert isinstance(local, SharedCluster)
    assert config.zk_auth is not None and local.config.zk_auth == config.zk_auth


@pytest.mark.shared_fleet(credentials=True)
@pytest.mark.disturbs
def test_a_test_that_disturbs_a_fleet_with_credentials_has_them_too(
    local: LocalCluster, config: StoreConfig
) -> None:
    assert not isinstance(local, SharedCluster)
    assert config.zk_auth is not None and local.config.zk_auth == config.zk_auth
    assert local.config.zk_read_acl == config.zk_read_acl


#: the API token of this module's ``web`` daemons (:func:`web_env`): a valid job id too
WEB_TOKEN = "shared-fleet-t0ken-" + "w" * 16
LEAKED = "d1: the value of ZKSTORE_API_TOKEN is in its log"


@pytest.fixture
def web_env() -> dict[str, str]:
    return {"ZKSTORE_API_TOKEN": WEB_TOKEN}


@pytest.mark.web("d1")
def test_a_web_test_runs_on_the_shared_fleet_of_its_daemons_and_tokens(
    web: LocalCluster, fleets: Fleets, runtime_config: StoreConfig
) -> None:
    """A test marked ``web("d1")`` (not ``disturbs``) gets its process's fleet of that shape:
    its daemons serving HTTP, with the module's ``web_env`` as their environment."""
    shape = Shape(("d1",), http=True, env=(("ZKSTORE_API_TOKEN", WEB_TOKEN),))
    assert isinstance(web, SharedCluster) and web is fleets.of(shape).local
    assert web.config.root == runtime_config.root and web.extra_env == dict(shape.env)
    daemon = web.daemons["d1"]
    assert daemon.url is not None and http_status(daemon, "/health") == 200
    assert web.start_daemon("d1") is daemon
    with pytest.raises(AssertionError, match="changes it"):
        web.start_daemon("d2")
    # the daemon has the token: a change with it finds no such job (without one: 403)
    cancel = urllib.request.Request(
        f"{daemon.url}/api/v1/jobs/no-such-job/cancel",
        method="POST",
        headers={"Authorization": f"Bearer {WEB_TOKEN}"},
    )
    with pytest.raises(urllib.error.HTTPError) as answered:
        urllib.request.urlopen(cancel, timeout=30)
    assert answered.value.code == 404


def test_a_secret_in_a_log_is_named_in_the_part_of_the_test_that_wrote_it_and_at_close(
    own_fleets: Fleets, tmp_path: Path
) -> None:
    """A value of the shape's environment in a daemon's log (here a job named as the token,
    which the daemon logs): the test that wrote it fails naming the daemon and the variable
    (never the value), the next one passes, and the whole log names it when the fleet closes."""
    shape = Shape(env=(("ZKSTORE_API_TOKEN", WEB_TOKEN),))
    fleet = own_fleets.of(shape)
    local = fleet.begin()
    assert fleet.leaks() == [] and fleet.leaks(whole=True) == []
    with hands_client(fleet.config) as client:
        job = client.submit_function(jobs.steps, str(tmp_path / "a"), 1, 0.01, job_id=WEB_TOKEN)
        assert client.wait(job, timeout=60).outcome == SUCCEEDED
    wait_for(lambda: WEB_TOKEN in local.daemons["d1"].log(), timeout=10, what="logged")
    assert own_fleets.after_test(shape) == [f"no token reaches a log: {LEAKED}"]
    assert own_fleets.of(shape) is fleet, "a secret shown is no change of the fleet"
    fleet.begin()
    assert own_fleets.after_test(shape) == [], "the next test's part does not show it"
    assert fleet.leaks(whole=True) == [LEAKED]
    with pytest.raises(AssertionError, match=f"a secret reached a shared fleet's log: {LEAKED}"):
        own_fleets.close()
    assert not local.daemons["d1"].alive, "closed all the same"
