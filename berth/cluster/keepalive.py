"""berth's writes to the API server (Bindings, events) over kept-alive HTTP/1.1 connections of their own.

`berth serve` posts one Binding per placed pod. Through aiohttp's client session that request cost 1.1
to 1.25 ms of CPU on the e2e control plane, three times what one write of the request and httptools
parsing the answer cost (measured side by side, bench/HISTORY.md "The protocol's own cost, and the
decision at 500 nodes"). So the hot writes skip the client framework: a request is one write of
pre-joined bytes, and the answer is read by httptools, the parser uvicorn uses. `Endpoint` says where
these connections go; the watches use it too (berth.cluster.watchstream). Reads and lists stay on
aiohttp, which also serves any cluster reached through a proxy.

A connection is used for one request at a time and goes back to the idle pool when the answer says
keep-alive. A connection that sat idle longer than the API server is likely to keep it is closed
instead of reused. A request on a reused connection that the server closed before sending any byte of
an answer is sent once more on a new connection (the request may not have been read, the race every
HTTP client has with an idle timeout).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit

import httptools

IDLE_SECONDS = 30.0  # kube-apiserver keeps idle connections for 90 s (Go's default is longer)


_P = TypeVar("_P", bound=asyncio.Protocol)


class TransportError(Exception):
    """The request got no complete answer: refused, reset, closed, timed out or garbled."""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; one request at a time."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.chunks: list[bytes] = []
        self.answered = False  # some byte of the current answer has arrived
        self.closed = False
        self.idle_since = time.monotonic()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.answered = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(TransportError(f"unreadable answer: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(TransportError(f"connection closed: {exc}" if exc else "connection closed by the server"))

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        status = self.parser.get_status_code()
        if not self.parser.should_keep_alive():
            self.close()
        body = b"".join(self.chunks)
        self.chunks = []
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((status, body))

    def _fail(self, exc: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        assert self.transport is not None
        self.answered = False
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self.waiter


class Endpoint:
    """Where berth's own connections go: the API server's host, port, path prefix and TLS, from the
    server URL of the credentials. ValueError for a URL these connections cannot reach."""

    def __init__(
        self,
        server: str,
        ssl_context: ssl.SSLContext | bool,
        *,
        server_hostname: str | None = None,
        user_agent: str = "berth",
    ) -> None:
        url = urlsplit(server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) URL: {server}")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")  # a server URL may have a path (a proxy in front)
        self.ssl: ssl.SSLContext | None = None
        if url.scheme == "https":
            if not isinstance(ssl_context, ssl.SSLContext):  # credentials always make one for https
                raise ValueError(f"{server}: no TLS context")
            self.ssl = ssl_context
        self.server_hostname = server_hostname if self.ssl is not None else None
        self._head = f"Host: {url.netloc}\r\nUser-Agent: {user_agent}\r\n".encode()

    def head(self, method: str, target: str, headers: dict[str, str]) -> bytes:
        """A request's head up to its last header line (the caller ends it); `target` is the path
        and query below the server URL."""
        if not target.startswith("/"):
            target = "/" + target
        lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return f"{method} {self.prefix}{target} HTTP/1.1\r\n".encode() + self._head + lines.encode()

    async def connect(self, protocol: Callable[[], _P]) -> _P:
        loop = asyncio.get_running_loop()
        extra = {"server_hostname": self.server_hostname} if self.server_hostname else {}
        _, conn = await loop.create_connection(protocol, self.host, self.port, ssl=self.ssl, **extra)
        return conn


class KeepAlive:
    """Requests with small bodies to one API server, over a pool of kept-alive connections."""

    def __init__(self, endpoint: Endpoint, *, timeout: float = 30.0) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._idle: list[_Connection] = []

    async def _connect(self) -> _Connection:
        return await self.endpoint.connect(_Connection)

    def _reused(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < IDLE_SECONDS:
                return conn
            conn.close()
        return None

    async def request(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        """(status, body) of one request; TransportError when no complete answer came."""
        request = self.endpoint.head(method, path, headers) + b"Content-Length: %d\r\n\r\n" % len(body) + body
        conn: _Connection | None = None
        try:
            async with asyncio.timeout(self.timeout):
                conn = self._reused()
                if conn is not None:
                    try:
                        return self._done(conn, await conn.exchange(request))
                    except TransportError:
                        if conn.answered:
                            raise
                        conn.close()  # closed while idle: the request was not answered; once more
                conn = await self._connect()
                return self._done(conn, await conn.exchange(request))
        except TimeoutError:
            raise TransportError(f"no answer within {self.timeout:g}s") from None
        except OSError as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            if conn is not None and conn.waiter is not None:  # left without its answer: never reused
                conn.waiter = None
                conn.close()

    def _done(self, conn: _Connection, answer: tuple[int, bytes]) -> tuple[int, bytes]:
        if not conn.closed:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        return answer

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
