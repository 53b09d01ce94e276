"""The records of a job's outputs: the output (where its data lives) and one per commit.

A commit's node holds the parts' paths relative to the output's place, each under the staging
directory of the attempt that committed it (``attempt-<n>/...``), at most :data:`MAX_PARTS` of
them and :data:`MAX_COMMIT_BYTES` in all: a step that writes more files commits their directory
(a Spark write's directory is one part). So no node is ever near ZooKeeper's 64 KB (invariant
7), however many commits an output gets: each commit is a node of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from zkstore.errors import TooLarge
from zkstore.protocol import FEATURES, OUTPUTS
from zkstore.records.record import Record

__all__ = [
    "MAX_COMMIT_BYTES",
    "MAX_PARTS",
    "MAX_PART_CHARS",
    "Output",
    "OutputCommit",
    "part_problem",
    "staging_dir",
]

#: Parts one commit may name, the longest part path, and the most bytes a commit's node holds.
MAX_PARTS = 1000
MAX_PART_CHARS = 1024
MAX_COMMIT_BYTES = 48 * 1024

_PROTOCOL = FEATURES[OUTPUTS].protocol
_CONTROL = re.compile(r"[\x00-\x1f\x7f%\\]")


def staging_dir(attempt: int) -> str:
    """The directory (relative to the output's place) where ``attempt`` stages its parts."""
    return f"attempt-{attempt}"


def part_problem(part: str, attempt: int) -> str | None:
    """What is wrong with ``part`` as a part path of ``attempt``, or None."""
    if not isinstance(part, str) or not part or len(part) > MAX_PART_CHARS:
        return f"a part is a path of 1-{MAX_PART_CHARS} characters"
    segments = part.split("/")
    if segments[0] != staging_dir(attempt) or len(segments) < 2:
        return f"part {part[:200]!r} is not under {staging_dir(attempt)}/"
    if any(s in {"", ".", ".."} for s in segments) or _CONTROL.search(part):
        return f"part {part[:200]!r} has an empty, '.' or '..' segment, or a control character"
    return None


@dataclass(frozen=True)
class Output(Record):
    """``R/jobs/<job>/outputs/<name>``: the output's place (the URI of the artifact that owns
    its data, ``artifact``), declared by the first attempt that stages a part of it."""

    name: str = ""
    uri: str = ""
    artifact: str = ""
    created: str = ""
    protocol: int = _PROTOCOL

    times = frozenset({"created"})


@dataclass(frozen=True)
class OutputCommit(Record):
    """``R/jobs/<job>/outputs/<name>/<%019d>``: the parts committed with checkpoint ``commit``
    by ``attempt`` (created in that checkpoint's transaction)."""

    output: str = ""
    commit: int = 0
    attempt: int = 0
    parts: list[str] = field(default_factory=list)
    committed: str = ""
    protocol: int = _PROTOCOL

    times = frozenset({"committed"})
    max_bytes = MAX_COMMIT_BYTES + 1024

    def problem(self) -> str | None:
        if len(self.parts) > MAX_PARTS:
            return f"{len(self.parts)} parts, over {MAX_PARTS}"
        for part in self.parts:
            found = part_problem(part, self.attempt)
            if found is not None:
                return found
        if len(set(self.parts)) != len(self.parts):
            return "a part is named twice"
        return None

    def checked_bytes(self) -> bytes:
        """The node's data; :class:`TooLarge` (nothing written) past the bounds."""
        problem = self.problem()
        if problem is not None:
            raise TooLarge(f"commit of output {self.output!r}: {problem}")
        data = self.to_bytes()
        if len(data) > MAX_COMMIT_BYTES:
            raise TooLarge(
                f"commit of output {self.output!r}: {len(self.parts)} parts take {len(data)} "
                f"bytes, over {MAX_COMMIT_BYTES}: commit their directory as one part"
            )
        return data
