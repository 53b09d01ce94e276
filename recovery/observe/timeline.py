"""A job's timeline as a picture: inline SVG, drawn on the server, no script, everything escaped.

Pure: :func:`render_svg` turns a :class:`Timeline` (plain records with times, built by whoever
reads the cluster) into one ``<svg>`` element for the job page. Each attempt is a bar from its
placement to its end on the row of the daemon that ran it, coloured by how it ended; the
checkpoints are ticks on a lane of their own; control changes are marks on another lane; a
leader change is a dashed line across the rows; a time axis (UTC) runs along the bottom, and a
legend says what the colours mean. Every bar and mark carries a ``<title>`` (the browser's
tooltip) saying what it is in words.

Safe to embed in the status page under its Content-Security-Policy (no script at all): no
``<script>``, no event attribute, no link, no external reference; every text that comes from the
cluster (a daemon's name, an error, a leader's id) is escaped, stripped of the characters XML
cannot carry, and cut to a bounded length.

Bounded: however many attempts, checkpoints and changes a job had, the picture draws at most
:data:`MAX_ATTEMPTS` attempts (the newest; the time range starts at the oldest one drawn, and a
note says how many earlier ones are not), :data:`MAX_ROWS` daemon rows (the rest share one
"other daemons" row), :data:`MAX_TICKS` checkpoints and :data:`MAX_MARKS` marks of each kind.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = [
    "AXIS_HEIGHT",
    "CANCELLED",
    "FAILED",
    "LABEL_CHARS",
    "LABEL_WIDTH",
    "LANE_HEIGHT",
    "LOST",
    "MAX_ATTEMPTS",
    "MAX_MARKS",
    "MAX_ROWS",
    "MAX_TICKS",
    "OTHER_DAEMONS",
    "OUTCOMES",
    "PAD",
    "ROW_HEIGHT",
    "RUNNING",
    "STARTING",
    "STOPPED",
    "SUCCEEDED",
    "TITLE_CHARS",
    "UNKNOWN",
    "WIDTH",
    "AttemptSpan",
    "Mark",
    "Timeline",
    "clean",
    "render_svg",
]

SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
LOST = "LOST"
CANCELLED = "CANCELLED"
RUNNING = "RUNNING"
STARTING = "STARTING"
STOPPED = "STOPPED"
UNKNOWN = "UNKNOWN"

#: How an attempt ended (or that it has not), its fill colour and its word in the legend.
OUTCOMES: dict[str, tuple[str, str]] = {
    SUCCEEDED: ("#2e7d32", "succeeded"),
    FAILED: ("#c62828", "failed"),
    LOST: ("#ef6c00", "lost"),
    CANCELLED: ("#757575", "cancelled"),
    RUNNING: ("#1565c0", "running"),
    STARTING: ("#90caf9", "starting"),
    STOPPED: ("#6941c6", "stopped"),
    UNKNOWN: ("#d0d5dd", "unknown"),
}

MAX_ATTEMPTS = 100
MAX_ROWS = 12
MAX_TICKS = 200
MAX_MARKS = 50
#: Longest text kept in a label (a daemon's name) and in a tooltip.
LABEL_CHARS = 24
TITLE_CHARS = 300

WIDTH = 900
LABEL_WIDTH = 170
ROW_HEIGHT = 22
LANE_HEIGHT = 18
AXIS_HEIGHT = 44
PAD = 8
OTHER_DAEMONS = "other daemons"

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]|[\ud800-\udfff]")
_STEPS = [
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86400,
    2 * 86400,
    7 * 86400,
    30 * 86400,
]


@dataclass(frozen=True)
class AttemptSpan:
    """One attempt: placed on ``daemon`` at ``placed``, ended at ``ended`` (None while it runs)
    with ``outcome`` (one of :data:`OUTCOMES`); ``note`` says why (an error, why it was lost)."""

    attempt: int
    daemon: str
    placed: datetime
    ended: datetime | None
    outcome: str
    note: str | None = None


@dataclass(frozen=True)
class Mark:
    """Something that happened at ``at``: a control change (``label``: its version and keys)
    or a leader change (``label``: the new leader)."""

    at: datetime
    label: str


@dataclass(frozen=True)
class Timeline:
    """What the picture shows; ``now`` is the right end of a running attempt's bar."""

    job_id: str
    attempts: Sequence[AttemptSpan]
    now: datetime
    checkpoints: Sequence[datetime] = ()
    control_changes: Sequence[Mark] = ()
    leader_changes: Sequence[Mark] = ()


