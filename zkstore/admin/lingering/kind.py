"""What every kind of lingering state is: an object that finds its findings and cleans one up.

A kind is added by writing one :class:`Kind` (its name, whether it is garbage, how to find it,
how to clean one after a re-check) and listing it in :data:`zkstore.admin.lingering.KINDS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from zkstore.admin.inventory import Inventory
from zkstore.payloads.storage import StoredObject
from zkstore.records.job_states import DIRTY

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["CleanupResult", "Finding", "Kind", "Look", "owned"]


@dataclass(frozen=True)
class Finding:
    """One piece of lingering state. ``target`` is a znode path or a payload URI; ``garbage``
    findings are what ``handles cleanup`` removes, the others are for people to decide."""

    kind: str
    job_id: str
    target: str
    age: float
    size: int | None = None
    detail: str = ""
    garbage: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "age": round(self.age, 1)}


@dataclass(frozen=True)
class CleanupResult:
    """What cleanup did with one finding."""

    finding: Finding
    action: str
    done: bool
    freed: int = 0
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.finding.as_dict(),
            "action": self.action,
            "done": self.done,
            "freed": self.freed,
            "note": self.note,
        }


@dataclass
class Look:
    """One look at a cluster, shared by every kind: the inventory of ZooKeeper, the listing of
    the jobs' storage, the time, the minimum age; ``memo`` holds reads two kinds share."""

    cluster: Cluster
    inventory: Inventory
    objects: list[StoredObject]
    now: float
    min_age: float
    memo: dict[str, Any] = field(default_factory=dict)


class Kind(ABC):
    """One kind of lingering state."""

    #: the name its findings carry (``handles lingering`` shows it, ``--kind`` selects it)
    name: ClassVar[str]
    #: garbage is removed by ``handles cleanup`` (past the minimum age); the rest is reported
    garbage: ClassVar[bool] = True

    @abstractmethod
    def find(self, look: Look) -> list[Finding]:
        """Every finding of this kind in ``look`` (garbage kinds: only past its minimum age)."""

    def clean(self, cluster: Cluster, finding: Finding, *, dry_run: bool) -> CleanupResult:
        """Re-check ``finding`` against ZooKeeper just before acting, then remove it (unless
        ``dry_run``), or say why it is kept. Raises :class:`~zkstore.errors.StoreUnavailable`
        in an outage; any other zkstore error is reported by the caller as a failed cleanup."""
        return CleanupResult(finding, "kept", False, note="not garbage: for people to decide")

    def finding(
        self, job_id: str, target: str, age: float, size: int | None = None, detail: str = ""
    ) -> Finding:
        return Finding(self.name, job_id, target, age, size, detail, self.garbage)


def owned(inventory: Inventory, job: str) -> bool:
    """The job still owns its records: it is current, quarantined, or its cleanup (which
    takes them) is unfinished."""
    result = inventory.results.get(job)
    return (
        job in inventory.current_jobs
        or job in inventory.quarantine
        or (result is not None and result.state == DIRTY)
    )
