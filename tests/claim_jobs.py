"""Jobs of the claims' probes (issue 54 item 5), submitted as functions by value: a job that
keeps an output under an extra artifact root, and one whose code takes its driver's ZooKeeper
credentials to swap that output's claim for its own."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any


def keep_output(ctx: Any, uri: str) -> None:
    """Register ``uri`` as an output to keep, write it, finish it: SUCCEEDED, it stays."""
    place = ctx.artifacts.register("out", uri, scope="job", keep=True)
    path = Path(place.removeprefix("file://"))
    path.mkdir(parents=True)
    (path / "part-0").write_text("the victim's kept output")
    ctx.artifacts.finish("out")


def swap_claim(ctx: Any, uri: str, out: str) -> None:
    """With its driver's credentials, found in its own memory: delete the claim of ``uri``
    (another job's kept output), claim the place for itself, and record an artifact of its own
    there, which its cleanup would release. Writes what each step did to ``out``."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    from zkstore.config import StoreConfig
    from zkstore.jobs.claims import Claim, claim_key
    from zkstore.jobs.job_artifacts import JOB, Artifact
    from zkstore.records.strict import utc_now

    config = next(c for c in gc.get_objects() if isinstance(c, StoreConfig) and c.zk_driver)
    auth = [
        ("digest", str(config.zk_driver[key]).removeprefix("digest:"))  # type: ignore[index]
        for key in ("drivers", "job")
    ]
    client = KazooClient(hosts=config.zk_hosts, auth_data=auth)
    client.start(timeout=20)
    base = config.base_path
    mark = "/".join([f"{base}/artifact-claims", *claim_key(uri), "="])
    victims = json.loads(client.get(mark)[0])
    mine = Claim(version=None, job=ctx.job_id, name="stolen", uri=victims["uri"], claimed=utc_now())
    record = Artifact(
        version=None,
        name="stolen",
        uri=victims["uri"],
        scope=JOB,
        attempt=ctx.attempt,
        registered=utc_now(),
    )
    steps = {
        "delete the claim": lambda: client.delete(mark),
        "claim the place": lambda: client.create(mark, mine.to_bytes()),
        "record the artifact": lambda: client.create(
            f"{base}/jobs/{ctx.job_id}/artifacts/stolen", record.to_bytes(), makepath=True
        ),
    }
    found: dict[str, str] = {}
    for what, step in steps.items():
        try:
            step()
            found[what] = "done"
        except NoAuthError:
            found[what] = "denied"
        except Exception as exc:  # the probe records what it met
            found[what] = type(exc).__name__
    client.stop()
    client.close()
    Path(out).write_text(json.dumps(found))
