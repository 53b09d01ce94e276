"""Seeing the runtime work: every daemon's HTTP side (health, leader, a JSON API, Prometheus
metrics, a status page).

::

    view.py        one read of what the API, the page and the metrics show
    metrics.py     the Prometheus registry of a daemon, collected from ZooKeeper at scrape time
    page.py        the status page, server-rendered HTML
    access.py      who may ask what: the host names a daemon answers to, its two tokens
    api.py         the HTTP routes (aiohttp): reads only, plus token-guarded mutations
    server.py      the HTTP server's own thread and event loop, started and stopped by the daemon
"""
