"""Issue 58: what a new user hit, round two, met through the installed ``zkstore`` script (and
the Python API): a clean state reachable, finished jobs counted, messages in a user's words, job
views that read right, the same code resumed again a no-op."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.cli import script, show
from tests.helpers import SESSION_TIMEOUT, hands_client, wait_for
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.records.job_states import FAILED, STOPPED, SUCCEEDED

#: the end of a stopped attempt's driver (``--end-grace``) and a leader's look at it
END_GRACE = 5.0
#: the shape of tests/submit/test_provenance.py's fleet: a test process that runs both starts
#: one (this file needs no HTTP)
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.shared_fleet(http=True, args=("--end-grace", f"{END_GRACE:g}s")),
]

HEX = re.compile(r"[0-9a-f]{64}")


def test_a_partial_log_write_lingering_is_what_cleanup_removes(config: StoreConfig) -> None:
    """A host loss leaves a log's temporary file beside a live job's logs: `lingering`
    reports it, `cleanup --dry-run` counts only what it would act on, `--yes` removes it and
    `lingering` is clean after."""
    with Cluster.open(config) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("orders1", jobs.noop))
        key = f"{cluster.storage_layout.attempt_logs('orders1', 1)}/.end.json.tmp-a2cd7814"
        path = Path(cluster.storage.path_of(cluster.storage.url(key)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'{"chunks": 1, "bytes": 68}')
    old = time.time() - 3600
    os.utime(path, (old, old))

    found = script(config, "handles lingering", "--format", "json")
    assert found.returncode == 0, found.stderr
    listed = json.loads(found.stdout)["findings"]
    assert [(f["kind"], f["job_id"], f["detail"]) for f in listed] == [
        ("orphan-payload", "orders1", "partial write (temporary file)")
    ]
    looked = script(config, "handles cleanup", "--dry-run")
    assert looked.returncode == 0, looked.stderr
    assert "would act on 1 item(s), freeing 26B" in looked.stdout, looked.stdout
    assert "kept" not in looked.stdout
    done = script(config, "handles cleanup", "--yes")
    assert done.returncode == 0, done.stderr
    assert "cleaned up 1 item(s), freed 26B" in done.stdout, done.stdout
    assert not path.exists()
    again = script(config, "handles lingering")
    assert again.returncode == 0 and again.stdout.strip() == "nothing lingering", again.stdout


def test_finished_jobs_are_counted_where_they_are_not_shown(config: StoreConfig) -> None:
    with Cluster.open(config) as cluster:
        for job_id in ("a", "b", "c"):
            cluster.jobs.submit(JobDefinition.for_function(job_id, jobs.noop))
            cluster.results.create_dirty(job_id, SUCCEEDED, attempts=1)
            assert clean_up(cluster, job_id)
    listed = script(config, "jobs list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "no jobs",
        "3 finished job(s) not shown: zkstore jobs list --all shows them",
    ]
    every = script(config, "jobs list", "--all")
    assert [line.split()[0] for line in every.stdout.splitlines()[1:]] == ["a", "b", "c"]
    assert "finished job(s) not shown" not in every.stdout
    as_json = script(config, "jobs list", "--format", "json")
    assert json.loads(as_json.stdout) == []  # a script's JSON holds the jobs, nothing else


def test_messages_say_what_to_do_in_a_users_words(config: StoreConfig, laptop: Path) -> None:
    (laptop / "job.py").write_text("def run(ctx):\n    pass\n")
    (laptop / "other.py").write_text("def run(ctx):\n    return 1\n")
    cron = script(
        config, "schedules create", "hourly", "job.py:run", "--cron", "61 * * * *", cwd=laptop
    )
    assert cron.returncode == 2
    assert cron.stderr.strip() == (
        "zkstore: usage error: cron expression '61 * * * *': the minute field is not valid: it "
        "takes 0-59 (a value, a range a-b, a list a,b or a step */n)"
    )
    fields = script(config, "schedules create", "x", "job.py:run", "--cron", "0 0 *", cwd=laptop)
    assert "it needs five fields (minute hour day-of-month month day-of-week)" in fields.stderr

    assert script(config, "submit", "job.py:run", "--job-id", "orders1", cwd=laptop).returncode == 0
    dup = script(config, "submit", "other.py:run", "--job-id", "orders1", cwd=laptop)
    assert dup.returncode == 5
    line = dup.stderr.strip()
    assert line.startswith("zkstore: error: job orders1 exists already; this submission differs"), (
        line
    )
    assert "HandleExists" not in line and "currentJobs" not in line and "\n" not in line

    typo = script(config, "jobs show", "order1")
    assert typo.returncode == 4
    assert typo.stderr.strip() == (
        "zkstore: error: no job 'order1' in this cluster: did you mean 'orders1'?"
    )
    far = script(config, "jobs show", "zzz")
    assert far.stderr.strip() == "zkstore: error: no job 'zzz' in this cluster"


V1 = """\
import time


