"""``R/jobs/<job>/resources``: how a job's executor-side resources are doing, per attempt.

The driver of the running attempt owns this record: it writes the per-resource counts it has
received from its executors (opens, closes, failed opens, uses), fenced on its attempt, so a
driver that lost its standing cannot overwrite its successor's report. The record goes away with
the job's other records (cleanup deletes ``R/jobs/<job>``); a crashed attempt's last report stays
until the next attempt's driver overwrites it, and says which attempt it belongs to.

What the counts mean (and what they cannot know) is the runtime's business: see
``recovery/executor``. Here they are just non-negative integers under a resource name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zkstore.config import validate_id
from zkstore.errors import SerializationError, ZkStoreError
from zkstore.layout import Layout
from zkstore.records.record import Record
from zkstore.records.strict import utc_now
from zkstore.zookeeper.ops import Create, Fence, SetData

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["COUNTS", "MAX_RESOURCES", "ResourceReport", "ResourceReports"]

#: the counts of one resource, in the order they are shown
COUNTS = ("opens", "closes", "failed_opens", "uses")
#: a job declares at most this many resources, which keeps the record far under 64 KB
MAX_RESOURCES = 64


@dataclass(frozen=True)
class ResourceReport(Record):
    """Counts of each resource of ``attempt``, as its driver last saw them.

    ``final`` is set by the driver's last write, once the job function has returned: the counts
    no longer change for that attempt (a close that happens after the last task is never among
    them, see ``recovery/executor``).
    """

    attempt: int = 0
    updated: str = ""
    final: bool = False
    resources: dict[str, Any] = field(default_factory=dict)

    times = frozenset({"updated"})

    @classmethod
    def build(
        cls, attempt: int, counts: dict[str, dict[str, int]], *, final: bool
    ) -> ResourceReport:
        return cls(version=None, attempt=attempt, updated=utc_now(), final=final, resources=counts)

    def problem(self) -> str | None:
        return _invalid_counts(self.resources)


def _invalid_counts(resources: dict[str, Any]) -> str | None:
    """Why ``resources`` is not ``{name: {count: int >= 0}}``, or None if it is."""
    if len(resources) > MAX_RESOURCES:
        return f"{len(resources)} resources, over {MAX_RESOURCES}"
    for name, counts in resources.items():
        try:
            validate_id(name, "resource name")
        except ZkStoreError:
            return f"bad resource name {name[:40]!r}"
        if not isinstance(counts, dict) or sorted(counts) != sorted(COUNTS):
            return f"resource {name!r} does not have exactly {', '.join(COUNTS)}"
        if any(type(value) is not int or value < 0 for value in counts.values()):
            return f"resource {name!r} has a count that is not a non-negative integer"
    return None


class ResourceReports:
    """Read and write ``R/jobs/<job>/resources`` of one job."""

    def __init__(self, zk: ZooKeeper, layout: Layout, job_id: str) -> None:
        self.zk = zk
        self.path = layout.resources(job_id)

    def read(self) -> ResourceReport | None:
        """The last report, or None; raises :class:`CorruptRecord` if it does not parse."""
        found = self.zk.get_if_exists(self.path)
        return None if found is None else ResourceReport.from_znode(*found, self.path)

    def write(self, report: ResourceReport, *, fence: Fence) -> None:
        """Replace the report (whatever it held: the driver owns it), fenced on the attempt.

        The write is versioned on what was there a moment ago, so a concurrent writer makes it
        fail (:class:`VersionConflict`, :class:`HandleExists`) instead of being overwritten.
        Raises the fence's error once the attempt has lost its standing; writes nothing then.
        """
        problem = _invalid_counts(report.resources)
        if problem is not None:
            raise SerializationError(f"invalid resource report: {problem}")
        data = report.to_bytes()
        stat = self.zk.exists(self.path)
        if stat is None:
            self.zk.commit([Create(self.path, data)], fence=fence)
        else:
            self.zk.commit([SetData(self.path, data, stat.version)], fence=fence)
