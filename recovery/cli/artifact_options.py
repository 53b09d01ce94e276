"""How the commands show and reach artifacts: ``--artifact-root``, and the lines of
``jobs show``."""

from __future__ import annotations

from typing import Any

import click

from zkstore.config import StoreConfig

__all__ = ["artifact_lines", "artifact_root_option", "with_roots"]


def artifact_root_option(func: Any) -> Any:
    return click.option(
        "--artifact-root",
        "artifact_roots",
        multiple=True,
        metavar="URL",
        help="a place besides the storage root where jobs may register artifacts (fsspec URL, "
        "repeatable) [env ZKSTORE_ARTIFACT_ROOTS, comma-separated]; artifact data is only ever "
        "deleted under these and the storage root",
    )(func)


def with_roots(config: StoreConfig, roots: tuple[str, ...]) -> StoreConfig:
    """``config`` with the ``--artifact-root`` URLs given (or those of the environment),
    validated: :class:`~zkstore.payloads.artifacts.ArtifactRootRefused` if one overlaps the storage
    root or another, before the command does anything."""
    from zkstore.payloads.artifacts import check_roots  # fsspec: only for the commands that use it

    config = config.with_changes(artifact_roots=tuple(roots)) if roots else config
    check_roots(config)
    return config


def artifact_lines(item: dict[str, Any]) -> dict[str, str]:
    """One table line per artifact, and one per output a finished job kept."""
    lines = {}
    for artifact in item.get("artifacts") or ():
        owner = f"attempt {artifact['attempt']}" if artifact["scope"] == "attempt" else "job"
        size = "" if artifact["size"] is None else f", {artifact['size']} bytes"
        keep = ", keep" if artifact["keep"] else ""
        lines[f"artifact {artifact['name']}"] = (
            f"{artifact['state']} ({owner}{keep}{size}) {artifact['uri']}"
        )
    for name, uri in sorted((item.get("outputs") or {}).items()):
        lines[f"output {name}"] = str(uri)
    return lines
