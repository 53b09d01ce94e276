"""The job page at ``/jobs/<id>``: what the job is, where it stands and why, and its timeline.

Server-rendered like the status page (:mod:`recovery.observe.page`: no script, its
Content-Security-Policy): the definition's summary (target, arguments, Spark properties, files,
modules shipped, required labels), the state with its reason (why it waits, who cancelled it and
why, its error), the timeline as inline SVG (:mod:`recovery.observe.timeline`: each attempt a bar
on the daemon that ran it, coloured by how it ended; checkpoints, control changes and leader
changes as marks), then the tail of the latest attempt's log with a link to each attempt's log.

Read from the records the leader keeps for people (:mod:`zkstore.jobs.history`; a finished
job's history is kept beside its logs by the cleanup) and the job's own records. A history that
is missing or unreadable costs the picture bars, never the page: the current attempt is drawn
from the job's status, and what cannot be told is said.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from recovery.observe import page
from recovery.observe.timeline import (
    CANCELLED,
    FAILED,
    LOST,
    RUNNING,
    STARTING,
    STOPPED,
    SUCCEEDED,
    UNKNOWN,
    AttemptSpan,
    Mark,
    Timeline,
    render_svg,
)
from zkstore.errors import CorruptRecord, ZkStoreError
from zkstore.jobs import history
from zkstore.jobs.history import AttemptEntry, LeaderHistory
from zkstore.jobs.logs import JobLogs
from zkstore.jobs.snapshot import read_snapshot
from zkstore.service.job_view import (
    attempt_history,
    attempts_json,
    attempts_text,
    describe,
    job_conditions,
    job_error,
)
from zkstore.service.output_view import list_outputs

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = [
    "LOG_LINKS",
    "TAIL_BYTES",
    "TAIL_LINES",
    "JobPage",
    "read_job_page",
    "render_job_page",
    "render_missing",
    "timeline",
]

#: Lines of the latest attempt's log shown under the picture, and the most of its end read.
TAIL_LINES = 40
TAIL_BYTES = 64 * 1024
#: Attempts linked to their logs (the newest).
LOG_LINKS = 20

_DRAWN = {
    history.SUCCEEDED: SUCCEEDED,
    history.FAILED: FAILED,
    history.LOST: LOST,
    history.CANCELLED: CANCELLED,
    history.STOPPED: STOPPED,
}


@dataclass(frozen=True)
class JobPage:
    """Everything the page shows, read at ``now``."""

    item: dict[str, Any]
    now: datetime
    #: when the current attempt's driver started (else when the job was submitted), and when
    #: the job finished: the records' times (``item`` is their JSON, for the API)
    started: datetime | None = None
    finished: datetime | None = None
    attempts: list[AttemptEntry] = field(default_factory=list)
    history_note: str | None = None
    checkpoints: list[datetime] = field(default_factory=list)
    control: list[Mark] = field(default_factory=list)
    leaders: list[Mark] = field(default_factory=list)
    logs: dict[int, bool] = field(default_factory=dict)
    tail: str | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)


def read_job_page(cluster: Cluster, job_id: str) -> JobPage:
    """Read what the page shows; raises :class:`~zkstore.errors.JobNotFound` for a job without
    any trace (the page answers 404) and the store's errors."""
    snapshot = read_snapshot(cluster.zk, cluster.layout, job_id)
    item = describe(snapshot)
    item["error"] = job_error(snapshot)
    item["conditions"] = job_conditions(cluster, snapshot, item)
    logs = JobLogs(cluster.storage, cluster.storage_layout, job_id)
    attempts, unreadable = attempt_history(cluster, job_id)
    checkpoints = [handle.created_at for _, handle in cluster.checkpoints(job_id).all()]
    control: list[Mark] = []
    with contextlib.suppress(ZkStoreError):
        entries, _ = cluster.control(job_id).history.entries()
        for entry in entries:
            keys = ", ".join(sorted(entry.changes)) or "no key"
            control.append(Mark(entry.when, f"v{entry.version} by {entry.by}: {keys}"))
    leaders: list[Mark] = []
    try:
        known = history.read(cluster.zk, cluster.layout.leader_history, LeaderHistory)
    except CorruptRecord:
        known = None
    if known is not None:
        leaders = [Mark(since, f"{leader} leads") for since, leader in known.leaders()]
    outputs: list[dict[str, Any]] = []
    with contextlib.suppress(ZkStoreError):  # the page shows the rest without them
        outputs = list_outputs(cluster, job_id)
    found = logs.attempts()
    tail = None
    if found:
        latest = found[max(found)]
        with contextlib.suppress(ZkStoreError):
            tail = logs.tail(latest, TAIL_LINES, max_bytes=TAIL_BYTES).decode("utf-8", "replace")
    running = snapshot.running
    return JobPage(
        item=item,
        now=datetime.now(UTC),
        started=running.started if running is not None else snapshot.submitted_at,
        finished=snapshot.result.finished if snapshot.result is not None else None,
        attempts=attempts,
        history_note=unreadable,
        checkpoints=checkpoints,
        control=control,
        leaders=leaders,
        logs={n: log.ended for n, log in found.items()},
        tail=tail,
        outputs=outputs,
    )


