"""Seeing the runtime work: every daemon's HTTP side (health, leader, a JSON API, Prometheus
metrics, a status page).

::

    cluster_view.py
                   one read of what the API, the page and the metrics show
    metrics.py     the Prometheus registry of a daemon, collected from ZooKeeper at scrape time
    page.py        the status page, server-rendered HTML
    jobpage.py     a job's page ``/jobs/<id>``: its definition, state, timeline, latest log
    timeline.py    a job's attempts as inline SVG (pure)
    access.py      who may ask what: the host names a daemon answers to, its two tokens
    http_api.py    the HTTP routes (aiohttp): reads only, plus token-guarded mutations
    schedule_routes.py
                   the schedule routes, beside the jobs'
    guard.py       the bounds on connections: how many, how long to send a request or take an
                   answer
    server.py      the HTTP server's own thread and event loop, started and stopped by the daemon
"""
