"""The servers the tests start besides ZooKeeper: a moto S3 server, a Spark standalone
master with one worker (both real: S3 over HTTP as s3fs's own tests use it, Spark from the
pyspark wheel's own launch scripts), and a webhook receiver for notifications."""

from __future__ import annotations

import http.server
import json
import select
import subprocess
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import spark_jvm
from tests.helpers import wait_for
from zkstore.dev.embedded import find_java, free_port


class S3Server:
    """A moto S3 server on 127.0.0.1 (a real HTTP server, as s3fs's own tests use)."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    def start(self) -> S3Server:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.stop()

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        urllib.request.urlopen(request, timeout=10).read()

    def options(self) -> dict[str, Any]:
        return {
            "endpoint_url": self.endpoint,
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"region_name": "us-east-1"},
        }

    def new_bucket(self) -> str:
        """Reset the server (every test starts from an empty S3) and create one bucket."""
        import boto3

        self.reset()
        name = f"b{uuid.uuid4().hex[:12]}"
        boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket=name)
        return name


class Standalone:
    """A Spark standalone master and one worker, started from the pyspark wheel."""

    def __init__(self, work: Path) -> None:
        import pyspark

        self.home = Path(pyspark.__file__).parent
        self.work = work
        self.port, self.ui = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []

    def _start(self, name: str, *args: str) -> None:
        env = {
            "SPARK_HOME": str(self.home),
            "JAVA_HOME": str(Path(find_java()).resolve().parent.parent),
            "SPARK_LOG_DIR": str(self.work),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PATH": "/usr/bin:/bin",
            **spark_jvm.daemon_environment(name),
        }
        log = open(self.work / f"{name}.log", "wb")  # noqa: SIM115 - lives as long as the process
        self.processes.append(
            subprocess.Popen(
                [str(self.home / "bin" / "spark-class"), *args], stdout=log, stderr=log, env=env
            )
        )

    def start(self) -> Standalone:
        self.work.mkdir(parents=True, exist_ok=True)
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui),
        )
        wait_for(lambda: self.status() is not None, timeout=90, what="Spark master")
        self._start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.url,
            "--host",
            "127.0.0.1",
            "--cores",
            "1",
            "--memory",
            "1g",
            "--webui-port",
            str(free_port()),
            "--work-dir",
            str(self.work / "worker"),
        )
        wait_for(lambda: (self.status() or {}).get("aliveworkers") == 1, timeout=90, what="worker")
        return self

    def status(self) -> dict[str, Any] | None:
        """The master's JSON status; None until this master serves it (a UI still starting
        answers an empty body; another process on the port answers for another master)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=2) as r:
                found: dict[str, Any] = json.load(r)
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) and found.get("url") == self.url else None

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


class NotificationReceiver:
    """A webhook receiver on 127.0.0.1 (a real HTTP server) for notification tests.

    It records every POST (``requests``: key header, body) and answers 200, or 500 to those
    ``fail(n, key)`` picks (``n``: how many requests with that key came before), or answers
    only after ``stall`` seconds to the keys in ``stalled``. ``delivered`` counts the 2xx
    answers per key: what a receiver that dedupes by key would have taken.
    """

    def __init__(
        self,
        fail: Callable[[int, str], bool] | None = None,
        *,
        stalled: frozenset[str] = frozenset(),
        stall: float = 0.0,
    ) -> None:
        self.fail = fail or (lambda n, key: False)
        self.stalled, self.stall = stalled, stall
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.delivered: Counter[str] = Counter()
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                key = self.headers.get("Idempotency-Key") or ""
                status = receiver._take(key, body)
                if key in receiver.stalled:
                    time.sleep(receiver.stall)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        #: connections accepted and not yet answered, counted under ``_accepting`` as they are
        #: accepted: :meth:`idle` never looks between an accept and its count
        self._open = 0
        self._accepting = threading.Lock()

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self) -> Any:
                with receiver._accepting:
                    got = super().get_request()
                    receiver._open += 1
                return got

            def shutdown_request(self, request: Any) -> None:
                super().shutdown_request(request)  # after its handler answered
                with receiver._accepting:
                    receiver._open -= 1

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _take(self, key: str, body: dict[str, Any]) -> int:
        with self._lock:
            seen = sum(1 for k, _ in self.requests if k == key)
            self.requests.append((key, body))
            if self.fail(seen, key) or key in self.stalled:
                return 500
            self.delivered[key] += 1
            return 200

    def url(self, path: str = "/hook/SECRET-token") -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{path}"

    def start(self) -> NotificationReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def idle(self) -> bool:
        """Whether no request is in flight: none waits to be accepted and every one accepted
        was answered (a sender that died mid-POST left its request to be read after it)."""
        with self._accepting:
            waiting, _, _ = select.select([self._server.socket], [], [], 0)
            return not waiting and self._open == 0

    def snapshot(self) -> tuple[list[tuple[str, dict[str, Any]]], Counter[str]]:
        with self._lock:
            return list(self.requests), Counter(self.delivered)


class HostileReceiver:
    """A webhook receiver on 127.0.0.1 that answers the way no receiver should (a raw TCP
    server: it needs no HTTP library's manners), for the notification bounds' tests.

    ``mode`` "huge": a 200 whose body is ``huge`` bytes, written as fast as the sender takes
    them (``sent`` counts what it took before it closed); "silent": reads the request and
    answers nothing until ``release`` is set (``held`` counts the requests held); "error": a
    500 whose body says ``SECRET-BODY`` (a receiver's words must never be stored).
    """

    def __init__(self, mode: str, huge: int = 128 * 1024 * 1024) -> None:
        import socket

        self.mode, self.huge = mode, huge
        self.sent = 0
        self.held = 0
        self.requests = 0
        #: connections served to their end (the sender closed, or the answer was sent)
        self.finished = 0
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> HostileReceiver:
        self._accepting.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.release.set()
        self._accepting.join(5)
        for thread in self._threads:
            thread.join(5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: Any) -> None:
        try:
            self._answer(conn)
        finally:
            with self._lock:
                self.finished += 1

    def _answer(self, conn: Any) -> None:
        with conn:
            conn.settimeout(30)
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                with self._lock:
                    self.requests += 1
                if self.mode == "silent":
                    with self._lock:
                        self.held += 1
                    self.release.wait()
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                elif self.mode == "error":
                    text = b"SECRET-BODY: internal details of the receiver"
                    conn.sendall(
                        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: "
                        + str(len(text)).encode()
                        + b"\r\n\r\n"
                        + text
                    )
                else:
                    head = f"HTTP/1.1 200 OK\r\nContent-Length: {self.huge}\r\n\r\n".encode()
                    conn.sendall(head)
                    block = b"x" * 65536
                    while self.sent < self.huge and not self._stop.is_set():
                        conn.sendall(block)
                        with self._lock:
                            self.sent += len(block)
            except OSError:
                return  # the sender closed: what it took is counted
