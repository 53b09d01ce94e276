"""Every gated feature of this code, and how the upgrade test proves a mixed fleet safe from it.

A feature of :data:`zkstore.protocol.FEATURES` writes something a daemon of an older protocol
would misread. While such a daemon is in the fleet, the new code either refuses the command that
needs the feature (exit 9, ``FleetVersionError``: "<what> needs the fleet at protocol N"), or
writes what the older protocol wrote instead. :data:`GATED` says which, for each feature: the
command to run (it must be refused while a daemon of the previous release lives), or how the
new code falls back (proved by the jobs the new command line submits into the mixed fleet,
which old daemons run).

A feature missing here fails the upgrade test (and ``tests/upgrade/test_upgrade_harness.py``):
whoever adds a feature adds the command that needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from zkstore.protocol import (
    ARGUMENTS_APART,
    ATTEMPT_PROVENANCE,
    CLUSTER_SETTINGS,
    FEATURES,
    JOB_IDENTITIES,
    OUTPUTS,
    PINNED_REQUESTS,
    POOLS,
    RUN_SPEC,
    Feature,
)

__all__ = [
    "GATED",
    "FallsBack",
    "Refused",
    "Targets",
    "UntestedFeature",
    "newer_than",
    "refusal_problem",
    "untested",
]


@dataclass(frozen=True)
class Targets:
    """What a command may act on: a running job, the stopped one, the workload's file."""

    running_job: str
    stopped_job: str
    workload: Path
    out: Path


@dataclass(frozen=True)
class Refused:
    """The command (``zkstore`` arguments) that needs the feature: refused, changing nothing,
    while the fleet is below the feature's protocol."""

    command: Callable[[Targets], list[str]]


@dataclass(frozen=True)
class FallsBack:
    """No command is refused: until the fleet allows the feature, the new code writes what
    the older protocol wrote (``how``)."""

    how: str


GATED: Mapping[str, Refused | FallsBack] = {
    ARGUMENTS_APART: FallsBack(
        "submit and jobs resume --definition keep a function job's arguments inside its "
        "pickled code, as protocol 1 did"
    ),
    JOB_IDENTITIES: FallsBack(
        "a daemon gives its drivers the cluster's ZooKeeper identity, as protocol 2 did (the "
        "nodes it makes carry the jobs' ACL entries either way: only an older daemon's lack "
        "them, and the member grants them before a driver of its own identity starts)"
    ),
    ATTEMPT_PROVENANCE: FallsBack(
        "the leader records each attempt's placement without its definition's digest and "
        "target, as protocol 2 did (jobs show and the page then say nothing of which code an "
        "attempt ran)"
    ),
    CLUSTER_SETTINGS: FallsBack(
        "the leader writes neither R/settings nor conditions, as protocol 3 did: clients check "
        "schedules and notifications against their own environment, and what the leader does "
        "not do is said in its log only"
    ),
    RUN_SPEC: FallsBack(
        "submit writes a job's requirements and Spark settings as the texts protocol 3 read "
        "(require, conf), which this code parses into the same run options"
    ),
    OUTPUTS: FallsBack(
        "no job writes an output: ctx.outputs.stage raises FleetVersionError in the job (its "
        "attempt fails, saying to finalize the fleet) and nothing of it is written"
    ),
    POOLS: Refused(lambda _: ["pools", "set", "upgrade", "--max-running", "1"]),
    PINNED_REQUESTS: FallsBack(
        "jobs cancel, jobs stop, a schedule's replaced run and the leader's end of an attempt "
        "write their request without its pin, as protocol 4 did (a job's own identity can then "
        "delete it); a request that has one is deleted with it, pin first, by this code only"
    ),
}


class UntestedFeature(Exception):
    """A feature of this code with no entry in :data:`GATED`."""


def untested() -> list[str]:
    """The features of this code that :data:`GATED` does not cover, one line each."""
    return [
        f"feature {name!r} (protocol {feature.protocol}: {feature.what}) has no entry in "
        "zkstore_dev/upgrade/features.py GATED: add the command that needs it (or how the "
        "new code falls back without it)"
        for name, feature in FEATURES.items()
        if name not in GATED
    ]


def newer_than(protocol: int) -> list[tuple[Feature, Refused | FallsBack]]:
    """The features newer than ``protocol`` (the previous release's), each with its entry;
    raises :class:`UntestedFeature` if one has none."""
    missing = untested()
    if missing:
        raise UntestedFeature("; ".join(missing))
    return [
        (feature, GATED[name])
        for name, feature in sorted(FEATURES.items())
        if feature.protocol > protocol
    ]


def refusal_problem(feature: Feature, returncode: int, stderr: str) -> str | None:
    """What is wrong with the answer to a command that needs ``feature`` in a fleet below its
    protocol (None: refused as it must be, exit 9 with its one-line reason)."""
    lines = stderr.strip().splitlines()
    wanted = f"needs the fleet at protocol {feature.protocol}"
    if returncode != 9:
        return f"exit {returncode}, not 9 ({lines[-1] if lines else 'no message'})"
    if not lines or wanted not in lines[-1]:
        return f"exit 9 but its message does not say {wanted!r}: {lines[-1] if lines else ''}"
    return None
