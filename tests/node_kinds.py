"""The node kinds of the ZooKeeper layout (docs/design.md), as the tests plant and parse them:
for each kind whose data is read, its path in the :class:`~zkstore.layout.Layout`, its one
parser, and the bytes its own writer writes; the kinds whose data nobody reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zkstore.cluster.cluster_settings import ClusterSettings
from zkstore.cluster.fleet_protocol import FleetRecord
from zkstore.conditions import Condition, Conditions
from zkstore.jobs.claims import Claim
from zkstore.jobs.control.control_records import ControlAck, ControlKeys, KeyDecision
from zkstore.jobs.control.values import DeclaredKey
from zkstore.jobs.history import AttemptEntry, JobHistory, LeaderHistory
from zkstore.jobs.job_artifacts import Artifact
from zkstore.jobs.outputs.output_records import Output, OutputCommit
from zkstore.jobs.resources import ResourceReport
from zkstore.jobs.stops import EndRequest, Heartbeat, StopRequest
from zkstore.records.fleet_records import Assignment, DrainMark, LeaderInfo, MemberInfo
from zkstore.records.handle import Handle
from zkstore.records.job_records import (
    CancelRequest,
    ControlObject,
    JobStatus,
    Outcome,
    RunningInfo,
    SparkApp,
)
from zkstore.records.record import Record
from zkstore.records.result_records import JobResult, QuarantineEntry
from zkstore.records.strict import parse_time, utc_now
from zkstore.schedules.schedule_records import HistoryEntry, ScheduleSpec, ScheduleState

NOW = utc_now()
MOMENT = parse_time(NOW)
HANDLE = Handle(
    uri="file:///s/c/jobs/j/definition/0123.pkl",
    size=120,
    sha256="ab" * 32,
    created=NOW,
    writer="w-1",
    hmac="cd" * 32,
    summary={"name": "j", "kind": "function", "max_attempts": 3, "submitted": NOW},
)
CHECKPOINT = Handle(
    uri="file:///s/c/jobs/j/checkpoints/1-0123.json",
    size=12,
    sha256="ef" * 32,
    created=NOW,
    writer="w-1",
    summary={"checkpoint_id": 1, "job_id": "j", "control_version": 2},
)


def _record(kind: type[Record], **values: Any) -> Record:
    return kind(version=None, **values)


#: Each node kind of the layout whose data is read: (path in the layout, its parser, the bytes
#: its writer writes).
PARSED: dict[str, tuple[str, Callable[[bytes, str], object], bytes]] = {
    "leader/info": (
        "leader_info",
        lambda data, path: LeaderInfo.from_znode(data, None, path),
        _record(
            LeaderInfo,
            daemon_id="d1",
            host="h",
            pid=4242,
            since=NOW,
            contender="d1-" + "0" * 32 + "-n_0000000001",
            recovered=NOW,
        ).to_bytes(),
    ),
    "leader/history": (
        "leader_history",
        lambda data, path: LeaderHistory.from_znode(data, None, path),
        _record(
            LeaderHistory,
            terms={"d1-" + "0" * 32 + "-n_0000000001": {"leader": "d1", "since": NOW}},
            departed={"d2": NOW},
        ).to_bytes(),
    ),
    "members": (
        "member",
        lambda data, path: MemberInfo.from_znode(data, None, path),
        _record(
            MemberInfo, daemon_id="d1", host="h", pid=1, slots=4, started=NOW, labels={"gpu": "a"}
        ).to_bytes(),
    ),
    "fleet": (
        "fleet",
        lambda data, path: FleetRecord.from_znode(data, None, path),
        _record(FleetRecord, current=1, since=NOW, by="zkstore 0.2.0 on h").to_bytes(),
    ),
    "settings": (
        "settings",
        lambda data, path: ClusterSettings.from_znode(data, None, path),
        ClusterSettings(version=None, notify_allowed_hosts=("127.0.0.1", "10.0.0.0/8"))
        .sealed("d1", b"k" * 32)
        .to_bytes(),
    ),
    "conditions": (
        "conditions_of",
        lambda data, path: Conditions.from_znode(data, None, path),
        Conditions(version=None)
        .holding(
            Condition("CannotFire", "UnderMinimumInterval", "cannot fire: its windows", MOMENT)
        )
        .to_bytes(),
    ),
    "drained": (
        "drain_mark",
        lambda data, path: DrainMark.from_znode(data, None, path),
        _record(DrainMark, since=NOW).to_bytes(),
    ),
    "assignments": (
        "assignment",
        lambda data, path: Assignment.from_znode(data, None, path),
        _record(
            Assignment, job_id="j", daemon_id="d1", attempt=2, status_version=7, assigned=NOW
        ).to_bytes(),
    ),
    "currentJobs handle": (
        "job_handle",
        lambda data, path: Handle.from_znode(data, None, path),
        HANDLE.to_bytes(),
    ),
    "status": (
        "status",
        lambda data, path: JobStatus.from_znode(data, None, path),
        _record(
            JobStatus,
            state="RESTARTING",
            attempt=2,
            failures=1,
            lost=1,
            updated=NOW,
            not_before=NOW,
            last_error="Traceback:\n  boom",
            daemon_id="d1",
        ).to_bytes(),
    ),
    "history": (
        "history",
        lambda data, path: JobHistory.from_znode(data, None, path),
        _record(JobHistory)
        .with_entry(AttemptEntry(1, "d1", MOMENT, "LOST", MOMENT, "killed by signal 9"))  # type: ignore[attr-defined]
        .with_entry(AttemptEntry(2, "d2", MOMENT))
        .to_bytes(),
    ),
    "running": (
        "running",
        lambda data, path: RunningInfo.from_znode(data, None, path),
        _record(RunningInfo, attempt=2, host="h", pid=99, started=NOW, log="file:///l").to_bytes(),
    ),
    "spark": (
        "spark",
        lambda data, path: SparkApp.from_znode(data, None, path),
        _record(
            SparkApp,
            attempt=2,
            app_id="local-1",
            master="local[2]",
            ui="http://h:4040",
            started=NOW,
        ).to_bytes(),
    ),
    "resources": (
        "resources",
        lambda data, path: ResourceReport.from_znode(data, None, path),
        ResourceReport.build(
            2, {"db": {"opens": 2, "closes": 1, "failed_opens": 0, "uses": 10}}, final=False
        ).to_bytes(),
    ),
    "outcome": (
        "outcome",
        lambda data, path: Outcome.from_znode(data, None, path),
        _record(Outcome, attempt=2, outcome="FAILED", finished=NOW, error="x\ny").to_bytes(),
    ),
    "cancel": (
        "cancel",
        lambda data, path: CancelRequest.from_znode(data, None, path),
        _record(CancelRequest, requested=NOW, by="me@h", reason="enough").to_bytes(),
    ),
    "stop": (
        "stop",
        lambda data, path: StopRequest.from_znode(data, None, path),
        _record(
            StopRequest, requested=NOW, by="me@h", checkpoint=True, token="t1", timeout_ms=1000
        ).to_bytes(),
    ),
    "end": (
        "end",
        lambda data, path: EndRequest.from_znode(data, None, path),
        _record(
            EndRequest, attempt=2, reason="TIMED_OUT", requested=NOW, grace_ms=5000, detail="x"
        ).to_bytes(),
    ),
    "heartbeat": (
        "heartbeat",
        lambda data, path: Heartbeat.from_znode(data, None, path),
        _record(Heartbeat, attempt=2, at=NOW, beats=3).to_bytes(),
    ),
    "control": (
        "control",
        lambda data, path: ControlObject.from_znode(data, None, path),
        _record(
            ControlObject, values={"rate": 2, "mode": "fast", "zkstore.pause": True}
        ).to_bytes(),
    ),
    "control-ack": (
        "control_ack",
        lambda data, path: ControlAck.from_znode(data, None, path),
        ControlAck.build(
            attempt=2,
            applied_version=3,
            updated=NOW,
            values={"rate": 2},
            decisions={"mode": KeyDecision("rejected", "slow", "no")},
            paused_since=None,
        ).to_bytes(),
    ),
    "control-keys": (
        "control_keys",
        lambda data, path: ControlKeys.from_znode(data, None, path),
        ControlKeys.build(
            attempt=2, declared=NOW, keys={"rate": DeclaredKey("int", False)}
        ).to_bytes(),
    ),
    "checkpoints": (
        "checkpoints",
        lambda data, path: Handle.from_znode(data, None, path),
        CHECKPOINT.to_bytes(),
    ),
    "artifacts": (
        "artifact",
        lambda data, path: Artifact.from_znode(data, None, path),
        _record(
            Artifact,
            name="staging",
            uri="file:///s/c/artifacts/j/staging",
            scope="job",
            attempt=2,
            state="finished",
            keep=True,
            registered=NOW,
            finished=NOW,
        ).to_bytes(),
    ),
    "outputs": (
        "output",
        lambda data, path: Output.from_znode(data, None, path),
        _record(
            Output,
            name="planted",
            uri="file:///s/c/artifacts/j/output.planted",
            artifact="output.planted",
            created=NOW,
        ).to_bytes(),
    ),
    "output commits": (
        "output",  # R/jobs/<job>/outputs/<name>/<%019d> (zkstore.jobs.outputs)
        lambda data, path: OutputCommit.from_znode(data, None, path),
        _record(
            OutputCommit,
            output="planted",
            commit=1,
            attempt=2,
            parts=["attempt-2/day=1"],
            committed=NOW,
        ).to_bytes(),
    ),
    "artifact claims": (
        "artifact_claims",  # R/artifact-claims/<family>/<seg>/.../= (zkstore.jobs.claims)
        lambda data, path: Claim.from_znode(data, None, path),
        _record(
            Claim,
            job="j",
            name="out",
            uri="file:///scratch/reports/2026",
            claimed=NOW,
        ).to_bytes(),
    ),
    "results": (
        "result",
        lambda data, path: JobResult.from_znode(data, None, path),
        _record(
            JobResult,
            job_id="j",
            state="CLEAN",
            outcome="CANCELLED",
            attempts=2,
            finished=NOW,
            summary=dict(HANDLE.summary),
            cancel={"requested": NOW, "by": "me@h", "reason": None},
            logs_until=NOW,
            outputs={"out": "file:///o"},
        ).to_bytes(),
    ),
    "quarantine": (
        "quarantine_entry",
        lambda data, path: QuarantineEntry.from_znode(data, None, path),
        _record(
            QuarantineEntry,
            job_id="j",
            reason="broken:\n  why",
            since=MOMENT,
            handle=HANDLE,
        ).to_bytes(),
    ),
    "schedules": (
        "schedule",  # zkstore.layout.Layout.schedule
        lambda data, path: ScheduleSpec.from_znode(data, None, path),
        _record(
            ScheduleSpec,
            name="nightly",
            created=MOMENT,
            definition=HANDLE,
            cron="30 2 * * *",
            timezone="Europe/Berlin",
            concurrency="forbid",
            catchup="3",
            start_at=parse_time("2026-11-24T00:00:00Z"),
            paused=True,
            paused_at=MOMENT,
            after_schedule="extract",
        ).to_bytes(),
    ),
    "schedule state": (
        "schedule_state",
        lambda data, path: ScheduleState.from_znode(data, None, path),
        _record(
            ScheduleState,
            updated=MOMENT,
            last=parse_time("2026-11-24T02:30:00Z"),
            last_run="nightly-20261124T013000Z",
            fired=1,
            missed=2,
            history=(
                HistoryEntry(
                    parse_time("2026-11-22T01:30:00Z"),
                    "missed",
                    through=MOMENT,
                    count=2,
                    reason="r",
                ),
                HistoryEntry(
                    parse_time("2026-11-24T01:30:00Z"), "fired", job="nightly-20261124T013000Z"
                ),
            ),
        ).to_bytes(),
    ),
}

#: Nodes whose data nobody reads: only their presence (or their name) counts.
PRESENCE_ONLY = {
    "election": "a contender: its name orders it, its data is for people",
    "cleanup_entry": "the cleanup index: present iff the job's result is DIRTY",
    "locks": "R/currentJobs/<job>/locks and its EPHEMERAL children: present while used",
    "leader_clock": (
        "its write stamps are ZooKeeper's time (zkstore/zookeeper/clock.py); its data is empty"
    ),
}

#: Layout methods that name parents of many nodes, not a node kind of their own.
PARENTS = {
    "conditions",
    "current_jobs",
    "jobs",
    "results",
    "quarantine",
    "cleanup",
    "job_dir",
    "artifacts",
    "outputs",
    "members",
    "drained",
    "assignments",
    "member_assignments",
    "base_paths",
    "schedules",
    "pools",
    "notifications",
}
