"""A job that reports what its driver's Spark UI is, for tests/spark/test_spark_ui.py: where it
listens (from ``/proc/net/tcp*``, as the kernel has it) and whether it lets anyone kill."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

#: A listening socket's state in /proc/net/tcp*.
LISTEN = "0A"


def listening(port: int) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp and tcp6 show them) listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if int(hex_port, 16) == port and fields[3] == LISTEN:
                found.append(address)
    return found


def ui_report(ctx: Any, out: str, gate: str) -> None:
    """Start Spark, write where its UI listens and its kill setting to ``out``, then wait for
    ``gate`` (the test reads the record of the Spark application meanwhile)."""
    context = ctx.spark.sparkContext
    url = context.uiWebUrl
    port = int(url.rsplit(":", 1)[1])
    report = {
        "url": url,
        "listening": listening(port),
        "kill": context.getConf().get("spark.ui.killEnabled", None),
        "total": ctx.spark.range(10).groupBy().sum().collect()[0][0],
    }
    written = Path(f"{out}.partial")  # whole or not at all: the test reads it as it comes
    written.write_text(json.dumps(report))
    written.replace(out)
    deadline = time.monotonic() + 300
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
