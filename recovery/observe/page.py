"""The status page at ``/``: plain server-rendered HTML and CSS, no script, no build step.

It shows the leader, the daemons, every job that is not finished, the most recently finished
ones, and quarantine, with links to each job's logs; it reloads itself every few seconds. With
a read token configured, a request without it sees the leader, the daemons and the jobs' count
by state only (what ``/api/v1/cluster`` answers to anybody). Every
value that comes from ZooKeeper is escaped (a job name or an error message is anybody's text),
and the page is served with a Content-Security-Policy that allows no script at all.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import quote

from recovery.observe.cluster_view import ClusterView, finished
from recovery.shared.fleet_daemons import DaemonInfo
from zkstore.cluster.pools import counts as pool_counts
from zkstore.jobs.runspec import DEFAULT_POOL
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.records.record import EPOCH
from zkstore.records.strict import time_text
from zkstore.service.job_view import describe, duration, headline

__all__ = [
    "CELL_CHARS",
    "CSP",
    "FINISHED_HEADERS",
    "FINISHED_SHOWN",
    "JOB_HEADERS",
    "LIVE_SHOWN",
    "REFRESH_SECONDS",
    "SCHEDULE_HEADERS",
    "badge",
    "document",
    "escape",
    "render",
    "render_unavailable",
    "section",
    "since",
    "table",
]

REFRESH_SECONDS = 5
#: Finished jobs shown, newest first; results are kept for ever, the page stays short.
FINISHED_SHOWN = 50
#: Jobs not finished shown, by id; the API lists them all.
LIVE_SHOWN = 500

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'"

_STYLE = """
:root { --fg:#1d2430; --muted:#667085; --line:#e4e7ec; --bg:#f7f8fa; --card:#fff; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
       color:var(--fg); background:var(--bg); }
