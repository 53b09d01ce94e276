"""Where everything lives: the ZooKeeper paths and object-storage keys of one cluster.

ZooKeeper, under ``R = <root>/<cluster-id>``::

    R/leader/election/<contender>         EPHEMERAL_SEQUENTIAL, one per daemon
    R/leader/info                         EPHEMERAL JSON of the current leader
    R/leader/history                      JSON the last leaders, the daemons seen leaving
    R/fleet                               JSON the fleet protocol the cluster is finalized at
    R/settings                            JSON the leader's bounds and policies (invariant 17)
    R/pools/<name>                        JSON a pool's limit and priority (zkstore pools set)
    R/conditions/jobs/<job>               JSON what the leader does not do for the job, and why
    R/conditions/schedules/<name>         JSON ... for the schedule (zkstore/conditions.py)
    R/currentJobs/<job>                   JSON handle of the job definition
    R/currentJobs/<job>/locks/<owner>     EPHEMERAL lock of a store instance using it
    R/jobs/<job>/status                   JSON status, written by the leader
    R/jobs/<job>/running                  EPHEMERAL JSON, held by the live driver
    R/jobs/<job>/spark                    EPHEMERAL JSON, the live driver's Spark application
    R/jobs/<job>/outcome                  JSON outcome of the last attempt, written by its driver
    R/jobs/<job>/cancel                   JSON cancel request
    R/jobs/<job>/history                  JSON each attempt: where, when, how it ended
    R/jobs/<job>/checkpoints/<%019d>      JSON handle of one checkpoint's metadata
    R/jobs/<job>/control                  JSON dynamic configuration of the job (desired)
    R/jobs/<job>/control-ack              JSON what the live attempt applied, written by its driver
    R/jobs/<job>/control-keys             JSON the keys the job declared, written by its driver
    R/jobs/<job>/resources                JSON executor-resource counts, written by the driver
    R/jobs/<job>/artifacts/<name>         JSON artifact record: URI, scope, attempt, state, keep
    R/results/<job>                       JSON result (DIRTY, then CLEAN)
    R/cleanup/<job>                       present while the job's result is DIRTY (an index)
    R/quarantine/<job>                    JSON reason a job cannot be run
    R/artifact-claims/<family>/<seg>/.../=  JSON claim of a place under an extra artifact root
    R/members/<daemon>                    EPHEMERAL JSON of a daemon: host, slots, labels
    R/drained/<daemon>                    present while a daemon takes no new attempts
    R/assignments/<daemon>/<job>          JSON: the leader placed an attempt on the daemon
    R/schedules/<name>                    JSON schedule spec (its definition's handle inside)
    R/schedules/<name>/state              JSON the windows the leader decided, with a history

Object storage, under ``S/<cluster-id>/schedules/<name>/definition/<uuid>.pkl`` (a schedule's
definition, referenced by its spec node) and ``S/<cluster-id>/jobs/<job>/``:
``definition/<uuid>.pkl``, ``checkpoints/<checkpoint-id>-<uuid>.json``,
``control-history/<version>-<uuid>.json`` and the driver logs of each attempt,
``logs/attempt-<n>/<seq>.log`` (chunks in order) and ``logs/attempt-<n>/end.json`` (written once
the attempt's whole output is stored). Every key names its owner, so a lingering payload is one
under a known prefix that no handle references (logs: that no live job or retention keeps). The
job's records in storage (its control history) are referenced by no handle: they belong to the job
while it lives and go with it (:func:`job_record_dir`). A job's artifacts under the storage root
live apart, under ``S/<cluster-id>/artifacts/<job>/``: they are data, not payloads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from zkstore.config import validate_id
from zkstore.errors import ConfigError, InvalidJobId, ZkStoreError

__all__ = [
    "CHECKPOINT_ID_WIDTH",
    "CONTROL_HISTORY",
    "JOB_RECORD_DIRS",
    "LOG_CHUNK_BYTES",
    "MAX_SCHEDULE_NAME_CHARS",
    "Layout",
    "StorageLayout",
    "checkpoint_node_name",
    "is_checkpoint_node_name",
    "job_record_dir",
    "validate_job_id",
    "validate_schedule_name",
]

#: A schedule's name is a safe id of at most this many characters, so that every run's id (the
#: name and the window's time: :func:`zkstore.schedules.runs.run_id`) is a valid job id (128).
MAX_SCHEDULE_NAME_CHARS = 100


def validate_schedule_name(name: str) -> str:
    """``name`` if it can name a schedule; :class:`ConfigError` (a usage error) if not."""
    if isinstance(name, str) and len(name) > MAX_SCHEDULE_NAME_CHARS:  # before the id's 128
        raise ConfigError(
            f"a schedule name is at most {MAX_SCHEDULE_NAME_CHARS} characters (its runs' job "
            "ids add the window's time)"
        )
    validate_id(name, "schedule name")
    return name


CHECKPOINT_ID_WIDTH = 19
_CHECKPOINT_NAME = re.compile(f"[0-9]{{{CHECKPOINT_ID_WIDTH}}}")


def validate_job_id(job_id: str) -> str:
    """Return ``job_id`` if it is a valid job id, else raise :class:`InvalidJobId`."""
    try:
        return validate_id(job_id, "job id")
    except ZkStoreError as exc:
        raise InvalidJobId(str(exc)) from None


def is_checkpoint_node_name(name: str) -> bool:
    """True for a name :func:`checkpoint_node_name` could have made (and nothing planted)."""
    return _CHECKPOINT_NAME.fullmatch(name) is not None


def checkpoint_node_name(checkpoint_id: int) -> str:
    """The znode name of a checkpoint id: zero-padded so that names sort like numbers."""
    if checkpoint_id < 0:
        raise ValueError("checkpoint ids are non-negative")
    return f"{checkpoint_id:0{CHECKPOINT_ID_WIDTH}d}"


@dataclass(frozen=True)
class Layout:
    """ZooKeeper paths under one cluster root ``R`` (``<root>/<cluster-id>``)."""

    base: str

    @property
    def current_jobs(self) -> str:
        return f"{self.base}/currentJobs"

    @property
    def jobs(self) -> str:
        return f"{self.base}/jobs"

    @property
    def results(self) -> str:
        return f"{self.base}/results"

    @property
    def quarantine(self) -> str:
        return f"{self.base}/quarantine"

    @property
    def cleanup(self) -> str:
        return f"{self.base}/cleanup"

    @property
    def artifact_claims(self) -> str:
        """The tree of claims: which job owns each place under the extra artifact roots."""
        return f"{self.base}/artifact-claims"

    @property
    def schedules(self) -> str:
        """The schedules (:mod:`zkstore.schedules`): one spec node per schedule, its state below."""
        return f"{self.base}/schedules"

    def schedule(self, name: str) -> str:
        """A schedule's spec node (its definition's handle and when it fires)."""
        return f"{self.schedules}/{validate_schedule_name(name)}"

    def schedule_state(self, name: str) -> str:
        """The windows the leader decided for a schedule, with a history."""
        return f"{self.schedule(name)}/state"

    @property
    def notifications(self) -> str:
        """The outbox of notification events (:mod:`zkstore.lifecycle.outbox`)."""
        return f"{self.base}/notifications"

    @property
    def pools(self) -> str:
        """The pools (:mod:`zkstore.cluster.pools`): one record per pool; its own data is
        touched by every change, for the leader's one watch."""
        return f"{self.base}/pools"

    @property
    def settings(self) -> str:
        """The cluster's settings, written by its leader
        (:mod:`zkstore.cluster.cluster_settings`)."""
        return f"{self.base}/settings"

    @property
    def conditions(self) -> str:
        """The conditions of jobs and schedules (:mod:`zkstore.conditions`)."""
        return f"{self.base}/conditions"

    def conditions_of(self, kind: str, name: str) -> str:
        """The conditions of one job (``kind`` ``jobs``) or schedule (``schedules``)."""
        if kind not in ("jobs", "schedules"):
            raise ValueError(f"no conditions of {kind!r}")
        what = "job id" if kind == "jobs" else "schedule name"
        return f"{self.conditions}/{kind}/{validate_id(name, what)}"

    @property
    def election(self) -> str:
        return f"{self.base}/leader/election"

    @property
    def leader_info(self) -> str:
        return f"{self.base}/leader/info"

    @property
    def leader_clock(self) -> str:
        """The node whose write stamps tell a leader ZooKeeper's time
        (:mod:`zkstore.zookeeper.clock`)."""
        return f"{self.base}/leader/clock"

    @property
    def leader_history(self) -> str:
        """The last leaders and the daemons seen leaving (:mod:`zkstore.jobs.history`)."""
        return f"{self.base}/leader/history"

    def job_handle(self, job_id: str) -> str:
        return f"{self.current_jobs}/{validate_job_id(job_id)}"

    def job_dir(self, job_id: str) -> str:
        return f"{self.jobs}/{validate_job_id(job_id)}"

    def status(self, job_id: str) -> str:
        return f"{self.job_dir(job_id)}/status"

    def running(self, job_id: str) -> str:
        return f"{self.job_dir(job_id)}/running"

    def spark(self, job_id: str) -> str:
        return f"{self.job_dir(job_id)}/spark"

    def outcome(self, job_id: str) -> str:
        return f"{self.job_dir(job_id)}/outcome"

    def cancel(self, job_id: str) -> str:
        return f"{self.job_dir(job_id)}/cancel"

    def history(self, job_id: str) -> str:
        """Each attempt of the job, for people (:mod:`zkstore.jobs.history`)."""
        return f"{self.job_dir(job_id)}/history"

    def control(self, job_id: str) -> str:
        return f"{self.job_dir(job_id)}/control"

    def stop(self, job_id: str) -> str:
        """The job is to be stopped (``zkstore jobs stop``; ``resume`` deletes it)."""
        return f"{self.job_dir(job_id)}/stop"

    def end(self, job_id: str) -> str:
        """The leader ended an attempt (timeout, stuck, stop): its member kills the driver."""
        return f"{self.job_dir(job_id)}/end"

    def heartbeat(self, job_id: str) -> str:
        """EPHEMERAL: the live driver's newest ``ctx.heartbeat()``."""
        return f"{self.job_dir(job_id)}/heartbeat"

    def control_ack(self, job_id: str) -> str:
        return f"{self.job_dir(job_id)}/control-ack"

    def control_keys(self, job_id: str) -> str:
        return f"{self.job_dir(job_id)}/control-keys"

    def checkpoints(self, job_id: str) -> str:
        return f"{self.job_dir(job_id)}/checkpoints"

    def resources(self, job_id: str) -> str:
        return f"{self.job_dir(job_id)}/resources"

    def artifacts(self, job_id: str) -> str:
        return f"{self.job_dir(job_id)}/artifacts"

    def artifact(self, job_id: str, name: str) -> str:
        return f"{self.artifacts(job_id)}/{validate_id(name, 'artifact name')}"

    def outputs(self, job_id: str) -> str:
        """The job's committed outputs (zkstore/jobs/outputs/): one node per output, one child
        per commit."""
        return f"{self.job_dir(job_id)}/outputs"

    def output(self, job_id: str, name: str) -> str:
        return f"{self.outputs(job_id)}/{validate_id(name, 'output name')}"

    def result(self, job_id: str) -> str:
        return f"{self.results}/{validate_job_id(job_id)}"

    def quarantine_entry(self, job_id: str) -> str:
        return f"{self.quarantine}/{validate_job_id(job_id)}"

    def cleanup_entry(self, job_id: str) -> str:
        return f"{self.cleanup}/{validate_job_id(job_id)}"

    @property
    def fleet(self) -> str:
        return f"{self.base}/fleet"

    @property
    def members(self) -> str:
        return f"{self.base}/members"

    def member(self, daemon_id: str) -> str:
        return f"{self.members}/{validate_id(daemon_id, 'daemon id')}"

    @property
    def drained(self) -> str:
        return f"{self.base}/drained"

    def drain_mark(self, daemon_id: str) -> str:
        return f"{self.drained}/{validate_id(daemon_id, 'daemon id')}"

    @property
    def assignments(self) -> str:
        return f"{self.base}/assignments"

    def member_assignments(self, daemon_id: str) -> str:
        return f"{self.assignments}/{validate_id(daemon_id, 'daemon id')}"

    def assignment(self, daemon_id: str, job_id: str) -> str:
        return f"{self.member_assignments(daemon_id)}/{validate_job_id(job_id)}"

    def base_paths(self) -> tuple[str, ...]:
        """The persistent parents that must exist before any transaction under them."""
        return (
            self.current_jobs,
            self.jobs,
            self.results,
            self.cleanup,
            self.quarantine,
            self.election,
            self.members,
            self.drained,
            self.assignments,
            self.artifact_claims,
            self.schedules,
            self.leader_clock,  # a leader's clock reads write it, and never create it (deposed)
        )