def clean(text: object, limit: int) -> str:
    """``text`` as a string XML can carry, cut to ``limit`` characters (with an ellipsis), and
    escaped for an element's text or a quoted attribute."""
    value = _NOT_XML.sub("\ufffd", str(text))
    if len(value) > limit:
        value = value[: limit - 1] + "\u2026"
    return html.escape(value, quote=True)


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


@dataclass(frozen=True)
class _Scale:
    start: datetime
    seconds: float
    left: float
    width: float

    def x(self, moment: datetime) -> float:
        offset = (moment - self.start).total_seconds()
        return self.left + max(0.0, min(offset / self.seconds, 1.0)) * self.width


def _rows(attempts: Sequence[AttemptSpan]) -> dict[str, int]:
    """Row of each daemon: in order of its first attempt; past :data:`MAX_ROWS`, one shared row."""
    order: list[str] = []
    for attempt in sorted(attempts, key=lambda a: (a.placed, a.attempt)):
        if attempt.daemon not in order:
            order.append(attempt.daemon)
    if len(order) > MAX_ROWS:
        shown = order[: MAX_ROWS - 1]
        return {d: (shown.index(d) if d in shown else MAX_ROWS - 1) for d in order}
    return {d: i for i, d in enumerate(order)}


def _ticks(scale: _Scale) -> list[datetime]:
    """Axis ticks at a round step, at most 8 over the range."""
    step = next((s for s in _STEPS if scale.seconds / s <= 8), _STEPS[-1])
    first = scale.start.timestamp() // step * step + step
    end = scale.start.timestamp() + scale.seconds
    count = int((end - first) // step) + 1 if end >= first else 0
    return [datetime.fromtimestamp(first + i * step, UTC) for i in range(min(count, 10))]


def render_svg(timeline: Timeline, *, width: int = WIDTH) -> str:
    """The job's timeline as one ``<svg>`` element (a string, UTF-8 text, no XML declaration)."""
    attempts = sorted(timeline.attempts, key=lambda a: (a.attempt, a.placed))
    hidden = max(len(attempts) - MAX_ATTEMPTS, 0)
    attempts = attempts[hidden:]
    rows = _rows(attempts)
    row_count = max(len(set(rows.values())), 1)
    moments = [a.placed for a in attempts] + [a.ended or timeline.now for a in attempts]
    start = min(moments, default=timeline.now)
    checkpoints = sorted(c for c in timeline.checkpoints if c >= start)[-MAX_TICKS:]
    controls = sorted((m for m in timeline.control_changes if m.at >= start), key=_at)
    leaders = sorted((m for m in timeline.leader_changes if m.at >= start), key=_at)
    controls, leaders = controls[-MAX_MARKS:], leaders[-MAX_MARKS:]
    end = max([*moments, *checkpoints, *(m.at for m in (*controls, *leaders))], default=start)
    seconds = max((end - start).total_seconds(), 1.0)
    scale = _Scale(start, seconds, LABEL_WIDTH, width - LABEL_WIDTH - PAD)
    top = PAD + 2 * LANE_HEIGHT  # the checkpoint lane, then the control lane
    plot_bottom = top + row_count * ROW_HEIGHT
    height = plot_bottom + AXIS_HEIGHT + LANE_HEIGHT + PAD
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" '
        f'font-size="11"><title>Timeline of job {clean(timeline.job_id, TITLE_CHARS)}: '
        f"{len(timeline.attempts)} attempts</title>"
    ]
    parts += _lanes(scale, checkpoints, controls, top)
    parts += _daemon_rows(rows, top, width)
    parts += [_bar(a, rows[a.daemon], top, scale, timeline.now) for a in attempts]
    parts += _leader_lines(scale, leaders, PAD, plot_bottom)
    parts += _axis(scale, plot_bottom, width)
    parts += _legend(plot_bottom + AXIS_HEIGHT, hidden)
    parts.append("</svg>")
    return "".join(parts)


def _at(mark: Mark) -> datetime:
    return mark.at


def _lanes(
    scale: _Scale, checkpoints: list[datetime], controls: list[Mark], top: float
) -> list[str]:
    lane_y = PAD
    parts = [
        f'<text x="{PAD}" y="{lane_y + 12}" fill="#667085">checkpoints</text>',
        f'<text x="{PAD}" y="{lane_y + LANE_HEIGHT + 12}" fill="#667085">control changes</text>',
    ]
    for moment in checkpoints:
        x = scale.x(moment)
        parts.append(
            f'<line class="checkpoint" x1="{x:.1f}" y1="{lane_y + 3}" x2="{x:.1f}" '
            f'y2="{lane_y + LANE_HEIGHT - 3}" stroke="#344054" stroke-width="1.5">'
            f"<title>checkpoint at {_when(moment)}</title></line>"
        )
    y = lane_y + LANE_HEIGHT + LANE_HEIGHT / 2
    for mark in controls:
        x = scale.x(mark.at)
        parts.append(
            f'<path class="control-change" d="M{x:.1f} {y - 5:.1f} l5 5 l-5 5 l-5 -5 z" '
            f'fill="#7c3aed"><title>control change at {_when(mark.at)}: '
            f"{clean(mark.label, TITLE_CHARS)}</title></path>"
        )
    return parts


