"""Development commands of the store: ``zkstore zookeeper``.

Loaded by name only when run (:class:`recovery.cli.base.DevCommand`): no production module
imports :mod:`zkstore.dev`.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from zkstore.dev.embedded import EmbeddedZooKeeper


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="port (default: a free one)")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    help="data directory to keep (default: a temporary one, removed on exit)",
)
def zookeeper(port: int, data_dir: str | None) -> None:
    """Run the embedded ZooKeeper in the foreground, for development.

    Starts a single ZooKeeper server from the jars of the installed pyspark wheel with this
    machine's java, on 127.0.0.1, prints its connect string and runs until Ctrl-C or SIGTERM.
    Its JVM is tuned for a short, light life (the C1 compiler alone: far less CPU at start); a
    production ensemble runs ZooKeeper's own distribution instead.
    """
    server = EmbeddedZooKeeper(port=port, data_dir=data_dir)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    click.echo("starting ZooKeeper from the pyspark jars...", err=True)
    server.start()
    try:
        click.echo(server.connect_string)
        click.echo(
            f"ZooKeeper is up (pid {server.pid}, data in {server.data_dir}).\n"
            f"  export ZKSTORE_ZK={server.connect_string}\n"
            "Press Ctrl-C to stop.",
            err=True,
        )
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        click.echo("stopping ZooKeeper...", err=True)
        server.stop(remove_data=data_dir is None)