def timeline(data: JobPage) -> Timeline:
    """The picture's records: each attempt the history tells of, and the current one from the
    job's status if the history lacks it (a gap a leader crash can leave)."""
    item = data.item
    current = item["attempt"] or 0
    live = item["result"] is None
    spans: dict[int, AttemptSpan] = {}
    for entry in data.attempts:
        if entry.outcome != history.PLACED:
            outcome = _DRAWN.get(entry.outcome, UNKNOWN)
        elif live and entry.attempt == current:
            outcome = RUNNING if item["driver"] is not None else STARTING
        else:  # placed, and its end was never told (a leader crashed in between)
            outcome = UNKNOWN
        spans[entry.attempt] = AttemptSpan(
            entry.attempt, entry.daemon, entry.placed, entry.ended, outcome, entry.note
        )
    ordered = sorted(spans)
    for before, after in itertools.pairwise(ordered):
        span = spans[before]
        if span.outcome == UNKNOWN and span.ended is None:  # over once the next one was placed
            spans[before] = replace(span, ended=spans[after].placed, note="its end was not told")
    if live and current and current not in spans and item["daemon"]:
        placed = data.started or data.now
        state = RUNNING if item["driver"] is not None else STARTING
        spans[current] = AttemptSpan(current, item["daemon"], placed, None, state)
    return Timeline(
        job_id=item["job_id"],
        attempts=sorted(spans.values(), key=lambda s: s.attempt),
        now=data.now,
        checkpoints=data.checkpoints,
        control_changes=data.control,
        leader_changes=data.leaders,
    )


def _rows(pairs: list[tuple[str, str | None]]) -> str:
    cells = [
        f"<tr><th>{page.escape(k)}</th><td>{v}</td></tr>" for k, v in pairs if v not in (None, "")
    ]
    return f"<table class='facts'>{''.join(cells)}</table>"


def _code(value: object) -> str | None:
    return None if value in (None, "") else f"<code>{page.escape(value)}</code>"


def _state(item: dict[str, Any], finished_at: datetime | None, now: float) -> str:
    parts = [page.badge(str(item["state"]))]
    if item.get("waiting") and item["result"] is None:
        parts.append(f"<span class='muted'>{page.escape(item['waiting'])}</span>")
    cancel = item.get("cancel")
    if cancel:
        by = f" by {cancel.get('by')}" if cancel.get("by") else ""
        why = f": {cancel.get('reason')}" if cancel.get("reason") else ""
        parts.append(f"<span>cancel requested{page.escape(by + why)}</span>")
    result = item.get("result")
    if result and finished_at is not None:
        parts.append(f"<span class='muted'>finished {page.since(finished_at, now)}</span>")
    return " ".join(parts)


def _schedule(schedule: dict[str, str] | None) -> str | None:
    """A scheduled run's schedule (a link to its API record) and window."""
    if schedule is None:
        return None
    link = f"/api/v1/schedules/{quote(schedule['name'], safe='')}"
    return (
        f'run of <a href="{page.escape(link)}">{page.escape(schedule["name"])}</a> for its '
        f"window {page.escape(schedule['window'])}"
    )


def _conditions(conditions: list[dict[str, str]]) -> str | None:
    """What the leader does not do for the job, one line each (None: nothing)."""
    if not conditions:
        return None
    return "<br>".join(
        f"<b>{page.escape(c['type'])}</b> ({page.escape(c['reason'])}) since "
        f"{page.escape(c['since'])}: {page.escape(c['message'])}"
        for c in conditions
    )


