"""A log's tail is read from its end in bounded blocks (zkstore.jobs.logs.JobLogs.tail), on
local storage and S3: long lines cost what the bound allows, each byte read once (the tail
used to prepend whole chunks and count their lines again each time: quadratic in a log of long
lines, on the HTTP side's few threads)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import make_storage
from tests.servers import S3Server
from zkstore.jobs.logs import TAIL_BLOCK, JobLogs
from zkstore.layout import StorageLayout
from zkstore.payloads.storage import StateStorage

pytestmark = pytest.mark.integration

MB = 1024 * 1024


class Counting(StateStorage):
    """The real storage, counting the bytes a tail asks for (no stand-in: every read is a read
    of the backend)."""

    asked = 0

    def fetch_range(self, uri: str, start: int, length: int) -> bytes:
        self.asked += length
        return super().fetch_range(uri, start, length)


@pytest.fixture(params=["file", "s3"])
def storage(request: Any, tmp_path: Any, s3_server: S3Server) -> StateStorage:
    made = make_storage(request.param, tmp_path, s3_server)
    made.__class__ = Counting
    return made


def write_log(storage: StateStorage, chunks: list[bytes]) -> JobLogs:
    logs = JobLogs(storage, StorageLayout("c"), "job")
    for seq, data in enumerate(chunks):
        logs.write_chunk(1, seq, data)
    return logs


def test_a_log_of_long_lines_is_tailed_in_bounded_reads(storage: Counting) -> None:
    """Eight chunks of 1 MB with no line end but the last line's: the tail asks for at most
    its byte bound, once."""
    line = b"y" * MB
    logs = write_log(storage, [line] * 8 + [b"\nthe last line\n"])
    log = logs.attempt(1)
    tail = logs.tail(log, 40, max_bytes=256 * 1024)
    assert tail.endswith(b"\nthe last line\n")
    assert len(tail) <= 256 * 1024
    assert storage.asked <= 256 * 1024


def test_a_tail_reads_only_the_blocks_its_lines_need(storage: Counting) -> None:
    lines = [f"line {n:05d}\n".encode() for n in range(100_000)]
    chunk = b"".join(lines)  # 1.1 MB
    logs = write_log(storage, [chunk, chunk])
    tail = logs.tail(logs.attempt(1), 3)
    assert tail == b"line 99997\nline 99998\nline 99999\n"
    assert storage.asked == TAIL_BLOCK  # one block from the end held them
    whole = logs.tail(logs.attempt(1), 150_000)
    assert whole.count(b"\n") == 150_000 and whole.endswith(b"line 99999\n")