def run(ctx, out):
    open(out, "a").write(f"v1 attempt {ctx.attempt}\\n")
    ctx.checkpoint({"rows": 100})
    while True:  # until it is stopped
        time.sleep(0.1)
"""
V2 = """\
import os
import time


def run(ctx, out):
    open(out, "a").write(f"v2 attempt {ctx.attempt} after {ctx.latest_checkpoint()}\\n")
    while not os.path.exists(out + ".go"):  # until the test has resumed it twice
        time.sleep(0.1)
"""


def test_stop_resume_twice_and_what_the_views_say(
    local: LocalCluster, runtime_config: StoreConfig, tmp_path: Path, laptop: Path
) -> None:
    """`jobs resume --definition` again with the same file is a no-op (exit 0); `jobs show`
    names each attempt's placing and ending, who stopped it with which checkpoint, and where
    each version of the code came from; `client.wait()` says what happened, not DIRTY."""
    config, out = runtime_config, tmp_path / "ran.txt"
    for version, text in (("v1", V1), ("v2", V2)):
        (laptop / version).mkdir()
        (laptop / version / "orders.py").write_text(text)
    local.start_daemon("d1")
    local.wait_for_leader(timeout=SESSION_TIMEOUT * 4 + 30)
    made = script(
        config, "submit", "v1/orders.py:run", "--job-id", "orders1", "--max-attempts", "2",
        "--", str(out), cwd=laptop,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    wait_for(lambda: show(config, "orders1")["checkpoints"], timeout=120, what="a checkpoint")
    running = script(config, "jobs show", "orders1")  # where it runs: daemon and driver
    assert "\ndaemon: d1\ndriver: " in running.stdout, running.stdout
    stopped = script(
        config, "jobs stop", "orders1", "--reason", "new code",
        "--checkpoint-timeout", f"{END_GRACE * 4 + 30:g}s",
    )  # fmt: skip
    assert stopped.returncode == 0, stopped.stderr
    assert show(config, "orders1")["state"] == STOPPED
    first = script(config, "jobs resume", "orders1", "--definition", "v2/orders.py:run", cwd=laptop)
    assert first.returncode == 0, first.stderr
    again = script(config, "jobs resume", "orders1", "--definition", "v2/orders.py:run", cwd=laptop)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == (
        "job orders1 was resumed already with this code and these options: nothing to do"
    )
    other = script(config, "jobs resume", "orders1", "--definition", "v1/orders.py:run", cwd=laptop)
    assert other.returncode == 5, other.stderr
    assert "was resumed already" in other.stderr

    Path(f"{out}.go").touch()
    with hands_client(config) as client:
        ended = client.wait("orders1", timeout=300)
    assert ended.outcome == SUCCEEDED and ended.attempts == 2
    assert "DIRTY" not in repr(ended) and "state" not in repr(ended)
    assert "cleaned_up=" in repr(ended)
    assert out.read_text().splitlines() == [
        "v1 attempt 1",
        "v2 attempt 2 after {'rows': 100}",
    ]

    shown = wait_for(
        lambda: (found := show(config, "orders1"))["state"] == SUCCEEDED and found,
        timeout=60,
        what="orders1 cleaned up",
    )
    one, two = shown["attempts"]
    v1 = f"{(laptop / 'v1' / 'orders.py').resolve()}:run"
    v2 = f"{(laptop / 'v2' / 'orders.py').resolve()}:run"
    assert (one["target"], two["target"]) == (v1, v2)
    assert (
        one["note"].startswith("stopped by ")
        and ": new code; it resumes from checkpoint 1 (taken " in one["note"]
    )
    text = script(config, "jobs show", "orders1")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.split("attempts:\n")[1].splitlines()
    # the driver JVM each attempt had, as its JSON says it (issue 56.4)
    jvm = [f"; driver JVM {a['jvm']}" if a.get("jvm") else "" for a in (one, two)]
    assert str(two["jvm"]).startswith("none: the job started no Spark"), two
    assert lines[0] == (
        f"  1 STOPPED on d1, placed {one['placed']}, ended {one['ended']}, definition "
        f"{one['definition'][:12]} from {v1}{jvm[0]}: {one['note']}"
    )
    assert lines[1] == (
        f"  2 SUCCEEDED on d1, placed {two['placed']}, ended {two['ended']}, definition "
        f"{two['definition'][:12]} from {v2}, new since the attempt before{jvm[1]}"
    )
    assert "attempt 1 is over" not in text.stdout
    assert FAILED not in text.stdout
