"""Taking a daemon's id: its member record ``R/members/<id>``, EPHEMERAL in its session.

The record is held by one session at a time. A daemon started with an id finds it free (it
takes it), held by a live daemon (a second daemon with that id: refused), or held by the
session of an earlier incarnation that has not expired yet (a restart right after a crash:
SIGKILL, OOM kill). That last one must never make a restart fail, and should not make it
wait when it can be proven dead:

- **proven dead**: the record names this host and this boot, and no process with its pid and
  start time is alive (:mod:`recovery.shared.processes`). Its record is deleted at once and ours
  made: an ephemeral node only outlives its process until its session expires, and a dead
  process can no longer act on anything, so removing its record earlier changes nothing but
  the wait (its drivers have sessions of their own and go on; they are adopted). The delete
  is conditional on the version read; what is left is a second live daemon with this id
  creating its own record in the milliseconds between the old session's expiry and that
  delete, which is the misconfiguration this check exists to refuse.
- **alive**, on this host and boot, with that start time: a second daemon with this id,
  refused (:class:`DuplicateMember`, a usage error: exit 2).
- **anything it cannot check** (another host, another boot, a record of an earlier version
  without a start time, an unreadable one): waited for until its session ends (at most the
  session timeout after that daemon stopped), with a progress line every few seconds; never an
  exit for it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from recovery.shared import processes
from recovery.shared.processes import Liveness, ProcessIdentity
from zkstore.errors import ConfigError, ConflictError, CorruptRecord, HandleExists, HandleNotFound
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.handle import ZnodeStatLike
from zkstore.records.strict import time_text
from zkstore.zookeeper.zk import ZooKeeper, is_own_ephemeral

logger = logging.getLogger(__name__)

#: Seconds between two progress lines while waiting for the session of an earlier holder of
#: this daemon's id to end.
PROGRESS_EVERY = 5.0


class DuplicateMember(ConfigError):
    """Another live daemon holds this daemon id."""


def take_id(
    zk: ZooKeeper, path: str, info: MemberInfo, stop: threading.Event | None = None
) -> bool:
    """Create the member record ``info`` at ``path`` in this session (or find it ours).

    Returns False if ``stop`` was set while waiting for an earlier holder to go. Raises
    :class:`DuplicateMember` for a live holder on this host, and, with ``stop`` None (no way to
    wait: a re-registration on the daemon's loop), for a holder it cannot check.
    """
    waited_since: float | None = None
    while True:
        try:
            zk.create(path, info.to_bytes(), ephemeral=True)
            return True
        except HandleExists:
            found = zk.get_if_exists(path)
        if found is None:
            continue  # gone meanwhile
        if is_own_ephemeral(found[1], zk):
            return True
        holder = _holder(found[0], found[1], path)
        liveness = processes.probe(_identity(holder)) if holder else Liveness.UNKNOWN
        if liveness is Liveness.ALIVE or (liveness is Liveness.UNKNOWN and stop is None):
            raise DuplicateMember(_in_use(info.daemon_id, holder, liveness))
        if liveness is Liveness.DEAD:
            assert holder is not None
            logger.warning(
                "daemon id %s: its earlier daemon (pid %d on this host, since %s) is gone; "
                "removing its member record now instead of waiting for its session to expire",
                info.daemon_id,
                holder.pid,
                time_text(holder.started),
            )
            with contextlib.suppress(HandleNotFound, ConflictError):
                zk.delete(path, version=found[1].version)
            continue
        assert stop is not None
        waited_since = _wait(zk, path, info.daemon_id, holder, waited_since, stop)
        if stop.is_set():
            return False


def _holder(data: bytes, stat: ZnodeStatLike, path: str) -> MemberInfo | None:
    try:
        return MemberInfo.from_znode(data, stat, path)
    except CorruptRecord:
        return None


def _identity(info: MemberInfo) -> ProcessIdentity:
    return ProcessIdentity(info.host, info.pid, info.start_ticks, info.boot_id)


def _in_use(daemon_id: str, holder: MemberInfo | None, liveness: Liveness) -> str:
    who = (
        f" (host {holder.host}, pid {holder.pid}, since {time_text(holder.started)})"
        if holder
        else ""
    )
    where = "on this host" if liveness is Liveness.ALIVE else "elsewhere"
    return (
        f"daemon id {daemon_id!r} is in use by another live daemon {where}{who}: give this "
        "one another --id"
    )


def _wait(
    zk: ZooKeeper,
    path: str,
    daemon_id: str,
    holder: MemberInfo | None,
    since: float | None,
    stop: threading.Event,
) -> float:
    """Wait (up to a progress interval) for the record at ``path`` to go, saying so; returns
    when the whole wait began."""
    now = time.monotonic()
    who = (
        f"pid {holder.pid} on host {holder.host} (since {time_text(holder.started)})"
        if holder is not None
        else "an unreadable member record"
    )
    if since is None:
        since = now
        logger.warning(
            "daemon id %s is held by the session of %s, which this host cannot check: waiting "
            "for that session to end (at most the session timeout after its daemon stopped)",
            daemon_id,
            who,
        )
    else:
        logger.warning(
            "daemon id %s: still waiting for the session of %s to end (%.0f s)",
            daemon_id,
            who,
            now - since,
        )
    gone = threading.Event()
    if zk.exists(path, watch=lambda _: gone.set()) is None:
        return since
    end = now + PROGRESS_EVERY
    while not gone.is_set() and not stop.is_set() and time.monotonic() < end:
        gone.wait(0.2)
    return since
