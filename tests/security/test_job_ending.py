"""Ending a job is the daemon's and the leader's job, whatever its code does (issue 54 item 4).

As a user meets it: the installed ``zkstore`` script, a daemon as a process, drivers holding
their job's own ZooKeeper identity (the cluster has credentials), and job code that attacks
the way it ends: one that disables its driver's cancel handling, one that makes its job's
``end`` node itself with an ACL for its own identity alone.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from recovery.leader.decide import CANCEL_END_GRACE, CANCEL_MARGIN
from tests.cli import script, show
from tests.helpers import (
    SESSION_TIMEOUT,
    alive,
    assert_nothing_left,
    hands_client,
    wait_for,
    written_json,
)
from zkstore.config import StoreConfig
from zkstore.records.job_states import CANCELLED, SUCCEEDED
from zkstore.records.strict import parse_time

#: a host whose clock is off (tests/skewed_clock)
SKEWED = Path(__file__).resolve().parent.parent / "skewed_clock"

pytestmark = [pytest.mark.e2e, pytest.mark.shared_fleet(credentials=True)]

DEAF = '''
import json, os, signal, time
from pathlib import Path


class Deaf:
    """A cancel event that is never set."""

    def set(self):
        pass

    def is_set(self):
        return False

    def wait(self, timeout=None):
        return False


def erase(ctx, out):
    """Deletes its job's cancel, stop and end the moment they appear, with its driver's own
    ZooKeeper client (its job's identity, which may delete any leaf under its job's node);
    writes what ZooKeeper answered."""
    import gc

    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError, NoNodeError, NotEmptyError

    from zkstore.config import StoreConfig

    config = next(o for o in gc.get_objects() if isinstance(o, StoreConfig) and o.zk_driver)
    client = next(o for o in gc.get_objects() if isinstance(o, KazooClient) and o.connected)
    answers = {}
    while True:
        before = json.dumps(answers, sort_keys=True)
        for name in ("cancel", "stop", "end"):
            try:
                client.delete(f"{config.base_path}/jobs/{ctx.job_id}/{name}")
                answer = "deleted"
            except NoNodeError:
                continue
            except (NotEmptyError, NoAuthError) as exc:
                answer = type(exc).__name__
            counts = answers.setdefault(name, {})
            counts[answer] = counts.get(answer, 0) + 1
        if json.dumps(answers, sort_keys=True) != before:
            Path(out, "erased.tmp").write_text(json.dumps(answers))
            os.replace(Path(out, "erased.tmp"), Path(out, "erased"))
        time.sleep(0.01)


def run(ctx, out):
    """Replaces its driver's cancel event and grace, ignores SIGTERM and SIGINT, and deletes
    what asks it to end (:func:`erase`, in a thread)."""
    import gc
    import threading

    for found in gc.get_objects():
        if type(found).__name__ == "Driver" and hasattr(found, "cancel_grace"):
            found.cancelled = Deaf()
            found.cancel_grace = 10**9
    ctx._cancelled = Deaf()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=erase, args=(ctx, out), daemon=True).start()
    Path(out, "deaf").write_text(json.dumps({"driver": os.getpid()}))
    while True:
        try:
            time.sleep(0.1)
        except BaseException:
            pass
'''

PLANT = '''
import gc, json, os, time
from pathlib import Path


def run(ctx, out):
    """Makes its job's ``end`` node with the raw kazoo client under its driver's wrapper, with
    an ACL for its own identity alone, then runs until cancelled."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NodeExistsError
    from kazoo.security import make_digest_acl

    from zkstore.config import StoreConfig

    config = next(o for o in gc.get_objects() if isinstance(o, StoreConfig) and o.zk_driver)
    user, _, password = str(config.zk_driver["job"]).removeprefix("digest:").partition(":")
    client = next(o for o in gc.get_objects() if isinstance(o, KazooClient) and o.connected)
    path = f"{config.base_path}/jobs/{ctx.job_id}/end"
    try:
        client.create(path, b"mine", acl=[make_digest_acl(user, password, all=True)])
    except NodeExistsError:
        pass
    Path(out, f"planted-{ctx.attempt}").write_text(json.dumps({"driver": os.getpid()}))
    while True:
        ctx.raise_if_cancelled()
        time.sleep(0.1)
