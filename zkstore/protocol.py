"""The fleet protocol: which records this code writes and reads, and how a record says it is newer.

A *protocol* is a number that grows each time a release writes something an older daemon would
misread: a new kind of node, a new value of a field (a new job state), a new handle format, new
ACLs. Every daemon says in its member record the protocol it speaks (:data:`PROTOCOL`) and the
oldest it can still serve (:data:`MIN_PROTOCOL`); the cluster's own protocol, ``R/fleet``
(:mod:`zkstore.cluster.fleet_protocol`), says which features the fleet may use. A feature of
protocol N (:data:`FEATURES`) is used only once the fleet is at N or above, so nothing is written
that a live daemon cannot read.

A record written with a feature past protocol 1 says so: a field ``"protocol": N`` in a JSON
record, ``"format": N`` above :data:`zkstore.records.handle.FORMAT` in a handle. A reader that
speaks less raises :class:`~zkstore.errors.NewerRecord` for it (a kind of
:class:`~zkstore.errors.CorruptRecord`, so that every reader that survives garbage survives it;
those that would act on garbage, by quarantining or deleting, leave it alone and report the job
as needing a newer daemon).

Within one protocol, a newer writer may add optional fields: every parser ignores fields it does
not know and keeps the defaults of fields that are missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zkstore.errors import NewerRecord

__all__ = [
    "ARGUMENTS_APART",
    "ATTEMPT_PROVENANCE",
    "CLUSTER_SETTINGS",
    "FEATURES",
    "FIELD",
    "JOB_IDENTITIES",
    "MAX_PROTOCOL",
    "MIN_PROTOCOL",
    "OUTPUTS",
    "PINNED_REQUESTS",
    "POOLS",
    "PROTOCOL",
    "RUN_SPEC",
    "Feature",
    "check_record",
    "describe",
    "speaks",
]

#: The fleet protocol this code speaks (writes, once the fleet allows it).
PROTOCOL = 5
#: The oldest fleet protocol this code can serve (run in, writing that protocol's records).
MIN_PROTOCOL = 1
#: The field that marks a JSON record written with a feature past protocol 1.
FIELD = "protocol"
#: A mark above this is garbage, not a newer writer's (a protocol grows by one a release).
MAX_PROTOCOL = 1000


@dataclass(frozen=True)
class Feature:
    """Something that writes records an older daemon would misread: used from ``protocol`` on.
    ``what`` names it for people (the refusal says "``what`` needs the fleet at protocol N")."""

    name: str
    protocol: int
    what: str


ARGUMENTS_APART = "arguments-apart"
JOB_IDENTITIES = "job-identities"
ATTEMPT_PROVENANCE = "attempt-provenance"
CLUSTER_SETTINGS = "cluster-settings"
RUN_SPEC = "run-spec"
OUTPUTS = "outputs"
POOLS = "pools"
PINNED_REQUESTS = "pinned-requests"

#: Every feature gated on the fleet's protocol, by name.
FEATURES: dict[str, Feature] = {
    # A function job's arguments pickled apart from its function (JobDefinition.arguments):
    # a driver of protocol 1 would unpack the function alone as (function, args).
    ARGUMENTS_APART: Feature(
        ARGUMENTS_APART,
        2,
        "a function job's arguments pickled apart from its code (jobs resume --definition "
        "keeping a function job's arguments)",
    ),
    # Drivers authenticated as their job (zkstore.zookeeper.identity), not as the cluster: a node
    # made by a daemon of protocol 2 carries no ACL entry for the job, and its driver could not
    # write its own records there.
    JOB_IDENTITIES: Feature(
        JOB_IDENTITIES,
        3,
        "drivers with ZooKeeper identities of their own job (per-job ACLs)",
    ),
    # Each attempt's definition (digest, what it runs) in the job's history: a daemon of
    # protocol 2 refuses a history entry with fields it does not know as garbage.
    ATTEMPT_PROVENANCE: Feature(
        ATTEMPT_PROVENANCE,
        3,
        "each attempt's definition in the job's history (which code an attempt ran)",
    ),
    # The leader's settings in R/settings, and the conditions it keeps on jobs and schedules
    # (R/jobs/<job>/conditions, R/schedules/<name>/conditions): new nodes a daemon of protocol
    # 3 lists among a job's or a schedule's records and does not know.
    CLUSTER_SETTINGS: Feature(
        CLUSTER_SETTINGS,
        4,
        "the cluster's published settings and the conditions on jobs and schedules",
    ),
    # A job's run options as one typed summary field (zkstore.jobs.runspec), without the
    # display texts: a daemon of protocol 3 would place the job ignoring its requirements.
    RUN_SPEC: Feature(RUN_SPEC, 4, "a job's run options as one typed field of its handle"),
    # Outputs committed with checkpoints (zkstore/jobs/outputs/): a leader of protocol 3 would
    # neither delete an attempt's uncommitted staging nor keep the manifest at the job's end.
    OUTPUTS: Feature(OUTPUTS, 4, "outputs committed with checkpoints (ctx.outputs)"),
    # Pools (zkstore.cluster.pools): a leader of protocol 3 would place a pooled job ignoring
    # its pool's limit, so the pools' commands and --pool are refused until the fleet is at 4.
    POOLS: Feature(POOLS, 4, "pools (zkstore pools, submit --pool)"),
    # A job's cancel, stop and end requests pinned (zkstore.lifecycle.request_pins): a daemon or
    # command line of protocol 4 deletes one with a single Delete (resume, an attempt's end
    # recorded), which ZooKeeper refuses for a node with a child.
    PINNED_REQUESTS: Feature(
        PINNED_REQUESTS,
        5,
        "cancel, stop and end requests pinned so that a job's own identity cannot delete them",
    ),
}


def speaks(protocol: int) -> bool:
    """True if this code can serve a fleet at ``protocol``."""
    return MIN_PROTOCOL <= protocol <= PROTOCOL


def describe() -> str:
    """``fleet protocol 1`` or ``fleet protocol 3, serves 2-3``: what ``--version`` says."""
    if MIN_PROTOCOL == PROTOCOL:
        return f"fleet protocol {PROTOCOL}"
    return f"fleet protocol {PROTOCOL}, serves {MIN_PROTOCOL}-{PROTOCOL}"


def check_record(raw: Mapping[str, Any], path: str, *, field: str = FIELD) -> None:
    """Raise :class:`~zkstore.errors.NewerRecord` if ``raw`` (a parsed JSON record) says it was
    written at a protocol above :data:`PROTOCOL`; a missing or malformed marker is the record
    parser's business."""
    written = raw.get(field)
    if (
        isinstance(written, int)
        and not isinstance(written, bool)
        and PROTOCOL < written <= MAX_PROTOCOL
    ):
        raise NewerRecord(
            f"{path}: written at fleet protocol {written}; this zkstore speaks {PROTOCOL} "
            "(needs a newer daemon)",
            protocol=written,
        )
