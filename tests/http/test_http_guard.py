"""The HTTP server's bounds on connections (recovery.observe.guard), over real sockets: past
the limit a connection is answered 503 and closed cleanly; a connection that sends no whole
request within the timeout is closed; one that stops reading its answer is aborted, so that it
holds nothing; and the server keeps answering the others throughout."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from aiohttp import web

from recovery.observe.server import HttpServer
from recovery.settings import Bounds, HttpAddress
from tests.helpers import wait_for

pytestmark = pytest.mark.integration

LIMIT = 6
TIMEOUT = 1.0
BIG = 32 * 1024 * 1024
#: a deadline the server keeps within: its timeout, and a look of the watch a second later
BOUND = (TIMEOUT + 1.0) * 5


async def small(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def big(request: web.Request) -> web.Response:
    return web.Response(body=b"x" * BIG)


@pytest.fixture
def server() -> Iterator[HttpServer]:
    app = web.Application()
    app.router.add_get("/small", small)
    app.router.add_get("/big", big)
    refused: list[int] = []
    found = HttpServer(
        app,
        HttpAddress("127.0.0.1", 0),
        Bounds(http_max_connections=LIMIT, http_timeout=TIMEOUT),
        on_refused=lambda: refused.append(1),
    )
    found.start()
    found.refused = refused  # type: ignore[attr-defined]
    yield found
    found.stop()


def connect(server: HttpServer) -> socket.socket:
    assert server.bound is not None
    conn = socket.create_connection((server.bound.host, server.bound.port), timeout=BOUND)
    return conn


def read_all(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes (a reset counts as a close)."""
    found: list[bytes] = []
    try:
        while chunk := conn.recv(1 << 20):
            found.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(found)


def get(server: HttpServer, path: str = "/small") -> bytes:
    with connect(server) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return read_all(conn)


def open_connections(server: HttpServer) -> int:
    assert server.guard is not None
    return server.guard.open


def test_past_the_limit_a_connection_is_answered_503_and_closed(server: HttpServer) -> None:
    held = [connect(server) for _ in range(LIMIT)]
    try:
        wait_for(lambda: open_connections(server) == LIMIT, timeout=BOUND, what="held")
        answer = get(server)
        assert answer.startswith(b"HTTP/1.1 503 ")
        assert b"Retry-After: 1" in answer and b"too many connections" in answer
        assert server.refused == [1]  # type: ignore[attr-defined]
    finally:
        for conn in held:
            conn.close()


def test_a_connection_that_sends_no_request_in_time_is_closed(server: HttpServer) -> None:
    """Idle ones, and one that trickles its request line: closed by the server (the client
    reads its end), and the server answers a new one afterwards."""
    idle = [connect(server) for _ in range(LIMIT - 1)]
    slow = connect(server)
    slow.sendall(b"GET /sm")
    try:
        for conn in [*idle, slow]:
            assert read_all(conn) in (b"", b"HTTP/1.1 ")  # closed (nothing answered)
        wait_for(lambda: open_connections(server) == 0, timeout=BOUND, what="all closed")
        assert get(server).startswith(b"HTTP/1.1 200 ")
    finally:
        for conn in [*idle, slow]:
            conn.close()


def test_a_client_that_stops_reading_its_answer_is_let_go(server: HttpServer) -> None:
    """Connections that asked for a big answer and read none of it: without the watch they
    would hold the server's connections for ever (every next one refused)."""
    stuck = []
    for _ in range(LIMIT):
        conn = connect(server)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        conn.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        stuck.append(conn)
    try:
        wait_for(lambda: open_connections(server) == LIMIT, timeout=BOUND, what="stuck")
        wait_for(lambda: open_connections(server) == 0, timeout=BOUND, what="let go")
        assert get(server).startswith(b"HTTP/1.1 200 ")
    finally:
        for conn in stuck:
            conn.close()


def test_a_reader_that_keeps_up_gets_its_whole_answer(server: HttpServer) -> None:
    answer = get(server, "/big")
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"x" * 1024)
    assert len(answer) > BIG
