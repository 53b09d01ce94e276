"""The control service: what ``zkstore control`` and the HTTP API's control routes do, once.

The built-in commands (pause, resume, checkpoint, log level) are defined here and nowhere else:
the values each one stores and, for ``--wait``, what acknowledgement means it was done. Every
change goes through :meth:`ControlStore.set <zkstore.jobs.control.ControlStore.set>` (checked
against the declared keys, a compare-and-set, recorded in the job's history), with who made it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zkstore.errors import ConfigError
from zkstore.jobs.control import (
    CHECKPOINT,
    LOG_LEVEL,
    PAUSE,
    ControlAck,
    ControlChange,
    ControlView,
    HistoryEntry,
    log_level,
    read_view,
)
from zkstore.jobs.snapshot import read_snapshot
from zkstore.records.strict import utc_now

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["COMMANDS", "Command", "ControlService", "Done", "applied", "command"]

#: Done when an acknowledgement says so, given the change that was stored.
Done = Callable[[ControlChange], Callable[[ControlAck], bool]]


def applied(change: ControlChange) -> Callable[[ControlAck], bool]:
    """Done once the job acknowledged the change's version (or a later one)."""
    version = change.version or 0
    return lambda ack: ack.applied_version >= version


def _paused(change: ControlChange) -> Callable[[ControlAck], bool]:
    version = change.version or 0
    return lambda ack: ack.applied_version >= version and ack.paused


def _resumed(change: ControlChange) -> Callable[[ControlAck], bool]:
    version = change.version or 0
    return lambda ack: ack.applied_version >= version and not ack.paused


@dataclass(frozen=True)
class Command:
    """A built-in control command: the values it stores, when it is done, what waiting means."""

    name: str
    values: Callable[[str | None], dict[str, Any]]
    done: Done = applied
    waiting_for: str = "acknowledged"
    takes_level: bool = False


def _level_values(level: str | None) -> dict[str, Any]:
    if level is None:
        raise ConfigError("give a log level (ALL, TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF)")
    try:
        return {LOG_LEVEL: log_level(level)}
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


COMMANDS: Mapping[str, Command] = {
    command.name: command
    for command in (
        Command(
            "pause",
            lambda _: {PAUSE: True},
            _paused,
            "paused (the job pauses at its next checkpoint or pause point)",
        ),
        Command("resume", lambda _: {PAUSE: False}, _resumed, "resumed"),
        Command("checkpoint", lambda _: {CHECKPOINT: utc_now()}),
        Command("log-level", _level_values, takes_level=True),
    )
}


def command(name: str) -> Command:
    """The built-in command ``name``; :class:`ConfigError` if there is none."""
    found = COMMANDS.get(name)
    if found is None:
        raise ConfigError(f"no control command {name!r}: {', '.join(COMMANDS)}")
    return found


class ControlService:
    """A job's control for one client of it (the command line, a daemon's HTTP API): reads
    raise :class:`~zkstore.errors.JobNotFound` for a job without any trace; changes raise what
    :meth:`ControlStore.set <zkstore.jobs.control.ControlStore.set>` raises."""

    def __init__(self, cluster: Cluster, *, by: str | None = None) -> None:
        self.cluster = cluster
        self.by = by

    def view(self, job_id: str) -> ControlView:
        """What ``control get`` shows."""
        read_snapshot(self.cluster.zk, self.cluster.layout, job_id)
        return read_view(self.cluster.control(job_id), self.cluster.checkpoints(job_id))

    def history(self, job_id: str, *, last: int | None = None) -> dict[str, Any]:
        """What ``control history --format json`` shows."""
        read_snapshot(self.cluster.zk, self.cluster.layout, job_id)
        return self.cluster.control(job_id).history.report(last=last)

    def entries(
        self, job_id: str, *, last: int | None = None
    ) -> tuple[list[HistoryEntry], dict[str, str]]:
        """The history's entries, oldest first, and the objects that are not valid entries."""
        read_snapshot(self.cluster.zk, self.cluster.layout, job_id)
        return self.cluster.control(job_id).history.entries(last=last)

    def change(
        self,
        job_id: str,
        values: Mapping[str, Any],
        *,
        expect_version: int | None = None,
        replace: bool = False,
        remove: tuple[str, ...] = (),
    ) -> ControlChange:
        """Store a change of the desired values (``control set``)."""
        return self.cluster.control(job_id).set(
            values, expect_version=expect_version, replace=replace, remove=remove, by=self.by
        )

    def run(
        self,
        job_id: str,
        name: str,
        *,
        level: str | None = None,
        expect_version: int | None = None,
    ) -> ControlChange:
        """Store the values of the built-in command ``name`` (``control pause`` ...)."""
        return self.change(job_id, command(name).values(level), expect_version=expect_version)
