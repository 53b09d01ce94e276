"""Changing a schedule (``zkstore schedules update``): one version-checked write of its spec.

:func:`update` reads the spec at version *v*, applies the change, and writes it back with a
check of *v* (a race re-reads and applies the change again). The spec records what changed
(:class:`~zkstore.schedules.schedule_records.Change`: when, by whom, ``every: 15s -> 30s``) in the
same write. A change of the run options (``--timeout``, ``--notify``, the retry pacing, the attempt
limits) is a new definition: written create-only at a fresh key under the schedule's prefix
before the spec, the old one discarded after it. A crash at any line leaves the old spec (and
perhaps an orphan new payload, which ``handles lingering`` finds) or the new spec (and perhaps
the orphan old payload): never a spec without its payload (invariant 1).

A fire in flight: the leader's fire transaction checks the spec's version
(:mod:`zkstore.schedules.transaction`), so a window is fired either before the change, with
the old spec (its run has its copy of the old definition), or after it, planned again from the
new spec; never with a mix. Windows already decided stay as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime

from zkstore.errors import OutcomeUnknown, VersionConflict, ZkStoreError
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.runoptions import LIMIT_KEYS, NOTIFY_KEY, RETRY_KEYS
from zkstore.jobs.runspec import RunSpec
from zkstore.records.handle import Handle, SummaryValue
from zkstore.records.strict import second_text, utc_moment
from zkstore.schedules.schedule_records import Change, ScheduleSpec
from zkstore.schedules.schedule_store import ScheduleStore, check
from zkstore.zookeeper.ops import SetData
from zkstore.zookeeper.retry import RACES

__all__ = ["RUN_KEYS", "WHEN_FIELDS", "describe", "run_options", "update"]

#: The spec's fields a change may touch, as people name them.
WHEN_FIELDS = (
    "cron",
    "every",
    "timezone",
    "start_at",
    "end_at",
    "concurrency",
    "catchup",
    "catchup_max",
    "after_schedule",
)
#: The definition summary's keys of how a run runs (the attempt limits and the lifecycle's).
RUN_KEYS = ("max_attempts", "max_lost", *LIMIT_KEYS, *RETRY_KEYS, NOTIFY_KEY)


def update(
    store: ScheduleStore,
    name: str,
    spec_change: Callable[[ScheduleSpec], ScheduleSpec],
    run_change: Callable[[JobDefinition], JobDefinition] | None,
    *,
    by: str,
) -> tuple[ScheduleSpec, str | None]:
    """Apply ``spec_change`` (and ``run_change`` to its definition, if given) to schedule
    ``name``; the spec as written and what changed (None: nothing did, nothing was written).

    Raises :class:`~zkstore.errors.HandleNotFound` (no such schedule),
    :class:`ConfigError` (the changed spec is not valid: nothing written), a payload error (its
    definition cannot be read), :class:`OutcomeUnknown` (the answer was lost and reading back
    did not settle it) or :class:`~zkstore.errors.StoreUnavailable`.
    """

    def once() -> tuple[ScheduleSpec, str | None]:
        current = store.spec(name)
        changed = spec_change(current)
        new_definition = None
        if run_change is not None:
            old_definition = store.definition(current)
            new_definition = run_change(old_definition)
            if new_definition.summary() == old_definition.summary():
                new_definition = None
        what = describe(current, changed, new_definition)
        if what is None:
            return current, None
        return _write(store, current, changed, new_definition, Change(utc_moment(), by, what)), what

    return RACES.call(
        once,
        what=f"updating schedule {name}",
        retry_on=(VersionConflict,),
        path=store.layout.schedule(name),
    )


def _write(
    store: ScheduleStore,
    current: ScheduleSpec,
    changed: ScheduleSpec,
    definition: JobDefinition | None,
    change: Change,
) -> ScheduleSpec:
    """Write ``changed`` (with ``definition`` as its new payload, if given) over ``current``'s
    version; the old payload discarded once the spec no longer names it."""
    name, old = current.name, current.handle
    new_ref = None
    if definition is not None:
        new_ref = store.storage.write(
            store.storage_layout.schedule_definitions(name),
            store.serializer.dumps(definition),
            suffix=".pkl",
        )
        handle = Handle.for_payload(new_ref, store.instance_id, definition.summary())
        changed = replace(changed, definition=handle)
    written = changed.changed(change)
    assert current.version is not None
    try:
        check(written)
        store.commit(
            [SetData(store.layout.schedule(name), written.to_bytes(), current.version)],
            applied=lambda: change in store.spec(name).changes,
        )
    except OutcomeUnknown:
        raise  # the new payload may be named by the spec now: kept
    except ZkStoreError:
        if new_ref is not None:
            store.storage.discard(new_ref.uri)
        raise
    if new_ref is not None and store.storage.is_under(
        old.uri, store.storage_layout.schedule_definitions(name)
    ):
        store.discard_quietly(old.uri)
    return written.with_version(current.version + 1)


def describe(old: ScheduleSpec, new: ScheduleSpec, definition: JobDefinition | None) -> str | None:
    """What changed from ``old`` to ``new`` (and to ``definition``'s run options), one
    ``key: before -> after`` a change, ``; ``-separated; None if nothing did."""
    found = [
        f"{key}: {_shown(key, getattr(old, key))} -> {_shown(key, getattr(new, key))}"
        for key in WHEN_FIELDS
        if getattr(old, key) != getattr(new, key)
    ]
    if definition is not None:
        before, after = _run_view(old.handle.summary), _run_view(definition.summary())
        found += [
            f"{key}: {_shown(key, before.get(key))} -> {_shown(key, after.get(key))}"
            for key in RUN_KEYS
            if before.get(key) != after.get(key)
        ]
    return "; ".join(found) or None


def _run_view(summary: Mapping[str, SummaryValue]) -> dict[str, object]:
    """What :data:`RUN_KEYS` name of a definition's summary: its attempt limits, and the
    lifecycle options of its run options (read as :class:`RunSpec` reads them, whichever
    form the handle holds them in)."""
    try:
        given: Mapping[str, object] = RunSpec.from_summary(summary).lifecycle.given()
    except ValueError:
        given = {}
    return {
        "max_attempts": summary.get("max_attempts"),
        "max_lost": summary.get("max_lost"),
        **given,
    }


def _shown(key: str, value: object) -> str:
    """A value as people give it: ``-`` for none, seconds with their unit, a webhook URL
    redacted (its path is often its secret)."""
    from zkstore.jobs.stops import redact_url

    if value is None:
        return "-"
    if isinstance(value, datetime):
        return second_text(value)  # a bound (start_at, end_at), as stored
    if key == "notify" and isinstance(value, str):
        return redact_url(value)
    seconds = ("every", *LIMIT_KEYS, *RETRY_KEYS)
    if key in seconds and key != "retry_jitter" and isinstance(value, int | float):
        return f"{value:g}s"
    return str(value)


def run_options(
    definition: JobDefinition,
    lifecycle: Mapping[str, SummaryValue],
    removed: frozenset[str],
    *,
    max_attempts: int | None,
    max_lost_attempts: int | None,
) -> JobDefinition:
    """``definition`` with run options changed: the lifecycle's summary keys ``lifecycle``
    set, those in ``removed`` taken away (``--timeout off``), the attempt limits if given.
    Raises :class:`ConfigError` for a value the definition refuses."""
    options = {k: v for k, v in {**definition.lifecycle, **lifecycle}.items() if k not in removed}
    changes: dict[str, object] = {"lifecycle": options}
    if max_attempts is not None:
        changes["max_attempts"] = max_attempts
    if max_lost_attempts is not None:
        changes["max_lost_attempts"] = max_lost_attempts
    return replace(definition, **changes)  # type: ignore[arg-type]
