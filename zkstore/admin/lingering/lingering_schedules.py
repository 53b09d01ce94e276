"""Lingering schedule payloads: a definition under ``S/<cluster>/schedules/<name>/definition/``
that no schedule's spec references (a crash between writing it and publishing the spec, or
between deleting a schedule and discarding its payload); garbage once older than the minimum
age. The spec nodes are read as JSON for their ``definition.uri`` only (this layer sits beside
:mod:`zkstore.schedules`, not above it): a spec that cannot be read keeps every payload of its
schedule (never taken for absent)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from zkstore.admin.lingering.kind import CleanupResult, Finding, Kind, Look
from zkstore.errors import HandleNotFound

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["NAME", "OrphanSchedulePayload"]

NAME = "orphan-schedule-payload"


def _references(cluster: Cluster) -> tuple[set[str], set[str]]:
    """The payload URIs the specs reference, and the schedules whose spec is unreadable."""
    base = cluster.layout.schedules
    try:
        names = cluster.zk.children(base)
    except HandleNotFound:
        return set(), set()
    found = cluster.zk.get_many([f"{base}/{name}" for name in names])
    referenced, unreadable = set(), set()
    for name, item in zip(names, found, strict=True):
        if item is None:
            continue
        try:
            spec: Any = json.loads(item[0])
            uri = spec["definition"]["uri"]
            if not isinstance(uri, str):
                raise TypeError("the definition's uri is not text")
            referenced.add(uri)
        except (ValueError, TypeError, KeyError):
            unreadable.add(name)
    return referenced, unreadable


def _schedule_of(key: str) -> str:
    """``<cluster>/schedules/<name>/definition/<file>`` -> ``<name>``."""
    parts = key.split("/")
    return parts[2] if len(parts) > 3 else "?"


class OrphanSchedulePayload(Kind):
    """A schedule's definition payload that no spec references."""

    name = NAME

    def find(self, look: Look) -> list[Finding]:
        cluster = look.cluster
        objects = cluster.storage.list(cluster.storage_layout.schedules)
        if not objects:
            return []
        referenced, unreadable = _references(cluster)
        found = []
        for item in objects:
            age = look.now - item.modified.timestamp()
            if item.uri in referenced or age < look.min_age:
                continue
            schedule = _schedule_of(cluster.storage.key_of(item.uri))
            if schedule in unreadable:
                continue
            detail = f"definition of schedule {schedule}, referenced by no schedule"
            found.append(self.finding(f"schedule:{schedule}", item.uri, age, item.size, detail))
        return found

    def clean(self, cluster: Cluster, finding: Finding, *, dry_run: bool) -> CleanupResult:
        referenced, unreadable = _references(cluster)
        schedule = _schedule_of(cluster.storage.key_of(finding.target))
        if finding.target in referenced or schedule in unreadable:
            return CleanupResult(finding, "kept", False, note="referenced by a schedule now")
        if not dry_run:
            cluster.storage.discard(finding.target)
        return CleanupResult(finding, "discard payload", not dry_run, freed=finding.size or 0)
