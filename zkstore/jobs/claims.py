"""Claims: which job owns each place under the extra artifact roots, so that two jobs' artifacts
never overlap.

A claim is a znode ``=`` at the end of a path that spells the place, one znode per segment::

    R/artifact-claims/s3/bucket/runs/nightly-7/=     {"job", "name", "uri", "claimed"}
    R/artifact-claims/file/scratch/reports/2026/=

Each segment is case folded (two places that differ only in case are one: the safe side) and
quoted into one znode name. A place is claimed when its node has a ``=`` child; a place under
it is claimed when its node has any other child. Registering a place claims it in the same
transaction as the artifact's record, and that transaction holds only if nothing overlapping is
claimed at that moment:

- no ancestor is claimed: for each existing ancestor, ``=`` is created and deleted in the
  transaction (it fails if one exists; :func:`zkstore.zookeeper.ops.absent`), each missing ancestor
  is created by it (it fails if somebody made it meanwhile);
- nothing below is claimed: the place's own node is created by the transaction, or, if it
  exists, deleted and created again (the delete fails if it has any child).

So two registrations of overlapping places cannot both commit, whatever their order. A claim is
deleted with its record (the release's last transaction), except a kept output's: that claim
stays while its job's result lists it, and goes with the result (retention, ``jobs forget``).
Empty nodes left on the way are pruned afterwards (best effort; an empty node claims nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

from zkstore.errors import (
    ConflictError,
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    UntrustedPayload,
)
from zkstore.layout import Layout
from zkstore.records.record import Record
from zkstore.zookeeper.ops import Check, Create, Delete, Fence, Op, absent

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["MARK", "MAX_SUBTREE", "ArtifactClaims", "Claim", "LeftClaim", "claim_key"]

logger = logging.getLogger(__name__)

MARK = "="

#: Nodes of a subtree looked at for a claim below a place, at most (then it is taken as claimed).
MAX_SUBTREE = 10_000


@dataclass(frozen=True)
class Claim(Record):
    """``R/artifact-claims/.../=``: the place is artifact ``name`` of job ``job``."""

    job: str = ""
    name: str = ""
    uri: str = ""
    claimed: str = ""
    #: the attempt whose record made it (the record's ``attempt``); None: made before claims
    #: were per attempt (it then stands for whichever attempt's record names the place)
    attempt: int | None = None

    optional = frozenset({"attempt"})
    times = frozenset({"claimed"})

    def owns(self, other: Claim) -> bool:
        """The same job's same artifact at the same place, made by the same attempt."""
        return self.same_place(other) and (
            self.attempt is None or other.attempt is None or self.attempt == other.attempt
        )

    def same_place(self, other: Claim) -> bool:
        """The same job's artifact of the same name at the same place (any attempt)."""
        return (self.job, self.name, self.uri) == (other.job, other.name, other.uri)

    def left_for(self, other: Claim) -> bool:
        """This claim is another attempt's of the same job, name and place as ``other``: an
        attempt that is gone (one attempt lives at a time) left it without its record."""
        return self.same_place(other) and not self.owns(other)


class LeftClaim(HandleExists):
    """A registration met the claim another attempt of the same job left at the place without
    its record (:meth:`Claim.left_for`): not this attempt's; its place is released first."""

    def __init__(self, claim: Claim) -> None:
        super().__init__(
            f"artifact {claim.name!r} of job {claim.job} at {claim.uri}: attempt "
            f"{claim.attempt}'s claim, left without its record",
            path=None,
        )
        self.claim = claim


def claim_key(uri: str) -> tuple[str, ...]:
    """The znode names spelling ``uri``'s place: its protocol, then each segment, case folded."""
    protocol, _, rest = uri.partition("://")
    return tuple(_name(part) for part in (protocol, *rest.split("/")) if part)


def _name(segment: str) -> str:
    name = quote(segment.casefold(), safe="")
    return name.replace(".", "%2E") if name in {".", ".."} else name


