"""Issue 24: one path for each concern. The command line, the HTTP API and the page share one
view model and one control service; one vocabulary (enumerations) and one error tree that carries
both the exit code and the HTTP status of each class. (The import graph: in
tests/tooling/test_import_contracts.py, which starts processes.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recovery.member import launcher
from zkstore import errors
from zkstore.admin import lingering
from zkstore.admin.lingering.kind import Kind
from zkstore.errors import ExitCode, TooLarge, ZkStoreError
from zkstore.jobs import control, snapshot
from zkstore.jobs.job_state_store import JobStateStore
from zkstore.records.fleet_records import Assignment, LeaderInfo, MemberInfo
from zkstore.records.handle import MAX_HANDLE_BYTES, Handle
from zkstore.records.job_records import JobStatus
from zkstore.records.job_states import (
    ArtifactScope,
    DriverExit,
    JobState,
    KeyState,
)
from zkstore.records.strict import parse_time
from zkstore.service.control_service import COMMANDS

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_every_error_class_carries_its_exit_code_and_http_status() -> None:
    classes = [errors.ZkStoreError, *_subclasses(ZkStoreError)]
    for cls in classes:
        assert isinstance(cls.exit_code, int) and 100 <= cls.http_status <= 599, cls
    # what the HTTP side's own isinstance chain turned into 500
    assert errors.AccessDenied.http_status == 502
    assert errors.CorruptRecord.http_status == 502
    assert errors.PayloadError.http_status == 502
    assert errors.WaitTimeout.http_status == 504
    assert (errors.JobNotFound.http_status, errors.VersionConflict.http_status) == (404, 409)
    assert (errors.ConfigError.http_status, errors.StoreUnavailable.http_status) == (400, 503)
    assert TooLarge.http_status == 413
    assert errors.AccessDenied.exit_code == ExitCode.ACCESS_DENIED == 8
    assert errors.JobEndedCancelled.exit_code == ExitCode.CANCELLED == 3


def test_the_api_maps_no_error_itself() -> None:
    source = (ROOT / "recovery/observe/http_api.py").read_text()
    assert "_status_of" not in source and "exc.http_status" in source


def test_driver_exit_codes_are_their_own_enumeration() -> None:
    """A driver's exit 4 is a cancelled attempt; the command line's exit 4 is "no such job"."""
    assert DriverExit.CANCELLED == 4 and ExitCode.CANCELLED == 3
    assert not hasattr(launcher, "EXIT_CANCELLED")
    assert launcher.describe_exit(DriverExit.CANCELLED) == "cancelled"


def test_one_vocabulary() -> None:
    assert snapshot.ENDED is JobState.ENDED  # was defined in snapshot.py
    assert JobState.PENDING == "PENDING" and KeyState.PENDING == "pending"
    assert not hasattr(control, "PENDING") and control.KEY_PENDING is KeyState.PENDING
    assert tuple(ArtifactScope) == ("attempt", "job")
    assert json.dumps({"state": JobState.RUNNING}) == '{"state": "RUNNING"}'


def test_records_name_the_daemon_id_and_keep_their_stored_names() -> None:
    old = b'{"member_id":"d1","host":"h","pid":1,"slots":2,"started":"2026-11-21T00:00:00Z"}'
    member = MemberInfo.from_znode(old, None, "/m")
    stored = json.loads(member.to_bytes())
    assert member.daemon_id == "d1" and stored["member_id"] == "d1" and "daemon_id" not in stored
    status = JobStatus.from_znode(
        b'{"state":"STARTING","attempt":1,"failures":0,"updated":"2026-11-21T00:00:00Z",'
        b'"member":"d1","leader":"d2"}',
        None,
        "/s",
    )
    assert (status.daemon_id, status.leader_id) == ("d1", "d2")
    assert json.loads(status.to_bytes())["member"] == "d1"
    placed = Assignment(
        None, job_id="j", daemon_id="d1", assigned=parse_time("2026-11-21T00:00:00Z")
    )
    assert json.loads(placed.to_bytes())["member_id"] == "d1"
    leads = LeaderInfo.from_znode(
        b'{"id":"d1","host":"h","pid":1,"since":"2026-11-21T00:00:00Z","contender":"c"}',
        None,
        "/l",
    )
    assert leads.daemon_id == "d1" and json.loads(leads.to_bytes())["id"] == "d1"


def test_size_limits_raise_one_class() -> None:
    handle = Handle(
        uri="file:///x",
        size=1,
        sha256="0" * 64,
        created="2026-11-21T00:00:00Z",
        writer="w",
        summary={"name": "n" * MAX_HANDLE_BYTES},
    )
    with pytest.raises(TooLarge):
        handle.to_bytes()


def test_the_control_service_owns_the_built_in_commands() -> None:
    assert set(COMMANDS) == {"pause", "resume", "checkpoint", "log-level"}
    assert COMMANDS["pause"].values(None) == {"zkstore.pause": True}
    assert not hasattr(JobStateStore, "set_control")  # ControlStore.set is the one writer


def test_lingering_kinds_are_objects() -> None:
    assert all(isinstance(kind, Kind) for kind in lingering.ALL_KINDS)
    assert tuple(kind.name for kind in lingering.ALL_KINDS) == lingering.KINDS
    assert frozenset(lingering.KINDS) - {"quarantined-job"} == lingering.GARBAGE


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found
