"""What the tests share: the service under test (from the environment), and small real HTTP
servers on loopback (a webhook receiver, a fault-injecting proxy in front of the service).

Environment (test/client/python.test.ts sets it):
  MEDIA_JOBS_URL, MEDIA_JOBS_API_KEY   the service and a key (tests needing them skip without)
  MJ_TEST_MEDIA_URL                    a server with /photo.jpg (a JPEG)
  MEDIA_JOBS_WORKER_TOKEN              a worker token that may claim every declared type
  MJ_TEST_REMOTE_TYPES                 comma-separated declared (remote) job types, one per worker test
  MJ_TEST_LIMITED_URL, MJ_TEST_LIMITED_KEY   a service with RATE_LIMIT_SUBMIT=2 (a real 429)
"""
from __future__ import annotations

import http.client
import http.server
import json
import os
import socket
import threading
import time
import unittest
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Tuple

from media_jobs import Client

URL = os.environ.get("MEDIA_JOBS_URL")
KEY = os.environ.get("MEDIA_JOBS_API_KEY")
MEDIA = os.environ.get("MJ_TEST_MEDIA_URL")
WORKER_TOKEN = os.environ.get("MEDIA_JOBS_WORKER_TOKEN")
REMOTE_TYPES = [t for t in os.environ.get("MJ_TEST_REMOTE_TYPES", "").split(",") if t]

needs_service = unittest.skipUnless(URL and KEY, "MEDIA_JOBS_URL and MEDIA_JOBS_API_KEY are not set")
needs_media = unittest.skipUnless(URL and KEY and MEDIA, "MJ_TEST_MEDIA_URL is not set")
needs_worker = unittest.skipUnless(URL and KEY and WORKER_TOKEN and REMOTE_TYPES, "no worker token or remote types")


def client(**kw: Any) -> Client:
    kw.setdefault("retry_delay", 0.02)
    return Client(URL, KEY, **kw)


def remote_type(name: str) -> str:
    """The declared type a worker test uses alone (``MJ_TEST_REMOTE_TYPES`` names them)."""
    for t in REMOTE_TYPES:
        if t.endswith(name):
            return t
    raise unittest.SkipTest("no remote job type for %s in MJ_TEST_REMOTE_TYPES" % name)


def wait_for(fn: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Polls until ``fn`` returns something truthy; generous deadline, no timing assertions."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.05)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class LocalServer:
    """A ThreadingHTTPServer on 127.0.0.1 with a random port, in a thread."""

    def __init__(self, handler: type) -> None:
        self.httpd = _Server(("127.0.0.1", 0), handler)
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.port = self.httpd.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Delivery:
    def __init__(self, path: str, headers: Any, body: bytes) -> None:
        self.path, self.headers, self.body = path, headers, body


class _ReceiverHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n)
        owner: Receiver = self.server.owner  # type: ignore[attr-defined]
        with owner.lock:
            owner.deliveries.append(Delivery(self.path, self.headers, body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class Receiver(LocalServer):
    """A webhook receiver: keeps each delivery's path, headers (an email.message.Message, as
    http.server gives them) and raw body."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: List[Delivery] = []
        super().__init__(_ReceiverHandler)

    def find(self, path: str, timeout: float = 30.0) -> Delivery:
        def look() -> Optional[Delivery]:
            with self.lock:
                return next((d for d in self.deliveries if d.path == path), None)

        return wait_for(look, "a delivery to %s" % path, timeout)


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _any(self) -> None:
        proxy: FaultProxy = self.server.owner  # type: ignore[attr-defined]
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n) if n else b""
        with proxy.lock:
            action = proxy.plan.pop(0) if proxy.plan else "pass"
            proxy.seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
        if isinstance(action, tuple):  # (status, headers): answered here, not forwarded
            status, headers = action
            payload = json.dumps({"code": -1, "message": "injected %d" % status, "data": {}}).encode()
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.send_header("x-request-id", "proxy-%d" % status)
            self.end_headers()
            self.wfile.write(payload)
            return
        if action == "drop":  # the connection breaks before the service sees the request
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        up = urllib.parse.urlsplit(proxy.upstream)
        conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(self.command, self.path, body=body or None, headers=headers)
        res = conn.getresponse()
        if action == "lose":  # the service handles it; the answer is lost on the way back
            proxy.lost.append(res.read())
            conn.close()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if action == "cut":  # a stream: the first message goes through, then the connection breaks
            self.send_response(res.status)
            for k, v in res.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("connection", "close")
            self.end_headers()
            buf, has_data = b"", False
            while True:  # up to the end of the first message with data (a `retry:` line comes first)
                line = res.readline()
                if not line:
                    break
                buf += line
                has_data = has_data or line.startswith(b"data:")
                if has_data and line in (b"\n", b"\r\n"):
                    break
            self.wfile.write(buf)
            self.wfile.flush()
            conn.close()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(res.status)
        stream = res.getheader("content-type", "").startswith("text/event-stream")
        for k, v in res.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        if stream:
            self.send_header("connection", "close")
            self.end_headers()
            while True:
                line = res.readline()
                if not line:
                    break
                self.wfile.write(line)
                self.wfile.flush()
            self.close_connection = True
        else:
            data = res.read()
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        conn.close()

    do_GET = do_POST = do_DELETE = do_PUT = _any  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


class FaultProxy(LocalServer):
    """A real HTTP proxy in front of the service that misbehaves on request, in order: each entry
    of ``plan`` is used by one request; ``(status, headers)`` answers it here, ``"drop"`` breaks
    the connection before forwarding, ``"lose"`` forwards it and then breaks the connection
    without answering, ``"cut"`` passes a stream's first message and then breaks it; ``"pass"``
    (and an empty plan) forwards. ``seen`` records every request's method, path and headers."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.lock = threading.Lock()
        self.plan: List[Any] = []
        self.seen: List[Tuple[str, str, Dict[str, str]]] = []
        self.lost: List[bytes] = []
        super().__init__(_ProxyHandler)


def closed_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)
