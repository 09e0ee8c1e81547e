"""The HTTP layer of ``FakeAnthropicServer``: server, handler, response writer."""

from __future__ import annotations

import gzip
import json
import logging
import select
import socket
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

log = logging.getLogger("backline.testing.fake_anthropic")

POLL = 0.05  # how often a waiting response checks for a stop or a disconnect


class Host(Protocol):
    """What the handler needs from the fake server."""

    def _handle(self, handler: Handler, method: str) -> None: ...

    def _track(self, conn: socket.socket, add: bool) -> None: ...


class HTTPServer(ThreadingHTTPServer):
    """A thread per connection; the threads are daemons, tracked so ``stop`` can join them."""

    daemon_threads = True
    request_queue_size = 128  # the default 5 drops concurrent connects (1 s SYN retry)
    block_on_close = False  # daemon threads are not joined by server_close(): we do it

    def __init__(self, address: tuple[str, int], handler: type[Handler], fake: Host) -> None:
        self.fake = fake
        self._handler_threads: list[threading.Thread] = []
        self._threads_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"FakeAnthropicServer:{self.server_address[1]}:conn",
            daemon=True,
        )
        with self._threads_lock:
            self._handler_threads = [t for t in self._handler_threads if t.is_alive()]
            self._handler_threads.append(thread)
        thread.start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up on its connection (an HTTP client closing its pool)
        is not the fake's error: said at debug level; anything else as the server says."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionResetError, BrokenPipeError)):
            log.debug("a client hung up: %s %r", client_address, error)
            return
        super().handle_error(request, client_address)

    def join_handlers(self, timeout: float) -> list[threading.Thread]:
        """Join the connection threads (within ``timeout`` in all); return any still alive."""
        with self._threads_lock:
            threads = list(self._handler_threads)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [t for t in threads if t.is_alive()]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: HTTPServer

    def setup(self) -> None:
        super().setup()
        # Small writes (SSE events) go out at once, not after a delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.fake._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("FakeAnthropicServer: " + format, *args)

    def do_POST(self) -> None:
        self.server.fake._handle(self, "POST")

    def do_GET(self) -> None:
        self.server.fake._handle(self, "GET")

    def do_HEAD(self) -> None:
        self.server.fake._handle(self, "HEAD")

    def do_PUT(self) -> None:
        self.server.fake._handle(self, "PUT")

    def do_DELETE(self) -> None:
        self.server.fake._handle(self, "DELETE")


class Output:
    """Writes one response; notices a client that went away (``gone``)."""

    def __init__(self, handler: Handler, stopping: threading.Event) -> None:
        self._handler = handler
        self._stopping = stopping
        self.gone = False
        self.aborted = False  # we closed the connection mid-response (``abort``)

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds``; ``False`` (and ``gone``) if the client disconnected or we stop."""
        if self.gone:
            return False
        sock = self._handler.connection
        remaining = seconds
        while True:
            if self._stopping.is_set() or self._peer_closed(sock):
                self.gone = True
                return False
            if remaining <= 0:
                return True
            step = min(POLL, remaining)
            try:
                readable, _, _ = select.select([sock], [], [], step)
            except (OSError, ValueError):
                self.gone = True
                return False
            if not readable:
                remaining -= step
            elif not self._peer_closed(sock):
                # The client sent data mid-response (unusual): just wait the time out.
                if self._stopping.wait(remaining):
                    self.gone = True
                    return False
                return True

    @staticmethod
    def _peer_closed(sock: socket.socket) -> bool:
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            return sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _head(self, status: int, headers: dict[str, str]) -> None:
        h = self._handler
        h.send_response(status)
        for name, value in headers.items():
            h.send_header(name, value)
        h.end_headers()

    def json(
        self,
        status: int,
        body: Any,
        request_id: str,
        *,
        headers: dict[str, str] | None = None,
        head: bool = False,
    ) -> None:
        self.body(status, json.dumps(body).encode(), request_id, headers=headers, head=head)

    def body(
        self,
        status: int,
        data: bytes,
        request_id: str,
        *,
        headers: dict[str, str] | None = None,
        head: bool = False,
    ) -> None:
        """A whole response with ``data`` as its body (sent as JSON, whatever it is)."""
        all_headers = {
            "content-type": "application/json",
            "content-length": str(len(data)),
            "request-id": request_id,
            **(headers or {}),
        }
        try:
            self._head(status, all_headers)
            if not head:
                self._handler.wfile.write(data)
            self._handler.wfile.flush()
        except OSError:
            self.gone = True

    def start_stream(self, request_id: str, headers: dict[str, str]) -> None:
        all_headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "transfer-encoding": "chunked",
            "request-id": request_id,
            **headers,
        }
        try:
            self._head(200, all_headers)
            self._handler.wfile.flush()
        except OSError:
            self.gone = True

    def chunk(self, data: bytes) -> bool:
        if self.gone:
            return False
        try:
            self._handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self._handler.wfile.flush()
        except OSError:
            self.gone = True
            return False
        return True

    def abort(self) -> None:
        """Close the connection now, mid-response (a dropped connection)."""
        self.aborted = True
        self._handler.close_connection = True
        shutdown_socket(self._handler.connection)

    def end_stream(self) -> None:
        if self.gone:
            return
        try:
            self._handler.wfile.write(b"0\r\n\r\n")
            self._handler.wfile.flush()
        except OSError:
            self.gone = True


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    headers = handler.headers
    if "chunked" in (headers.get("transfer-encoding") or "").lower():
        parts: list[bytes] = []
        while True:
            size = int(handler.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                handler.rfile.readline()
                break
            parts.append(handler.rfile.read(size))
            handler.rfile.readline()
        raw = b"".join(parts)
    else:
        length = int(headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length > 0 else b""
    encoding = (headers.get("content-encoding") or "").lower()
    if encoding == "gzip":
        raw = gzip.decompress(raw)
    elif encoding == "deflate":
        raw = zlib.decompress(raw)
    return raw


def shutdown_socket(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