def _daemon_rows(rows: dict[str, int], top: float, width: int) -> list[str]:
    names: dict[int, str] = {}
    for daemon, row in rows.items():
        names.setdefault(row, daemon)
    if len(set(rows.values())) == MAX_ROWS and len(rows) > MAX_ROWS:
        names[MAX_ROWS - 1] = f"{OTHER_DAEMONS} ({len(rows) - MAX_ROWS + 1})"
    parts = []
    for row, name in sorted(names.items()):
        y = top + row * ROW_HEIGHT
        fill = "#f7f8fa" if row % 2 == 0 else "#ffffff"
        parts.append(
            f'<rect class="row" x="0" y="{y}" width="{width}" height="{ROW_HEIGHT}" '
            f'fill="{fill}"/><text class="daemon" x="{PAD}" y="{y + 15}" fill="#1d2430">'
            f"{clean(name, LABEL_CHARS)}<title>{clean(name, TITLE_CHARS)}</title></text>"
        )
    return parts


def _bar(attempt: AttemptSpan, row: int, top: float, scale: _Scale, now: datetime) -> str:
    outcome = attempt.outcome if attempt.outcome in OUTCOMES else FAILED
    colour, word = OUTCOMES[outcome]
    ended = attempt.ended or now
    x = scale.x(attempt.placed)
    width = max(scale.x(ended) - x, 2.0)
    y = top + row * ROW_HEIGHT + 4
    took = _span((ended - attempt.placed).total_seconds())
    tip = (
        f"attempt {attempt.attempt} on {attempt.daemon}: {word}, placed {_when(attempt.placed)}"
        + (f", ended {_when(attempt.ended)}" if attempt.ended else " (still running)")
        + f", {took}"
        + (f": {attempt.note}" if attempt.note else "")
    )
    return (
        f'<rect class="attempt {word}" data-attempt="{attempt.attempt}" x="{x:.1f}" y="{y}" '
        f'width="{width:.1f}" height="{ROW_HEIGHT - 8}" rx="2" fill="{colour}">'
        f"<title>{clean(tip, TITLE_CHARS)}</title></rect>"
    )


def _leader_lines(scale: _Scale, leaders: list[Mark], top: float, bottom: float) -> list[str]:
    parts = []
    for mark in leaders:
        x = scale.x(mark.at)
        parts.append(
            f'<line class="leader-change" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" '
            f'stroke="#14213d" stroke-width="1" stroke-dasharray="4 3"><title>leader change at '
            f"{_when(mark.at)}: {clean(mark.label, TITLE_CHARS)}</title></line>"
        )
    return parts


def _axis(scale: _Scale, y: float, width: int) -> list[str]:
    parts = [
        f'<line class="axis" x1="{scale.left}" y1="{y}" x2="{width - PAD}" y2="{y}" '
        'stroke="#98a2b3"/>'
    ]
    daily = scale.seconds >= 86400
    for moment in _ticks(scale):
        x = scale.x(moment)
        label = moment.strftime("%m-%d %H:%M" if daily else "%H:%M:%S")
        parts.append(
            f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#98a2b3"/>'
            f'<text class="tick" x="{x:.1f}" y="{y + 16}" text-anchor="middle" '
            f'fill="#667085">{label}</text>'
        )
    parts.append(
        f'<text class="axis-caption" x="{scale.left}" y="{y + 32}" fill="#667085">UTC, '
        f"{_span(scale.seconds)} from "
        f"{scale.start.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S')}</text>"
    )
    return parts


def _legend(y: float, hidden: int) -> list[str]:
    parts = []
    x = float(PAD)
    for colour, word in OUTCOMES.values():
        parts.append(
            f'<rect x="{x}" y="{y}" width="12" height="10" rx="2" fill="{colour}"/>'
            f'<text x="{x + 16}" y="{y + 9}" fill="#344054">{word}</text>'
        )
        x += 16 + 7 * len(word) + 14
    if hidden:
        parts.append(
            f'<text class="hidden-attempts" x="{x}" y="{y + 9}" fill="#667085">'
            f"{hidden} earlier attempts not drawn</text>"
        )
    return parts
