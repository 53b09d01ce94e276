"""What the command line, the HTTP API and the job page show of a job's outputs.

While the job's records live, an output is read from ZooKeeper (its commits: exactly what was
committed, nothing staged). Once the job is over its records are gone: a kept output (a
SUCCEEDED job's, listed in its result as ``output.<name>``) is read from its newest manifest
file, which the job's cleanup wrote from the records before deleting them.

In between, the cleanup deletes the records node by node (after the kept outputs' files are
written): a reader there meets an output whose oldest commits are gone, or no output record at
all. So an output the result keeps is read from its files whenever they reach as far as its
records (the newest commit): never a manifest with commits missing, never "no output". Its
records win only while they are newer, before the cleanup wrote the last file (nothing is
deleted before that).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zkstore.errors import CorruptRecord, HandleNotFound, JobNotFound, UntrustedPayload
from zkstore.jobs.outputs.manifest import FORMAT, MANIFESTS, Manifest, hadoop_url, read_manifest
from zkstore.jobs.outputs.output_store import validate_output_name
from zkstore.records.strict import load_object

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["KEPT_PREFIX", "list_outputs", "paths", "show_output"]

#: How a kept output is named in its job's result (its artifact's name).
KEPT_PREFIX = "output."
_MAX_FILE = 64 * 1024 * 1024


def list_outputs(cluster: Cluster, job_id: str) -> list[dict[str, Any]]:
    """One summary per output of the job: name, uri, commits, parts, newest commit, from
    (zookeeper or manifest). :class:`JobNotFound` if the store knows no such job."""
    kept = _kept(cluster, job_id)
    found = []
    for name in sorted({*cluster.outputs(job_id).names(), *kept}):
        try:
            found.append(_summary(_shown(cluster, job_id, name, kept)))
        except HandleNotFound:
            continue  # an output the job did not keep, its records removed as they were read
    return found


def show_output(cluster: Cluster, job_id: str, name: str) -> dict[str, Any]:
    """The output's manifest: {job_id, output, uri, commit, paths, commits [{commit, attempt,
    committed, parts}], from}. :class:`HandleNotFound` (exit 4) if the job has no such output."""
    validate_output_name(name)
    return _shown(cluster, job_id, name, _kept(cluster, job_id))


def _shown(cluster: Cluster, job_id: str, name: str, kept: dict[str, str]) -> dict[str, Any]:
    live = _live(cluster, job_id, name)
    if name in kept:
        stored = _from_file(cluster, job_id, name, kept[name])
        if live is None or live["commit"] <= stored["commit"]:
            return stored  # as far as the records reach, and whole as they are deleted
    if live is not None:
        return live
    raise HandleNotFound(
        f"job {job_id} has no output {name!r}"
        + (f" (it has {', '.join(sorted(kept))})" if kept else ""),
        path=cluster.layout.output(job_id, name),
    )


def paths(shown: dict[str, Any], *, hadoop: bool = False) -> list[str]:
    found = list(shown["paths"])
    return [hadoop_url(p) for p in found] if hadoop else found


def _live(cluster: Cluster, job_id: str, name: str) -> dict[str, Any] | None:
    """The output read from its records; None without them (or removed as they were read)."""
    try:
        manifest: Manifest = cluster.outputs(job_id).manifest(name)
    except HandleNotFound:
        return None
    return {**manifest.as_dict(), "from": "zookeeper"}


def _kept(cluster: Cluster, job_id: str) -> dict[str, str]:
    """The outputs a finished job kept (name: place); :class:`JobNotFound` for no job."""
    result = cluster.results.get(job_id)
    if result is None:
        if cluster.zk.exists(cluster.layout.job_dir(job_id)) is None and (
            cluster.zk.exists(cluster.layout.job_handle(job_id)) is None
        ):
            raise JobNotFound(f"no job {job_id!r}", path=cluster.layout.job_dir(job_id))
        return {}
    return {
        key.removeprefix(KEPT_PREFIX): uri
        for key, uri in (result.outputs or {}).items()
        if key.startswith(KEPT_PREFIX)
    }


def _from_file(cluster: Cluster, job_id: str, name: str, uri: str) -> dict[str, Any]:
    space = cluster.artifact_space
    listed = space.objects(job_id, f"{uri}/{MANIFESTS}")

    def fetch(base: str) -> bytes:
        raw = space.fetch(job_id, f"{uri}/{MANIFESTS}/{base}", max_bytes=_MAX_FILE)
        load_object(raw, max_bytes=_MAX_FILE, max_depth=4)  # bounded before it is parsed
        return raw

    try:
        data = read_manifest([o.uri.rsplit("/", 1)[-1] for o in listed], fetch, where=uri)
    except ValueError as exc:
        raise CorruptRecord(f"{uri}/{MANIFESTS}: not a manifest ({exc})") from None
    if data is None:
        return {
            "format": FORMAT,
            "job_id": job_id,
            "output": name,
            "uri": uri,
            "commit": 0,
            "paths": [],
            "commits": [],
            "from": "manifest",
        }
    if data["output"] != name or data["uri"] != uri:
        raise UntrustedPayload(f"{uri}/{MANIFESTS}: not the manifest of output {name!r} at {uri}")
    return {**data, "from": "manifest"}


def _summary(shown: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": shown["output"],
        "uri": shown["uri"],
        "commits": len(shown.get("commits") or []),
        "parts": len(shown["paths"]),
        "newest": shown["commit"] or None,
        "from": shown["from"],
    }