@dataclass(frozen=True)
class StorageLayout:
    """Object-storage key prefixes (relative to the storage root) of one cluster."""

    cluster_id: str

    @property
    def jobs(self) -> str:
        return f"{self.cluster_id}/jobs"

    @property
    def schedules(self) -> str:
        """Schedules' definitions: ``<schedules>/<name>/definition/<uuid>.pkl``."""
        return f"{self.cluster_id}/schedules"

    def schedule_definitions(self, name: str) -> str:
        """The prefix of a schedule's definition payloads."""
        return f"{self.schedules}/{validate_schedule_name(name)}/definition"

    def job(self, job_id: str) -> str:
        return f"{self.jobs}/{validate_job_id(job_id)}"

    def definitions(self, job_id: str) -> str:
        return f"{self.job(job_id)}/definition"

    def checkpoints(self, job_id: str) -> str:
        return f"{self.job(job_id)}/checkpoints"

    def logs(self, job_id: str) -> str:
        return f"{self.job(job_id)}/logs"

    def attempt_logs(self, job_id: str, attempt: int) -> str:
        if attempt < 1:
            raise ValueError("attempts are numbered from 1")
        return f"{self.logs(job_id)}/attempt-{attempt}"

    def control_history(self, job_id: str) -> str:
        return f"{self.job(job_id)}/{CONTROL_HISTORY}"

    @property
    def all_artifacts(self) -> str:
        return f"{self.cluster_id}/artifacts"

    def artifacts(self, job_id: str) -> str:
        """Where a job's artifacts go under the storage root (apart from its payloads)."""
        return f"{self.all_artifacts}/{validate_job_id(job_id)}"


#: Folders of a job's storage prefix that hold its records rather than payloads: no handle
#: references them; they are the job's for as long as it lives and its cleanup removes them.
#: The biggest driver-log chunk a shipper writes (one PUT on S3); readers refuse bigger objects.
LOG_CHUNK_BYTES = 4 * 1024 * 1024

CONTROL_HISTORY = "control-history"
JOB_RECORD_DIRS = frozenset({CONTROL_HISTORY})


def job_record_dir(key: str) -> str | None:
    """The record folder of a storage key ``<cluster>/jobs/<job>/<folder>/...`` if it is one of
    :data:`JOB_RECORD_DIRS`, else None (a payload)."""
    parts = key.split("/")
    if len(parts) > 4 and parts[1] == "jobs" and parts[3] in JOB_RECORD_DIRS:
        return parts[3]
    return None