'''

DEEP = PLANT.replace(
    'client.create(path, b"mine", acl=[make_digest_acl(user, password, all=True)])',
    'client.create(path, b"mine", acl=[make_digest_acl(user, password, all=True)])\n'
    '        client.create(path + "/child", b"", acl=[make_digest_acl(user, password, all=True)])',
)

SEALED = DEEP.replace(
    'client.create(path, b"mine", acl=[make_digest_acl(user, password, all=True)])\n',
    "Path(out, 'started').write_text(json.dumps({'driver': os.getpid()}))\n"
    "        from kazoo.security import ACL, Id, Permissions\n"
    "        from zkstore.jobs.stops import EndRequest\n"
    "        from zkstore.records.strict import utc_moment\n"
    "        older = EndRequest(\n"
    "            version=None, attempt=0, reason='STOPPED', requested=utc_moment()\n"
    "        )\n"
    "        readable = ACL(Permissions.READ, Id('world', 'anyone'))\n"
    "        mine = make_digest_acl(user, password, all=True)\n"
    "        client.create(path, older.to_bytes(), acl=[mine, readable])\n",
)

SELF_CANCEL = PLANT.replace('/jobs/{ctx.job_id}/end"', '/jobs/{ctx.job_id}/cancel"').replace(
    "ctx.raise_if_cancelled()", "pass"
)

RENEW = (
    DEAF.replace(
        "    threading.Thread(target=erase, args=(ctx, out), daemon=True).start()\n",
        "    threading.Thread(target=renew, args=(ctx, out), daemon=True).start()\n",
    )
    + '''

def renew(ctx, out):
    """Makes its job's cancel itself, readable (a valid request), and makes it again every
    0.2 s in one transaction (deleted and created: a new ctime each time), so that a grace
    counted from its ctime never ends."""
    import gc

    from kazoo.client import KazooClient
    from kazoo.security import ACL, Id, Permissions, make_digest_acl

    from zkstore.config import StoreConfig
    from zkstore.records.job_records import CancelRequest
    from zkstore.records.strict import utc_moment

    config = next(o for o in gc.get_objects() if isinstance(o, StoreConfig) and o.zk_driver)
    user, _, password = str(config.zk_driver["job"]).removeprefix("digest:").partition(":")
    client = next(o for o in gc.get_objects() if isinstance(o, KazooClient) and o.connected)
    path = f"{config.base_path}/jobs/{ctx.job_id}/cancel"
    # its own to change, anybody's to read: the leader reads a valid request
    acl = [make_digest_acl(user, password, all=True), ACL(Permissions.READ, Id("world", "anyone"))]
    data = CancelRequest(version=None, requested=utc_moment(), by="itself", reason="mine")
    client.create(path, data.to_bytes(), acl=acl)
    renewed, first = 0, time.time()
    while True:
        time.sleep(0.2)
        transaction = client.transaction()
        transaction.delete(path)
        transaction.create(path, data.to_bytes(), acl=acl)
        if all(result is True or isinstance(result, str) for result in transaction.commit()):
            renewed += 1
            seconds = time.time() - first
            said = json.dumps({"renewed": renewed, "seconds": seconds})
            Path(out, "renewed.tmp").write_text(said)
            os.replace(Path(out, "renewed.tmp"), Path(out, "renewed"))