header { display:flex; align-items:baseline; gap:16px; padding:14px 24px; background:#14213d;
         color:#fff; }
header h1 { font-size:18px; margin:0; }
header .meta, header .meta a { color:#c9d1e3; font-size:13px; }
main { padding:16px 24px 32px; max-width:1400px; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px;
          margin:0 0 16px; padding:12px 16px; }
h2 { font-size:15px; margin:0 0 8px; }
table { border-collapse:collapse; width:100%; }
th, td { text-align:left; padding:5px 10px 5px 0; border-bottom:1px solid var(--line);
         vertical-align:top; }
th { color:var(--muted); font-weight:600; font-size:12px; text-transform:uppercase; }
tr:last-child td { border-bottom:none; }
td.err { color:#b42318; max-width:420px; overflow-wrap:anywhere; }
.muted { color:var(--muted); }
.chips { display:flex; flex-wrap:wrap; gap:8px; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px;
         font-weight:600; background:#eef1f6; color:#344054; }
.RUNNING { background:#d1fadf; color:#05603a; } .SUCCEEDED { background:#d1e9ff; color:#1849a9; }
.FAILED, .QUARANTINED { background:#fee4e2; color:#b42318; }
.CANCELLED { background:#f2f4f7; color:#475467; }
.RESTARTING, .STARTING, .CLEANING, .STOPPING, .NEEDS_UPGRADE { background:#fef0c7;
  color:#93370d; }
.STOPPED { background:#e9d7fe; color:#53389e; }
.leader { background:#14213d; color:#fff; }
a { color:#1849a9; text-decoration:none; } a:hover { text-decoration:underline; }
code { font-size:13px; }
table.facts th { width:140px; text-transform:none; font-size:13px; }
pre { margin:0; white-space:pre-wrap; overflow-wrap:anywhere; font-size:12px; }
pre.log { background:#0f172a; color:#e2e8f0; padding:10px 12px; border-radius:6px;
          max-height:480px; overflow:auto; }
pre.err { color:#b42318; }
svg.timeline { max-width:100%; height:auto; }
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else duration(seconds)


def _since(moment: datetime | None, now: float) -> str:
    """``3m12s ago``: how long before ``now`` (epoch seconds) ``moment`` was; ``-`` for None."""
    return "-" if moment is None else _age(now - moment.timestamp()) + " ago"


def _badge(state: str, extra: str = "") -> str:
    return f'<span class="badge {_e(state)} {extra}">{_e(state)}</span>'


def _table(headers: Iterable[str], rows: list[str], empty: str) -> str:
    if not rows:
        return f'<p class="muted">{_e(empty)}</p>'
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _logs_links(job: JobSnapshot) -> str:
    base = f"/api/v1/jobs/{quote(job.job_id, safe='')}/logs"
    attempts = job.attempt or 0
    if attempts < 1:
        return '<span class="muted">none yet</span>'
    links = [f'<a href="{_e(base)}?tail=500">latest</a>']
    links += [f'<a href="{_e(base)}?attempt={n}">#{n}</a>' for n in range(1, attempts + 1)][-10:]
    return " ".join(links)


#: The longest error or reason a table cell shows (the job's JSON has it whole).
CELL_CHARS = 160
_WAITING = frozenset({"SUBMITTED", "PENDING", "STARTING", "RESTARTING"})


def _cut(text: str | None, limit: int = CELL_CHARS) -> str:
    """One line of ``text`` (a traceback's last), cut at a word with an ellipsis past
    ``limit`` characters."""
    if not text:
        return ""
    line = headline(text) or ""
    if len(line) <= limit:
        return line
    head = line[: limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip() + "…"


def _job_link(job_id: str) -> str:
    """The job's id, linked to its page."""
    href = f"/jobs/{quote(job_id, safe='')}"
    return f'<a href="{_e(href)}"><code>{_e(job_id)}</code></a>'


def _attempts(item: dict[str, object]) -> str:
    """``2 of 3`` and, apart, what ended the earlier ones: ``1 lost`` does not count against
    the 3 (the infrastructure's, not the job's)."""
    text = _e(item["attempt"] or 0)
    if item["max_attempts"]:
        text += f" of {_e(item['max_attempts'])}"
    ends = [f"{item['failures']} failed" if item["failures"] else ""]
    ends.append(f"{item['lost']} lost" if item["lost"] else "")
    told = ", ".join(e for e in ends if e)
    return text + (f' <span class="muted">({_e(told)})</span>' if told else "")


def _daemon(item: dict[str, object]) -> str:
    return f"<code>{_e(item['daemon'])}</code>" if item["daemon"] else "-"


def _job_row(job: JobSnapshot, view: ClusterView, now: float) -> str:
    """A job that is not finished: why it waits, where it runs, its latest error."""
    item = describe(job)
    driver = item["driver"]
    state = _badge(job.state)
    if job.state in _WAITING and item["waiting"]:
        state += f'<br><span class="muted">{_e(_cut(item["waiting"]))}</span>'
    host = "-"
    if driver:
        host = f"{_e(driver['host'])} <span class='muted'>pid {_e(driver['pid'])}</span>"
    cells = [
        _job_link(job.job_id),
        _e(item["name"]),
        state,
        _attempts(item),
        _daemon(item),
        host,
        _e(_age(view.checkpoint_age(job.job_id))),
        f'<td class="err">{_e(_cut(item["last_error"]))}</td>',
        _logs_links(job),
    ]
    return _row(cells)


JOB_HEADERS = (
    "job",
    "name",
    "state",
    "attempts",
    "daemon",
    "driver",
    "checkpoint",
    "error",
    "logs",
)
FINISHED_HEADERS = (
    "job",
    "name",
    "outcome",
    "attempts",
    "daemon",
    "finished",
    "took",
    "error or reason",
    "logs",
)


def _finished_row(job: JobSnapshot, now: float) -> str:
    """A finished job: how and when it ended, how long it took, where it last ran, and why
    (its error, or who cancelled it and why)."""
    item = describe(job)
    result = item["result"] or {}
    cancel = item["cancel"]
    why = result.get("error") if result.get("outcome") != "CANCELLED" else None
    if cancel:
        why = f"cancelled by {cancel.get('by') or '?'}" + (
            f": {cancel['reason']}" if cancel.get("reason") else ""
        )
    took = "-"
    ended = job.result.finished if job.result is not None else None
    start = job.submitted_at
    if start is not None and ended is not None:
        took = duration((ended - start).total_seconds())
    finished_at = result.get("finished")
    cells = [
        _job_link(job.job_id),
        _e(item["name"]),
        _badge(result.get("outcome") or job.state),
        _attempts(item),
        _daemon(item),
        f'<span title="{_e(finished_at)}">{_e(_since(ended, now))}</span>',
        _e(took),
        f'<td class="err">{_e(_cut(why))}</td>',
        _logs_links(job),
    ]
    return _row(cells)


def _row(cells: list[str]) -> str:
    return "<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in cells) + "</tr>"


def _finished_order(job: JobSnapshot) -> datetime:
    return job.result.finished if job.result is not None else EPOCH


def render(
    view: ClusterView, *, daemon_id: str, leading: bool, cluster_id: str, jobs: bool = True
) -> str:
    """The whole page for ``view``, as seen by the daemon ``daemon_id``. Without ``jobs`` (a
    request without the read token where one is configured), only what ``/api/v1/cluster``
    answers to anybody: the leader, the daemons, how many jobs are in each state; no job's id,
    error, quarantine reason or schedule, which the API gives only with the token."""
    now = time.time()
    if not jobs:
        notice = (
            "<p>Jobs, their errors, quarantine and schedules need the read token "
            "(<code>Authorization: Bearer &lt;ZKSTORE_API_READ_TOKEN&gt;</code>), as the API's "
            "<code>/api/v1/jobs</code> does.</p>"
        )
        return _document(
            cluster_id,
            daemon_id,
            leading,
            now,
            [
                _leader_section(view, now),
                _summary_section(view),
                _pools_section(view),
                _section("Jobs", notice),
            ],
        )
    live = sorted(view.live_jobs(), key=lambda j: j.job_id)
    done = sorted((j for j in view.jobs.values() if finished(j)), key=_finished_order, reverse=True)
    quarantined = [j for j in live if j.quarantine is not None]
    return _document(
        cluster_id,
        daemon_id,
        leading,
        now,
        [
            _leader_section(view, now),
            _summary_section(view),
            _pools_section(view),
            _section(
                _title("Jobs", len(live), LIVE_SHOWN, "the first"),
                _table(
                    JOB_HEADERS,
                    [_job_row(j, view, now) for j in live[:LIVE_SHOWN]],
                    "no jobs running or waiting",
                ),
            ),
            _section("Quarantine", _quarantine(quarantined, now)),
            _schedules_section(view),
            _section(
                _title("Finished", len(done), FINISHED_SHOWN, "the newest"),
                _table(
                    FINISHED_HEADERS,
                    [_finished_row(j, now) for j in done[:FINISHED_SHOWN]],
                    "no finished jobs",
                ),
            ),
        ],
    )


SCHEDULE_HEADERS = ("Schedule", "When", "Next fire", "Last run", "Its state", "Fired", "Behind")


def _schedules_section(view: ClusterView) -> str:
    """Each schedule: when it fires, its next window, its last run and that run's state."""
    rows = []
    for item in view.schedules:
        if item.get("error"):
            cells = [
                _e(item["name"]),
                f'<span class="err">{_e(item["error"])}</span>',
                "",
                "",
                "",
                "",
                "",
            ]
        else:
            state = item.get("last_state")
            cells = [
                _e(item["name"]),
                _e(item["when"]) + (" " + _badge("PAUSED") if item["paused"] else ""),
                _e(item["next"] or "-"),
                _job_link(str(item["last_run"])) if item["last_run"] else "-",
                _badge(state) if state else "-",
                _e(item["fired"]),
                _behind(item.get("behind")),
            ]
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    return _section("Schedules", _table(SCHEDULE_HEADERS, rows, "no schedules"))


def _behind(windows: object) -> str:
    """How many windows a schedule is behind: a badge when any (a catch-up, or no leader)."""
    if not isinstance(windows, int):
        return "-"
    return f'<span class="err">{windows:,} windows</span>' if windows else "0"


def _title(what: str, count: int, limit: int, which: str) -> str:
    shown = f", {which} {limit} shown: /api/v1/jobs has them all" if count > limit else ""
    return f"{what} ({count}{shown})"


def _section(title: str, body: str) -> str:
    return f"<section><h2>{_e(title)}</h2>{body}</section>"


def _leader_section(view: ClusterView, now: float) -> str:
    leader = view.leader
    if leader is None:
        lead = '<p class="muted">no leader right now</p>'
    else:
        lead = (
            f"<p>{_badge('leader', 'leader')} <b>{_e(leader.get('id'))}</b> on "
            f"{_e(leader.get('host'))} (pid {_e(leader.get('pid'))}), since "
            f"{_e(_since(view.leader_since, now))}</p>"
        )
    rows = [
        f"<tr><td><code>{_e(d.daemon_id)}</code></td><td>{_e(d.host)}</td><td>{_e(d.pid)}</td>"
        f"<td>{_role(d, now)}</td>"
        f"<td>{_e(d.used)}/{_e(d.slots) if not d.lost else '-'}</td>"
        f"<td>{_e(','.join(f'{k}={v}' for k, v in sorted(d.labels.items())) or '-')}</td></tr>"
        for d in view.daemons
    ]
    daemons = _table(
        ("daemon", "host", "pid", "role", "slots used", "labels"), rows, "no daemon is running"
    )
    return _section("Leader and daemons", lead + daemons)


def _role(daemon: DaemonInfo, now: float) -> str:
    if daemon.lost:
        since = (
            f" since {_e(time_text(daemon.lost_since))} ({_since(daemon.lost_since, now)})"
            if daemon.lost_since is not None
            else ""
        )
        return (
            f"{_badge('GONE', 'RESTARTING')} <span class='muted'>left the fleet{since}; "
            f"{_e(daemon.used)} attempt(s) still placed on it (their drivers may live on: "
            "adopted when it is back, placed again once they are known gone)</span>"
        )
    return ("leader" if daemon.leader else "member") + (" (drained)" if daemon.drained else "")


def _summary_section(view: ClusterView) -> str:
    chips = "".join(
        f"<span>{_badge(state)} {count}</span>" for state, count in sorted(view.states().items())
    )
    return _section("Jobs by state", f'<div class="chips">{chips or "no jobs"}</div>')


POOL_HEADERS = ("Pool", "Running", "Waiting", "Limit", "Priority")


def _pools_section(view: ClusterView) -> str:
    """Each pool's jobs running (attempts placed) and waiting for a start, with its limit and
    priority (``zkstore pools list``): ``default`` and every pool with a record or a job."""
    running, waiting = pool_counts(view.jobs.values())
    names = sorted({DEFAULT_POOL, *view.pools, *running, *waiting})
    rows = []
    for name in names:
        record = view.pools.get(name)
        cells = [
            _e(name),
            _e(running[name]),
            _e(waiting[name]),
            _e(record.limit_shown() if record is not None else "none"),
            _e(record.priority if record is not None else 0),
        ]
        rows.append(_row(cells))
    return _section("Pools", _table(POOL_HEADERS, rows, "no pools"))


def _quarantine(jobs: list[JobSnapshot], now: float) -> str:
    rows = []
    for job in jobs:
        entry = job.quarantine
        assert entry is not None
        rows.append(
            f"<tr><td>{_job_link(job.job_id)}</td><td class='err'>{_e(entry.reason)}</td>"
            f"<td>{_e(_since(entry.since, now))}</td></tr>"
        )
    return _table(("job", "reason", "since"), rows, "nothing in quarantine")


def _document(
    cluster_id: str,
    daemon_id: str,
    leading: bool,
    now: float,
    sections: list[str],
    *,
    title: str | None = None,
    back: bool = False,
) -> str:
    """A whole page: the header (the cluster, ``title`` after it; with ``back``, a link to the
    status page), ``sections``; it reloads itself every :data:`REFRESH_SECONDS`."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    role = "leader" if leading else "member"  # as the daemons table says
    heading = f"zkstore · {_e(cluster_id)}" + (f" · {_e(title)}" if title else "")
    home = '<a href="/">status page</a> · ' if back else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{REFRESH_SECONDS}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{heading}</title><style>{_STYLE}</style></head>
<body><header><h1>{heading}</h1>
<span class="meta">served by <b>{_e(daemon_id)}</b> ({role}) · read {_e(stamp)} ·
refreshes every {REFRESH_SECONDS} s · {home}<a href="/api/v1/cluster">API</a> ·
<a href="/metrics">metrics</a></span></header>
<main>{"".join(sections)}</main></body></html>
"""


#: The pieces another page of the site (:mod:`recovery.observe.jobpage`) is built with.
escape = _e
badge = _badge
table = _table
since = _since
section = _section
document = _document


def render_unavailable(cluster_id: str, daemon_id: str, why: str) -> str:
    """The page when ZooKeeper cannot be read: say so, keep refreshing."""
    body = _section("ZooKeeper unavailable", f"<p class='err'>{_e(why)}</p>")
    return _document(cluster_id, daemon_id, False, time.time(), [body])
