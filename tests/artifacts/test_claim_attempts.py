"""Claims under an extra artifact root are per attempt, as places in the storage root are
(issue 60 item 5): a claim names the attempt whose record made it, so a resumed attempt never
takes a claim a dead attempt left (its record deleted by the job's own code, say) as its own.

The first test failed before: the second attempt took the first one's claim as its own and was
then refused the place, which held the first attempt's data ("holds data already"); the
second, because a release checked job, name and place, not the attempt.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.stand_in_attempts import ctx_artifacts
from zkstore.cluster import Cluster
from zkstore.errors import UntrustedPayload
from zkstore.jobs.claims import Claim
from zkstore.jobs.job_artifacts import Artifact

pytestmark = pytest.mark.integration


@pytest.fixture
def extra(cluster: Cluster, tmp_path: Path) -> Iterator[tuple[Cluster, Path]]:
    root = tmp_path / "extra"
    root.mkdir()
    with Cluster.open(cluster.config.with_changes(artifact_roots=(f"file://{root}",))) as c:
        yield c, root


def claim_at(cluster: Cluster, job_id: str, uri: str) -> Claim:
    mark = f"{cluster.artifacts(job_id).claims.nodes(uri)[-1]}/="
    data, stat = cluster.zk.get(mark)
    return Claim.from_znode(data, stat, mark)


def test_a_resumed_attempt_releases_a_claim_its_dead_attempt_left(
    extra: tuple[Cluster, Path],
) -> None:
    cluster, root = extra
    first = ctx_artifacts(cluster, "j", attempt=1)
    staged = first.register("stage", f"file://{root}/stage")
    (root / "stage").mkdir()
    (root / "stage" / "part-0").write_bytes(b"attempt 1's")
    cluster.zk.delete(cluster.layout.artifact("j", "stage"))  # job code deleted its record
    second = ctx_artifacts(cluster, "j", attempt=2)
    assert second.register("stage", f"file://{root}/stage") == staged
    assert not (root / "stage").exists(), "attempt 1's data is not attempt 2's"
    assert claim_at(cluster, "j", staged).attempt == 2
    record = second.get("stage")
    assert record is not None and record.attempt == 2


def test_a_record_of_another_attempt_releases_nothing_under_a_claim(
    extra: tuple[Cluster, Path],
) -> None:
    cluster, root = extra
    first = ctx_artifacts(cluster, "j", attempt=1)
    first.register("stage", f"file://{root}/stage", scope="job")
    (root / "stage").mkdir()
    (root / "stage" / "part-0").write_bytes(b"attempt 1's")
    path = cluster.layout.artifact("j", "stage")
    data, stat = cluster.zk.get(path)
    record = Artifact.from_znode(data, stat, path)
    cluster.zk.set(path, replace(record, attempt=3).to_bytes())  # rewritten by job code
    with pytest.raises(UntrustedPayload, match="claimed by attempt 1 of the job, not attempt 3"):
        cluster.artifacts("j").release("stage", fence=None)
    assert (root / "stage" / "part-0").read_bytes() == b"attempt 1's"
