"""The suite's ZooKeeper servers, made cheap to start: a class-data archive of the classes a
server loads (:func:`zkstore.dev.embedded.make_class_data`), which every embedded server the
suite starts maps (:data:`~zkstore.dev.embedded.CLASS_DATA_ENV`: this process's, every worker's
and every command's it starts): about 0.5 s of CPU a start instead of 0.9 s, for some forty
servers a run (each test's own, the ensembles', those stopped and started again).

The archive lives in the virtual environment, named for the ``java`` and the jars it was made
for (:func:`~zkstore.dev.embedded.class_data_key`): another JVM or other jars mean another name,
and the old archive is removed when the new one is made. An archive is used only while it
matches the digest written beside it (a damaged one would crash the JVM mapping it).

    python -m tests.zk_jvm     # make the archive if missing (make pytest does, once a venv)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from zkstore.dev.embedded import (
    CLASS_DATA_ENV,
    class_data_key,
    class_data_verified,
    make_class_data,
)

#: the virtual environment's (made again with it)
HOME = Path(sys.prefix) / "zk-jvm"


def archive() -> Path:
    """Where the archive for this ``java`` and these jars is (it may not exist)."""
    return HOME / f"zk-{class_data_key()}.jsa"


def environment() -> dict[str, str]:
    """The variable that makes the suite's servers map the archive (the path, made or not: a
    server maps it only if it exists and matches its digest)."""
    return {CLASS_DATA_ENV: str(archive())}


def report() -> str:
    """One line for the suite's header: whether its ZooKeeper servers map the archive."""
    found = archive()
    if class_data_verified(found):
        return f"ZooKeeper JVMs: classes mapped from {found}"
    return f"ZooKeeper JVMs: no class-data archive ({found} missing: python -m tests.zk_jvm)"


def main() -> None:
    found = archive()
    if class_data_verified(found):
        print(f"verified {found}")
        return
    started = time.monotonic()
    make_class_data(found)
    for stale in HOME.glob("zk-*.jsa*"):  # archives (and their digests) of other JVMs or jars
        if not stale.name.startswith(found.name):
            stale.unlink(missing_ok=True)
    print(f"made {found} in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