'''
)

NOOP = """
def run(ctx):
    return None
"""


@pytest.fixture
def guarded(local: LocalCluster) -> LocalCluster:
    """Daemons of a cluster with credentials (the module's fleet's): every driver holds its
    job's own identity."""
    assert local.config.zk_auth is not None
    return local


def submit(config: StoreConfig, laptop: Path, target: str, job_id: str, *words: str) -> None:
    done = script(config, "submit", target, "--job-id", job_id, *words, cwd=laptop)
    assert done.returncode == 0, done.stderr


#: the --cancel-grace of the daemons of the tests that count it
GRACE = 2.0


def run_with_grace(
    guarded: LocalCluster, laptop: Path, tmp_path: Path, code: str, job_id: str
) -> tuple[Path, int]:
    """A daemon with a --cancel-grace of :data:`GRACE`, and job ``code`` (which writes its
    driver's pid to ``deaf``) running on it, one attempt at most: its output directory and
    its driver's pid."""
    (laptop / f"{job_id}.py").write_text(code)
    out = tmp_path / "out"
    out.mkdir()
    guarded.extra_args = ("--cancel-grace", f"{GRACE:g}s")
    guarded.start_daemon("d1")
    guarded.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
    words = ("--max-attempts", "1", "--", str(out))
    submit(guarded.config, laptop, f"{job_id}.py:run", job_id, *words)
    return out, written_json(out / "deaf", timeout=90, what="the job running")["driver"]


@pytest.mark.disturbs  # its daemon's --cancel-grace
def test_a_job_that_disables_its_cancel_and_deletes_its_requests_is_ended_within_the_grace(
    guarded: LocalCluster, laptop: Path, tmp_path: Path
) -> None:
    config = guarded.config
    out, pid = run_with_grace(guarded, laptop, tmp_path, DEAF, "deaf")
    # from a laptop whose clock is an hour ahead: the cancel's own date says so
    ahead = {**os.environ, "PYTHONPATH": str(SKEWED), "SKEWED_CLOCK_SECONDS": "3600"}
    cancelled = script(config, "jobs cancel", "deaf", env=ahead)
    assert cancelled.returncode == 0, cancelled.stderr
    # its answer dates the request as ZooKeeper does, not by the laptop's clock
    answered = parse_time(cancelled.stdout.rsplit(" requested at ", 1)[1].strip())
    assert abs((answered - datetime.now(UTC)).total_seconds()) < 60, cancelled.stdout
    assert asked_about_now(show(config, "deaf")), "shown as ZooKeeper dated it"
    # The driver's own cancel is disabled: the leader ends it past the grace and its margin,
    # its daemon sends SIGTERM (ignored) and SIGKILL after the short end grace.
    bound = GRACE + CANCEL_MARGIN + CANCEL_END_GRACE + 20
    wait_for(lambda: not alive(pid), timeout=bound, what="the deaf driver ended")
    with hands_client(config) as client:
        result = client.wait("deaf", timeout=30)
    assert result.outcome == CANCELLED
    assert "SIGKILL to the process group" in guarded.daemons["d1"].log()
    # It tried to delete its cancel and the leader's end while they asked it to stop: each
    # has a pin (a child the job cannot delete), so ZooKeeper refused every time.
    erased = json.loads((out / "erased").read_text())
    assert erased["cancel"].get("NotEmptyError", 0) > 0 and erased["end"].get("NotEmptyError"), (
        erased
    )
    assert all("deleted" not in answers for answers in erased.values()), erased
    # the result keeps the cancel as the leader counted it: dated by ZooKeeper (read once the
    # job's nodes, its cancel among them, are cleaned up)
    assert_nothing_left(config, "deaf")
    shown = show(config, "deaf")
    assert shown["result"]["state"] == "CLEAN" and asked_about_now(shown), shown


@pytest.mark.disturbs  # its daemon's --cancel-grace
def test_a_job_that_makes_its_own_cancel_again_and_again_is_ended_within_the_grace(
    guarded: LocalCluster, laptop: Path, tmp_path: Path
) -> None:
    """A job may create any name under its node: one that makes its own cancel, readable,
    and makes it again every 0.2 s (a new ctime each time) is ended within the grace of the
    first one the leader saw, not never (a grace counted from the node's ctime)."""
    out, pid = run_with_grace(guarded, laptop, tmp_path, RENEW, "renew")
    written_json(out / "renewed", timeout=30, what="its cancel made again")
    bound = GRACE + CANCEL_MARGIN + CANCEL_END_GRACE + 20
    wait_for(lambda: not alive(pid), timeout=bound, what="the driver ended")
    renewed = json.loads((out / "renewed").read_text())
    # it made its cancel again long past the grace: counted from the last ctime, never due
    assert renewed["seconds"] > GRACE + CANCEL_MARGIN, renewed
    with hands_client(guarded.config) as client:
        assert client.wait("renew", timeout=30).outcome == CANCELLED


def asked_about_now(shown: dict[str, object]) -> bool:
    """Whether ``jobs show`` dates the job's cancel within a minute of this host's (true)
    clock, not an hour ahead as its writer did."""
    cancel = shown["cancel"]
    assert isinstance(cancel, dict), shown
    asked = parse_time(cancel["requested"])
    return abs((asked - datetime.now(UTC)).total_seconds()) < 60


def test_a_job_that_makes_its_end_node_for_itself_blocks_neither_cancel_nor_the_others(
    guarded: LocalCluster, laptop: Path, tmp_path: Path
) -> None:
    config = guarded.config
    (laptop / "plant.py").write_text(PLANT)
    (laptop / "noop.py").write_text(NOOP)
    out = tmp_path / "out"
    out.mkdir()
    guarded.start_daemon("d1")
    guarded.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
    submit(config, laptop, "plant.py:run", "plant", "--", str(out))
    written_json(out / "planted-1", timeout=90, what="the end node planted")
    shown = script(config, "jobs show", "plant", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    cancelled = script(config, "jobs cancel", "plant")
    assert cancelled.returncode == 0, cancelled.stderr
    submit(config, laptop, "noop.py:run", "other")
    with hands_client(config) as client:
        assert client.wait("plant", timeout=90).outcome == CANCELLED
        assert client.wait("other", timeout=90).outcome == SUCCEEDED
    for job_id, state in (("plant", CANCELLED), ("other", SUCCEEDED)):
        # the result is recorded before the job's records are cleaned up (CLEANING meanwhile):
        # its cleanup, the planted node's delete among them, must finish too
        def shown_state(job_id: str = job_id) -> str | None:
            shown = script(config, "jobs show", job_id, "--format", "json")
            assert shown.returncode == 0, shown.stderr
            found: str = json.loads(shown.stdout)["state"]
            return found if found != "CLEANING" else None

        assert wait_for(shown_state, SESSION_TIMEOUT * 10, what=f"{job_id} cleaned up") == state
    assert "unexpected store error" not in guarded.daemons["d1"].log()


@pytest.mark.disturbs  # the job's records stay: the fleet's reset could not forget it
def test_a_job_whose_planted_end_has_children_blocks_neither_cancel_nor_the_others(
    guarded: LocalCluster, laptop: Path, tmp_path: Path
) -> None:
    """An ``end`` the cluster can neither read nor delete (a child under the job's own ACL):
    ``jobs cancel`` is taken, the job's result is CANCELLED, and the other jobs run (its records
    stay: deleting them needs rights the job took away; docs/operating.md)."""
    config = guarded.config
    (laptop / "deep.py").write_text(DEEP)
    (laptop / "noop.py").write_text(NOOP)
    out = tmp_path / "out"
    out.mkdir()
    guarded.start_daemon("d1")
    guarded.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
    submit(config, laptop, "deep.py:run", "deep", "--", str(out))
    pid = written_json(out / "planted-1", timeout=90, what="the end node planted")["driver"]
    cancelled = script(config, "jobs cancel", "deep")
    assert cancelled.returncode == 0, cancelled.stderr
    wait_for(lambda: not alive(pid), timeout=60, what="the driver ended")
    with hands_client(config) as client:
        assert client.wait("deep", timeout=60).outcome == CANCELLED
    other = script(config, "submit", "noop.py:run", "--job-id", "other", "--wait", cwd=laptop)
    assert other.returncode == 0, other.stderr
    assert "unexpected store error" not in guarded.daemons["d1"].log()


@pytest.mark.disturbs  # the job's records stay: the fleet's reset could not forget it
def test_a_job_whose_own_end_node_the_leader_could_not_replace_is_ended_by_its_member(
    guarded: LocalCluster, laptop: Path, tmp_path: Path
) -> None:
    """An ``end`` the cluster can read but not replace: a valid request for another attempt,
    with a child under an ACL that keeps the cluster out (the leader's ``end`` could never be
    written over it). No node the leader writes keeps the cluster from changing it, so its
    member ends the driver as the job's own request, at once, with nobody asking."""
    config = guarded.config
    (laptop / "sealed.py").write_text(SEALED)
    out = tmp_path / "out"
    out.mkdir()
    guarded.start_daemon("d1")
    guarded.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
    submit(config, laptop, "sealed.py:run", "sealed", "--max-attempts", "1", "--", str(out))
    # said before it plants: its member may end it before it says anything after
    pid = written_json(out / "started", timeout=90, what="the job running")["driver"]
    wait_for(lambda: not alive(pid), timeout=SESSION_TIMEOUT * 5, what="the driver ended")
    log = guarded.daemons["d1"].log()
    assert "its ACL keeps the cluster from changing it" in log
    assert "Restart failed" not in log and "quarantined" not in log  # the end is left alone


def test_a_job_that_makes_its_cancel_node_for_itself_is_ended_and_the_others_run(
    guarded: LocalCluster, laptop: Path, tmp_path: Path
) -> None:
    """A ``cancel`` the cluster may not read (nor, on ZooKeeper 3.9, watch): the leader takes
    it for a cancel (an unreadable cancel still asks the job to stop) and ends the attempt, its
    watches on the other jobs are set all the same, and they run."""
    config = guarded.config
    (laptop / "self_cancel.py").write_text(SELF_CANCEL)
    (laptop / "noop.py").write_text(NOOP)
    out = tmp_path / "out"
    out.mkdir()
    guarded.start_daemon("d1")
    guarded.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
    submit(config, laptop, "self_cancel.py:run", "selfish", "--", str(out))
    pid = written_json(out / "planted-1", timeout=90, what="the cancel node planted")["driver"]
    submit(config, laptop, "noop.py:run", "other")
    with hands_client(config) as client:
        assert client.wait("other", timeout=90).outcome == SUCCEEDED
        assert client.wait("selfish", timeout=90).outcome == CANCELLED
    assert not alive(pid)
    assert "unexpected store error" not in guarded.daemons["d1"].log()
