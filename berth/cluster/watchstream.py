"""A watch read on a connection of its own: httptools parses the stream and cuts it into lines in the
connection's own callbacks, and the reader wakes once for all the lines that one read brought.

`berth serve` watches every pod of the cluster, so each pod placed costs it one watch event (the pod
bound). Through aiohttp's session that event cost 0.55 to 0.65 ms of `berth serve`'s CPU, against 0.04
to decode and apply it (bench/HISTORY.md, "Attempts per pod, the scheduling cycle"): the stream reader's
futures and wake-ups per chunk, and a read timeout cancelled and armed again for every chunk. Here the
silence of the stream is watched by one timer that sets itself again from the time of the last byte,
and a reader far behind pauses the socket instead of holding an unbounded backlog.

Only the stream's bytes are handled here; what the lines mean is the caller's (KubeClient.watch).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator

import httptools

from berth.cluster.keepalive import Endpoint, TransportError

# Lines waiting for the reader before the socket is paused, and how few let it read again.
BACKLOG = 4096
RESUME_AT = 1024
# How long the reader is handed buffered lines (each applied to the view before the next is asked
# for) before the event loop gets a turn. A call from kube-scheduler that arrives meanwhile waits for
# that turn, and its wait is in kube-scheduler's cycle: in the plain shape's run a read held 2.1 lines
# on average and up to 18 (2.6 ms at p99) before the call was taken (bench/HISTORY.md).
TURN_AFTER = 0.0002


class Lines:
    """A stream's bytes cut into its lines that are not blank; a line split across chunks is held
    until its end comes."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        pieces = (self.pending + chunk).split(b"\n") if self.pending else chunk.split(b"\n")
        self.pending = pieces.pop()
        return [piece for piece in pieces if piece.strip()]

    def rest(self) -> bytes:
        """What is left once the stream has ended: a last line without its newline, or b""."""
        rest, self.pending = self.pending, b""
        return rest if rest.strip() else b""


class _Stream(asyncio.Protocol):
    """One watch's HTTP/1.1 response: its status, the lines of its body, how it ended."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.headers: asyncio.Future[int] = self.loop.create_future()
        self.lines: deque[bytes] = deque()
        self.error_body: list[bytes] = []
        self.cut = Lines()
        self.status = 0
        self.ended = False
        self.error: Exception | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False
        self.last_byte = self.loop.time()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.last_byte = self.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.end(TransportError(f"unreadable watch stream: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ended:
            self.end(TransportError(f"connection lost: {exc}" if exc else "connection closed by the server"))

    # httptools callbacks
    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if not self.headers.done():
            self.headers.set_result(self.status)

    def on_body(self, body: bytes) -> None:
        if self.status >= 400:
            self.error_body.append(body)
            return
        self.lines.extend(self.cut.feed(body))
        if len(self.lines) >= BACKLOG and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self.wake()

    def on_message_complete(self) -> None:
        rest = self.cut.rest()
        if rest and self.status < 400:
            self.lines.append(rest)
        self.end(None)

    # the stream's end and the reader's wake-up
    def end(self, error: Exception | None) -> None:
        if self.ended:
            return
        self.ended, self.error = True, error
        if not self.headers.done():
            self.headers.set_exception(error or TransportError("the stream ended before its headers"))
            self.headers.exception()  # retrieved here, so an unawaited failure is not logged as lost
        self.wake()
        if self.transport is not None:
            self.transport.close()

    def wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def resume_if_drained(self) -> None:
        if self.paused and len(self.lines) <= RESUME_AT and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()


class WatchStream:
    """A watch response read line by line. `open` returns once the status line and headers are in;
    a stream silent for `idle` seconds ends with TimeoutError, a broken one with TransportError."""

    def __init__(self, stream: _Stream, idle: float) -> None:
        self._stream = stream
        self._idle = idle
        self._timer = stream.loop.call_later(idle, self._check_silence)
        self.status = stream.status

    @classmethod
    async def open(
        cls, endpoint: Endpoint, target: str, headers: dict[str, str], *, idle: float
    ) -> WatchStream:
        """GET `target` (the path and query below the server URL) on a new connection."""
        stream = await endpoint.connect(_Stream)
        try:
            assert stream.transport is not None
            stream.transport.write(endpoint.head("GET", target, headers) + b"\r\n")
            await stream.headers
        except BaseException:
            stream.end(None)
            raise
        return cls(stream, idle)

    def _check_silence(self) -> None:
        stream = self._stream
        if stream.ended:
            return
        silent = stream.loop.time() - stream.last_byte
        if silent >= self._idle:
            stream.end(TimeoutError(f"no byte for {self._idle:g}s"))
        else:
            self._timer = stream.loop.call_later(self._idle - silent, self._check_silence)

    async def _wait(self) -> None:
        stream = self._stream
        stream.waiter = stream.loop.create_future()
        await stream.waiter

    async def body(self) -> bytes:
        """The whole body of an answer that is not a stream (an error status)."""
        while not self._stream.ended:
            await self._wait()
        return b"".join(self._stream.error_body)

    async def lines(self) -> AsyncIterator[bytes]:
        """The body's lines as they come, until the server ends the stream."""
        stream = self._stream
        clock = time.perf_counter
        while True:
            began = clock()
            while stream.lines:
                line = stream.lines.popleft()
                stream.resume_if_drained()
                yield line
                if stream.lines and clock() - began > TURN_AFTER:
                    await asyncio.sleep(0)  # the loop's turn: a call waiting is taken now
                    began = clock()
            if stream.ended:
                if stream.error is not None:
                    raise stream.error
                return
            await self._wait()

    def close(self) -> None:
        self._timer.cancel()
        self._stream.end(None)
