"""A member's view of its assignments (``R/assignments/<id>/<job>``), read anew only where they
may have changed since its last look.

Only the leader creates and deletes assignments (a new attempt on the same member deletes the
old one and creates the new in one transaction) and only the member writes into one (its
``exited``: :meth:`AssignmentView.wrote` keeps what it wrote; :meth:`AssignmentView.forget` comes
first, so a write whose answer was lost is read anew). The watch on the directory reports the
names with the children's version (:class:`zkstore.zookeeper.watch.Listing`: one more per child
created or deleted): if it moved by exactly the names that came and went, every name listed both
times is the node the last look read; otherwise (one deleted and made again, or the directory made
again) all are read again. With many drivers running on a member, a placement or an end costs one
read, not one per driver (``tests/drivers/test_member_reads.py``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from zkstore.errors import CorruptRecord, HandleNotFound
from zkstore.records.fleet_records import Assignment
from zkstore.zookeeper.watch import Listing

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["AssignmentView"]

logger = logging.getLogger(__name__)


class AssignmentView:
    """The assignments in ``directory`` as the member last looked (its loop thread only; the
    watch's reports come through :meth:`listed`)."""

    def __init__(self, zk: ZooKeeper, directory: str) -> None:
        self._zk = zk
        self.directory = directory
        #: the names as the watch last reported them (None: no watch yet); every change is
        #: reported, and each report makes a look, so a look never misses one
        self._listing: Listing | None = None
        self._known: dict[str, Assignment] = {}
        self._known_listing: Listing | None = None

    def listed(self, listing: Listing | None) -> None:
        """The watch reported the names (kazoo's threads): the next look need not list them."""
        self._listing = listing

    def known(self, job_id: str) -> Assignment | None:
        """The job's assignment as the last look read it (or as :meth:`wrote` made it)."""
        return self._known.get(job_id)

    def read(self) -> dict[str, Assignment]:
        """The assignments now, job id to assignment; those unreadable are logged and left
        out (read again by the next look)."""
        listing = self._listing or self._list()
        last, now = self._known_listing, set(listing.names)
        current: dict[str, Assignment] = {}
        if last is not None and last.created == listing.created:
            before = set(last.names)
            if listing.version - last.version == len(now - before) + len(before - now):
                current = {job: a for job, a in self._known.items() if job in now}
        unread = [name for name in listing.names if name not in current]
        paths = [f"{self.directory}/{name}" for name in unread]
        for name, path, item in zip(unread, paths, self._zk.get_many(paths), strict=True):
            if item is None:
                continue  # deleted since the listing: the next listing says so
            try:
                current[name] = Assignment.from_znode(item[0], item[1], path)
            except CorruptRecord as exc:
                logger.warning("ignoring an unreadable assignment: %s", exc)
        self._known, self._known_listing = dict(current), listing
        return current

    def _list(self) -> Listing:
        try:
            names, stat = self._zk.children_and_stat(self.directory)
        except HandleNotFound:
            return Listing([], 0, 0)
        return Listing(sorted(names), stat.cversion, stat.czxid)

    def forget(self, job_id: str) -> None:
        """The member is about to write into the job's assignment: read it anew next time,
        unless :meth:`wrote` says what it became."""
        self._known.pop(job_id, None)

    def wrote(self, job_id: str, assignment: Assignment) -> None:
        """The member wrote ``assignment`` (its version the one ZooKeeper gave it)."""
        self._known[job_id] = assignment
