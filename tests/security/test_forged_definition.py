"""A forged definition never runs outside its own driver (issue 43 item 4, DESIGN.md
invariant 14): job code can replace its own definition with a pickle signed by its own job key;
every command that touches definitions, and the leader firing a schedule, read it sealed. The
planted pickle would create a file if anything unpickled it: the file never appears."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import script, zkstore
from tests.helpers import hands_client, plant, wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.stops import StopRequest
from zkstore.layout import Layout, StorageLayout
from zkstore.payloads.serializers import PickleSerializer
from zkstore.payloads.storage import StateStorage
from zkstore.records.handle import Handle
from zkstore.records.job_records import JobStatus
from zkstore.records.result_records import QuarantineEntry
from zkstore.records.strict import parse_time, utc_now
from zkstore.schedules.keys import ScheduleSigner
from zkstore.schedules.schedule_limits import MIN_INTERVAL_ENV
from zkstore.signing import JobKey, Signer, derive_job_key

pytestmark = pytest.mark.e2e

KEY = b"k" * 32


class _Planted:
    """Unpickled, it creates ``marker``: what job code would write as its definition."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (open, (str(self.marker), "w"))


def _forged(marker: Path) -> bytes:
    header = PickleSerializer().dumps(None)
    return header[: len(header) - len(PickleSerializer.body(header))] + pickle.dumps(
        _Planted(marker)
    )


def _plant_definition(cluster: Cluster, job_id: str, marker: Path) -> Handle:
    """The forged payload under the job's prefix, signed with the job's own key (what its code
    holds), and a handle to it: what job code with its job's rights could publish."""
    config = cluster.config
    key = JobKey(config.cluster_id, job_id, derive_job_key(KEY, config.cluster_id, job_id))
    storage = StateStorage(config.storage_url, config.storage_options, signer=Signer(job_key=key))
    ref = storage.write(cluster.storage_layout.definitions(job_id), _forged(marker), suffix=".pkl")
    summary = {"name": job_id, "kind": "function", "max_attempts": 3, "submitted": utc_now()}
    return Handle.for_payload(ref, "job code", summary)


def test_a_forged_definition_never_runs_in_a_command(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    config = runtime_config.with_changes(signing_key=KEY)
    marker = tmp_path / "ran"
    with hands_client(config) as client:
        cluster = client.cluster
        zk, layout = cluster.zk, cluster.layout
        # A stopped job whose definition was replaced by its code.
        stopped = _plant_definition(cluster, "stopped", marker)
        plant(zk, layout.job_handle("stopped"), stopped.to_bytes())
        zk.create(f"{layout.job_handle('stopped')}/locks")
        status = JobStatus(version=None, state="STOPPED", attempt=1, updated=parse_time(utc_now()))
        plant(zk, layout.status("stopped"), status.to_bytes())
        stop = StopRequest(
            version=None, requested=parse_time(utc_now()), by="tester", reason="forged"
        )
        plant(zk, layout.stop("stopped"), stop.to_bytes())
        # A quarantined job keeping a forged definition's handle.
        kept = _plant_definition(cluster, "held", marker)
        entry = QuarantineEntry(
            version=None,
            job_id="held",
            reason="planted",
            since=parse_time(utc_now()),
            handle=kept,
        )
        plant(zk, layout.quarantine_entry("held"), entry.to_bytes())
        plant(
            zk,
            layout.status("held"),
            JobStatus(version=None, updated=parse_time(utc_now())).to_bytes(),
        )

        env_ran = []
        for words in (
            ("jobs resume", "stopped", "--timeout", "5m"),
            ("jobs resume", "stopped"),
            ("quarantine release", "held"),
            ("quarantine show", "held"),
            ("jobs show", "stopped"),
            ("handles verify",),
            ("handles lingering", "--min-age", "0s"),
        ):
            ran = script(config, words[0], *words[1:], env=_env(config))
            env_ran.append((words, ran.returncode, ran.stderr.strip()[-300:]))
            assert "Traceback" not in ran.stderr, (words, ran.stderr)
            assert not marker.exists(), f"the forged pickle ran in zkstore {' '.join(words)}"
        resumed = dict((w, (code, err)) for w, code, err in env_ran)
        code, err = resumed[("jobs resume", "stopped", "--timeout", "5m")]
        assert code == 1 and "not a zkstore job definition" in err, err
        code, err = resumed[("quarantine release", "held")]
        assert code == 5 and "not a zkstore job definition" in err, err  # it stays quarantined


def test_a_forged_schedule_definition_never_runs_in_the_leader(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """The leader copies a schedule's definition for each run: read sealed, a forged one is
    refused (the window recorded skipped, with why), never run by the leader."""
    config = runtime_config.with_changes(signing_key=KEY)
    marker = tmp_path / "ran"
    job_file = tmp_path / "job.py"
    job_file.write_text("def run(ctx):\n    pass\n")
    created = script(
        config,
        "schedules create",
        "forged",
        f"{job_file}:run",
        "--every",
        "2s",
        env=_env(config),
    )
    assert created.returncode == 0, created.stderr
    with hands_client(config) as client:
        storage = StateStorage(
            config.storage_url, config.storage_options, signer=ScheduleSigner(KEY)
        )
        ref = storage.write(
            StorageLayout(config.cluster_id).schedule_definitions("forged"),
            _forged(marker),
            suffix=".pkl",
        )
        spec_path = Layout(config.base_path).schedule("forged")
        data, stat = client.cluster.zk.get(spec_path)
        import json

        spec = json.loads(data)
        spec["definition"].update(uri=ref.uri, size=ref.size, sha256=ref.sha256, hmac=ref.hmac)
        client.cluster.zk.set(spec_path, json.dumps(spec).encode(), version=stat.version)
        local = LocalCluster(config, tmp_path / "rt", verbose=False)
        try:
            local.start_daemon("d1")
            wait_for(
                lambda: (
                    "definition cannot be read"
                    in zkstore(config, "schedules show", "forged", env=_env(config)).stdout
                ),
                timeout=60,
                what="a window skipped: its definition cannot be read",
            )
            shown = script(config, "schedules show", "forged", env=_env(config))  # as a user
            assert "definition cannot be read" in shown.stdout, shown.stdout
        finally:
            local.stop()
        assert not marker.exists(), "the leader ran the forged schedule's pickle"


def _env(config: StoreConfig) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKSTORE_")}
    env[MIN_INTERVAL_ENV] = os.environ[MIN_INTERVAL_ENV]  # the suite's 1 s (conftest)
    assert config.signing_key is not None
    env["ZKSTORE_SIGNING_KEY"] = config.signing_key.decode()
    return env
