"""Idempotent submission, ``--after`` stored, and a schedule's run ids kept for the schedule:
``zkstore submit`` as a user retries it (in this process; one retry from a new process with the
installed script, since pickled code differs between processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import script, zkstore
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.dependencies import format_after
from zkstore.jobs.runspec import RunSpec

pytestmark = pytest.mark.integration

JOB = "def run(ctx, day):\n    return day\n"


def job_file(laptop: Path, source: str = JOB) -> Path:
    path = laptop / "etl.py"
    path.write_text(source)
    return path


def current_jobs(cluster: Cluster) -> list[str]:
    return sorted(cluster.zk.children(cluster.layout.current_jobs))


def test_the_same_submission_again_prints_the_existing_id_and_another_exits_5_naming_why(
    config: StoreConfig, cluster: Cluster, laptop: Path
) -> None:
    job = job_file(laptop)
    first = zkstore(config, "submit", f"{job}:run", "--job-id", "etl-1", "--", "2026-11-24")
    again = zkstore(config, "submit", f"{job}:run", "--job-id", "etl-1", "--", "2026-11-24")
    assert (first.returncode, first.stdout) == (0, "etl-1\n"), first.stderr
    assert (again.returncode, again.stdout) == (0, "etl-1\n"), again.stderr
    assert current_jobs(cluster) == ["etl-1"]

    options = zkstore(
        config,
        "submit",
        f"{job}:run",
        "--job-id",
        "etl-1",
        "--max-attempts",
        "5",
        "--",
        "2026-11-24",
    )
    assert options.returncode == 5
    assert "max_attempts: 3 there, 5 here" in options.stderr

    arguments = zkstore(config, "submit", f"{job}:run", "--job-id", "etl-1", "--", "2026-11-25")
    assert arguments.returncode == 5 and "only the arguments differ" in arguments.stderr

    job.write_text(JOB.replace("return day", "return day * 2"))
    code = zkstore(config, "submit", f"{job}:run", "--job-id", "etl-1", "--", "2026-11-24")
    assert code.returncode == 5 and "the code differs" in code.stderr

    conf = zkstore(
        config, "submit", f"{job}:run", "--job-id", "etl-1", "--conf", "spark.x=1", "--", "x"
    )
    assert conf.returncode == 5
    assert current_jobs(cluster) == ["etl-1"], "nothing more was stored"


def test_a_retry_from_another_process_is_the_same_submission(
    config: StoreConfig, cluster: Cluster, laptop: Path
) -> None:
    """The fingerprint hashes the module's source, not the pickled function (whose bytes
    differ between processes): the installed script, twice, makes one job."""
    job = job_file(laptop, "import collections\nSEEN = {1, 2}\n" + JOB)
    runs = [
        script(
            config, "submit", f"{job}:run", "--idempotency-key", "nightly-2026-11-24", cwd=laptop
        )
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.startswith("etl-run-")
    assert current_jobs(cluster) == [runs[0].stdout.strip()]
    other = zkstore(config, "submit", f"{job}:run", "--idempotency-key", "nightly-2026-11-25")
    assert other.returncode == 0 and other.stdout != runs[0].stdout
    both = zkstore(config, "submit", f"{job}:run", "--idempotency-key", "k", "--job-id", "x")
    assert both.returncode == 2 and "not both" in both.stderr


def test_after_is_stored_checked_and_part_of_the_submission(
    config: StoreConfig, cluster: Cluster, laptop: Path
) -> None:
    job = job_file(laptop)
    done = zkstore(
        config, "submit", f"{job}:run", "--job-id", "b", "--after", "a", "--after", "c:ended"
    )
    assert done.returncode == 0, done.stderr
    stored = RunSpec.from_summary(cluster.jobs.handles.get_handle("b").summary).after
    assert format_after(stored) == "a:SUCCEEDED,c:ENDED"
    other = zkstore(config, "submit", f"{job}:run", "--job-id", "b", "--after", "a")
    assert other.returncode == 5 and "after" in other.stderr
    itself = zkstore(config, "submit", f"{job}:run", "--job-id", "s", "--after", "s")
    assert itself.returncode == 2
    bad = zkstore(config, "submit", f"{job}:run", "--job-id", "t", "--after", "a:DONE")
    assert bad.returncode == 2


def test_a_plain_submit_cannot_take_a_schedules_run_id(
    config: StoreConfig, cluster: Cluster, laptop: Path
) -> None:
    job = job_file(laptop)
    created = zkstore(config, "schedules create", "nightly", f"{job}:run", "--cron", "0 2 * * *")
    assert created.returncode == 0, created.stderr
    taken = zkstore(config, "submit", f"{job}:run", "--job-id", "nightly-20261125T020000Z")
    assert taken.returncode == 2 and "run of schedule nightly" in taken.stderr
    free = zkstore(config, "submit", f"{job}:run", "--job-id", "other-20261125T020000Z")
    assert free.returncode == 0, free.stderr


def test_an_idempotency_id_planted_with_the_submissions_summary_is_not_taken(
    config: StoreConfig, laptop: Path
) -> None:
    """Issue 43: job code pre-creates the id an --idempotency-key gives, with the very summary
    the submission will have, pointing at a payload it could write (not signed with that id's
    key, which it does not hold). The submission does not take it for its own: exit 5."""
    import json

    from zkstore.payloads.storage import StateStorage
    from zkstore.records.handle import Handle
    from zkstore.zookeeper.ops import Create

    job = job_file(laptop)
    scratch = config.with_changes(root=f"{config.root}-scratch")
    first = zkstore(scratch, "submit", f"{job}:run", "--idempotency-key", "k1", "--", "d")
    assert first.returncode == 0, first.stderr
    job_id = first.stdout.strip()
    signed = config.with_changes(signing_key=b"the cluster's key")
    with Cluster.open(scratch) as there, Cluster.open(signed) as cluster:
        summary = json.loads(there.zk.get(there.layout.job_handle(job_id))[0])
        for core in ("format", "uri", "size", "sha256", "created", "writer", "hmac"):
            summary.pop(core, None)
        body = there.storage.read(there.jobs.handles.get_handle(job_id).ref)
        ref = StateStorage(config.storage_url).write(
            cluster.storage_layout.definitions(job_id), body, suffix=".pkl"
        )
        planted = Handle.for_payload(ref, "planter", summary)
        cluster.zk.commit(
            [
                Create(cluster.layout.job_handle(job_id), planted.to_bytes()),
                Create(f"{cluster.layout.job_handle(job_id)}/locks"),
            ]
        )
    env = {"ZKSTORE_SIGNING_KEY": "the cluster's key"}
    again = zkstore(config, "submit", f"{job}:run", "--idempotency-key", "k1", "--", "d", env=env)
    assert again.returncode == 5, (again.stdout, again.stderr)
    assert "its definition does not verify" in again.stderr


def test_a_resubmission_with_other_run_options_is_refused_naming_them(
    config: StoreConfig, laptop: Path
) -> None:
    """Issue 49: a resubmission with another --timeout or --notify printed the id and exited
    0 while the job kept its old options: every option that changes how the job runs is
    compared (through the installed script)."""
    job = job_file(laptop)
    base = (f"{job}:run", "--job-id", "etl-t", "--timeout", "10m")
    first = script(config, "submit", *base, "--", "d")
    assert first.returncode == 0, first.stderr
    same = script(config, "submit", *base, "--", "d")
    assert (same.returncode, same.stdout) == (0, "etl-t\n"), same.stderr
    longer = script(
        config, "submit", f"{job}:run", "--job-id", "etl-t", "--timeout", "20m", "--", "d"
    )
    assert longer.returncode == 5 and "timeout: 600 there, 1200 here" in longer.stderr, (
        longer.stderr
    )
    notify = script(config, "submit", *base, "--notify", "https://example.com/hook", "--", "d")
    assert notify.returncode == 5, notify.stderr
    assert "notify: not given (the default) there, 'https://example.com/hook' here" in notify.stderr