def _attempt_table(entries: list[AttemptEntry]) -> str:
    """Each attempt the history tells: how it ended, where, the definition it ran and the
    driver JVM it had."""
    rows = []
    for entry in attempts_json(entries):
        ran = ""
        if entry.get("definition"):
            ran = f"<code>{page.escape(entry['definition'][:12])}</code>"
            if entry.get("target"):
                ran += f" <code>{page.escape(entry['target'])}</code>"
            if entry["new_definition"]:
                ran += " <b>new definition</b>"
        cells = [
            str(entry["attempt"]),
            page.badge(str(entry["outcome"])),
            page.escape(entry["daemon"]),
            page.escape(entry["placed"]),
            page.escape(entry.get("ended") or ""),
            ran or "<span class='muted'>not recorded</span>",
            page.escape(entry.get("jvm") or ""),
            page.escape(entry.get("note") or ""),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    headers = [
        "attempt",
        "outcome",
        "daemon",
        "placed",
        "ended",
        "definition",
        "driver JVM",
        "note",
    ]
    return page.table(headers, rows, "no attempt told yet")


def _log_links(job_id: str, logs: dict[int, bool]) -> str:
    base = f"/api/v1/jobs/{quote(job_id, safe='')}/logs"
    if not logs:
        return "<span class='muted'>no logs stored</span>"
    links = [
        f'<a href="{page.escape(base)}?attempt={n}">attempt {n}'
        + ("" if complete else " (still being written)")
        + "</a>"
        for n, complete in sorted(logs.items())[-LOG_LINKS:]
    ]
    return " · ".join(links)


def _outputs(job_id: str, outputs: list[dict[str, Any]]) -> str:
    """The job's outputs: what was committed (links to the committed parts' JSON)."""
    if not outputs:
        return "<p class='muted'>no output committed with a checkpoint</p>"
    rows = "".join(
        f"<tr><td><a href='/api/v1/jobs/{quote(job_id)}/outputs/{quote(o['name'])}'>"
        f"{page.escape(o['name'])}</a></td><td>{o['commits']}</td><td>{o['parts']}</td>"
        f"<td>{o['newest'] or '-'}</td><td><code>{page.escape(o['uri'])}</code></td></tr>"
        for o in outputs
    )
    return (
        "<table><tr><th>output</th><th>commits</th><th>parts</th><th>newest commit</th>"
        f"<th>place</th></tr>{rows}</table>"
    )


def render_job_page(data: JobPage, *, daemon_id: str, leading: bool, cluster_id: str) -> str:
    """The page as one HTML document."""
    item, now = data.item, time.time()
    job_id = item["job_id"]
    summary = _rows(
        [
            ("name", page.escape(item["name"]) if item["name"] else None),
            ("kind", page.escape(item["kind"]) if item["kind"] else None),
            ("target", _code(item["entry"])),
            ("arguments", _code(item["args"])),
            ("conf", _code(item["conf"])),
            ("files", _code(item["files"])),
            ("modules", _code(item["modules"])),
            ("requires", _code(item["require"])),
            ("submitted", page.escape(item["submitted"]) if item["submitted"] else None),
            ("schedule", _schedule(item["schedule"])),
            ("definition", _code(item["definition"])),
        ]
    )
    state = _rows(
        [
            ("state", _state(item, data.finished, now)),
            ("attempts", page.escape(attempts_text(item)) if attempts_text(item) else None),
            ("daemon", page.escape(item["daemon"]) if item["daemon"] else None),
            (
                "error",
                f"<pre class='err'>{page.escape(item['error'])}</pre>" if item["error"] else None,
            ),
            (
                "quarantined",
                page.escape(item["quarantine"]["reason"]) if item["quarantine"] else None,
            ),
            ("conditions", _conditions(item.get("conditions") or [])),
        ]
    )
    picture = timeline(data)
    drawn = (
        render_svg(picture)
        if picture.attempts
        else "<p class='muted'>no attempt yet: nothing to draw</p>"
    )
    if data.history_note:
        drawn += f"<p class='muted'>{page.escape(data.history_note)}</p>"
    drawn += _attempt_table(data.attempts)
    tail = (
        f"<pre class='log'>{page.escape(data.tail)}</pre>"
        if data.tail
        else "<p class='muted'>no output stored yet</p>"
    )
    sections = [
        page.section("Definition", summary),
        page.section("State", state),
        page.section(f"Timeline ({len(picture.attempts)} attempts)", drawn),
        page.section("Outputs (committed parts only)", _outputs(job_id, data.outputs)),
        page.section(
            f"Latest log (last {TAIL_LINES} lines)",
            tail + f"<p>{_log_links(job_id, data.logs)}</p>",
        ),
    ]
    return page.document(
        cluster_id,
        daemon_id,
        leading,
        now,
        sections,
        title=f"job {job_id}",
        back=True,
    )


def render_missing(job_id: str, *, daemon_id: str, leading: bool, cluster_id: str) -> str:
    """The page of a job the store has no trace of (served with 404)."""
    body = page.section(
        "No such job",
        f"<p>The cluster has no trace of job <code>{page.escape(job_id)}</code>: never "
        "submitted, or forgotten (its result removed).</p>",
    )
    return page.document(
        cluster_id, daemon_id, leading, time.time(), [body], title=f"job {job_id}", back=True
    )