class ArtifactClaims:
    """The claims of one cluster (:mod:`zkstore.jobs.claims`)."""

    def __init__(self, zk: ZooKeeper, layout: Layout) -> None:
        self.zk = zk
        self.base = layout.artifact_claims

    def nodes(self, uri: str) -> list[str]:
        """The nodes from the protocol's down to the place's own."""
        nodes, path = [], self.base
        for name in claim_key(uri):
            path = f"{path}/{name}"
            nodes.append(path)
        return nodes

    def is_claim_path(self, path: str | None) -> bool:
        return path is not None and path.startswith(self.base + "/")

    # -- claiming ------------------------------------------------------------------------------

    def claim_ops(self, claim: Claim, *, fence: Fence | None = None) -> list[Op]:
        """The ops that claim ``claim.uri`` for its job and name, to commit with its record.

        Raises :class:`HandleExists` (naming the other artifact) if a place overlapping it is
        claimed now; the ops fail (nothing applied) if one is claimed before they commit.
        A claim of this very artifact is kept (the ops only check it is still there).
        """
        nodes = self.nodes(claim.uri)
        marks = [f"{node}/{MARK}" for node in nodes]
        found = self.zk.exists_many([*nodes, *marks])
        stats, marked = found[: len(nodes)], found[len(nodes) :]
        mine = self._read(marks[-1]) if marked[-1] is not None else None
        if mine is not None and mine.owns(claim) and mine.version is not None:
            return [Check(marks[-1], mine.version)]
        if mine is not None and mine.left_for(claim):
            raise LeftClaim(mine)
        for mark, stat in zip(marks, marked, strict=True):
            if stat is not None:
                raise self._overlap(claim, mark)
        leaf = stats[-1]
        if leaf is not None and leaf.numChildren:
            self._clear_below(claim, nodes[-1], fence)
        ops: list[Op] = []
        for depth, (node, stat) in enumerate(zip(nodes[:-1], stats[:-1], strict=True)):
            if stat is None:
                ops.append(Create(node))
            elif depth > 0:  # the protocol's node is never a place
                ops.extend(absent(f"{node}/{MARK}"))
        # The place's node and its claim are the job's (zkstore.zookeeper.identity): no other job's
        # identity can delete the claim, nor change it.
        place = Create(nodes[-1], owner=claim.job)
        if leaf is None:
            ops.append(place)
        else:
            ops += [Delete(nodes[-1]), place]  # the delete fails if it has children
        ops.append(Create(marks[-1], claim.to_bytes(), owner=claim.job))
        return ops

    def _clear_below(self, claim: Claim, node: str, fence: Fence | None) -> None:
        """Raise the overlap if anything below ``node`` is claimed; else prune the empty nodes
        there (a release that stopped before pruning left them)."""
        levels, seen = [[node]], 0
        while levels[-1]:
            below = []
            for parent, kids in zip(levels[-1], self.zk.children_many(levels[-1]), strict=True):
                if kids and MARK in kids:
                    raise self._overlap(claim, f"{parent}/{MARK}")
                below += [f"{parent}/{kid}" for kid in kids or ()]
            seen += len(below)
            if seen > MAX_SUBTREE:
                raise HandleExists(
                    f"artifact {claim.name!r} at {claim.uri} covers over {MAX_SUBTREE} places of "
                    "other artifacts",
                    path=node,
                )
            levels.append(below)
        for level in reversed(levels[1:]):
            self.zk.commit_many([[Delete(path)] for path in level], fence=fence)

    def _overlap(self, claim: Claim, mark: str) -> HandleExists:
        other = self._read(mark)
        what = (
            f"artifact {other.name!r} of job {other.job} at {other.uri}"
            if other is not None
            else f"an artifact claimed at {mark} (unreadable claim)"
        )
        return HandleExists(
            f"artifact {claim.name!r} at {claim.uri} overlaps {what}: releasing one would "
            "delete the other",
            path=mark,
        )

    def _read(self, mark: str) -> Claim | None:
        found = self.zk.get_if_exists(mark)
        if found is None:
            return None
        try:
            return Claim.from_znode(found[0], found[1], mark)
        except CorruptRecord as exc:
            logger.warning("%s", exc)
            return None

    def owner(self, path: str) -> str | None:
        """The job whose claim ``path`` is (a claim, or a claimed place's node), None for a
        node of the shared index (or a claim that cannot be read): the ACL it should have
        (:func:`zkstore.admin.acl.apply_acl`)."""
        if not self.is_claim_path(path):
            return None
        mark = path if path.rsplit("/", 1)[-1] == MARK else f"{path}/{MARK}"
        claim = self._read(mark)
        return None if claim is None else claim.job

    # -- releasing -----------------------------------------------------------------------------

    def holder(self, job_id: str, name: str, uri: str, attempt: int | None) -> Claim:
        """The claim that makes ``uri`` artifact ``name`` of job ``job_id`` (registered by
        ``attempt``), read again just before its data is deleted; :class:`UntrustedPayload` if
        there is none, it is another attempt's, or another place overlapping it is claimed too,
        or it is not the job's own (then nothing may be deleted)."""
        nodes = self.nodes(uri)
        marks = [f"{node}/{MARK}" for node in nodes]
        ancestors = self.zk.exists_many(marks[:-1])
        (kids,) = self.zk.children_many([nodes[-1]])
        claim = self._read(marks[-1])
        owner = Claim(version=None, job=job_id, name=name, uri=uri, attempt=attempt)
        why = None
        if claim is None:
            why = "no claim (it was not registered through this configuration)"
        elif claim.left_for(owner):
            why = f"claimed by attempt {claim.attempt} of the job, not attempt {attempt}"
        elif not claim.owns(owner):
            why = f"claimed by artifact {claim.name!r} of job {claim.job}"
        elif any(stat is not None for stat in ancestors):
            why = "a place above it is claimed too"
        elif sorted(kids or ()) != [MARK]:
            why = "places below it are claimed too"
        else:
            why = self._unheld(job_id, nodes[-1], marks[-1])
        if why is not None or claim is None:
            raise UntrustedPayload(
                f"artifact {name!r} of job {job_id} at {uri[:300]}: {why}: its data is left alone"
            )
        return claim

    def _unheld(self, job_id: str, place: str, mark: str) -> str | None:
        """Why the claim at ``mark`` (on ``place``) is not one job ``job_id`` made under its
        own identity, that no other can change; None if it is, or if there are no identities
        to tell (no digest credentials: every client may write every node)."""
        policy = self.zk.acl_policy
        if policy is None:
            return None
        for path, is_mark in ((place, False), (mark, True)):
            acls, _ = self.zk.get_acls(path)
            why = policy.claim_unheld(acls, job_id, mark=is_mark)
            if why is not None:
                node = "the claim" if is_mark else "its place"
                return f"its claim is not the job's own ({node}: {why})"
        return None

    def unclaim_ops(self, claim: Claim) -> list[Op]:
        """Delete the claim and its place's node (the job's: nobody else could delete it later)."""
        assert claim.version is not None
        place = self.nodes(claim.uri)[-1]
        return [Delete(f"{place}/{MARK}", claim.version), Delete(place)]

    def prune(self, uri: str, fence: Fence | None) -> None:
        """Delete the place's node and its empty ancestors (never the protocol's), deepest
        first; stops at one that is not empty. Best effort: an empty node claims nothing."""
        for node in reversed(self.nodes(uri)[1:]):
            try:
                self.zk.commit([Delete(node)], fence=fence)
            except HandleNotFound as exc:
                if exc.path != node:
                    logger.debug("claims: %s stays (%s)", node, exc)
                    return
            except ConflictError as exc:
                logger.debug("claims: %s stays (%s)", node, exc)
                return

    def output_ops(
        self,
        outputs: Sequence[tuple[str, Mapping[str, str] | None]],
        claimed: Callable[[str], bool],
    ) -> list[list[Op]]:
        """Per ``(job, outputs)``, the ops deleting the claims of its kept outputs (those the
        job holds: a claim of somebody else is left alone), read in one pipelined round."""
        wanted = [
            (index, Claim(version=None, job=job, name=name, uri=uri))
            for index, (job, kept) in enumerate(outputs)
            for name, uri in sorted((kept or {}).items())
            if claimed(uri)
        ]
        marks = [f"{self.nodes(claim.uri)[-1]}/{MARK}" for _, claim in wanted]
        ops: list[list[Op]] = [[] for _ in outputs]
        for (index, claim), mark, item in zip(wanted, marks, self.zk.get_many(marks), strict=True):
            if item is None:
                continue
            try:
                found = Claim.from_znode(item[0], item[1], mark)
            except CorruptRecord:
                continue
            if found.owns(claim) and found.version is not None:
                ops[index].append(Delete(mark, found.version))
        return ops

    def prune_outputs(
        self,
        outputs: Mapping[str, str] | None,
        claimed: Callable[[str], bool],
        *,
        fence: Fence | None,
    ) -> None:
        """Prune the empty nodes of kept outputs whose claims were deleted."""
        for uri in sorted((outputs or {}).values()):
            if claimed(uri):
                self.prune(uri, fence)
