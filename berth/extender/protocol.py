"""The hot verbs answered on the HTTP connection itself, before any ASGI machinery.

kube-scheduler calls filter and bind for every pod, over kept-alive HTTP/1.1 connections, one request
at a time. Through uvicorn's ASGI cycle a tiny bind cost about 180 us of `berth serve`'s CPU, of which
the verb itself was 8 us: a scope, a request-response cycle and a task per request, the ASGI messages,
and the headers and the body written in two system calls. `HotProtocol` is uvicorn's own httptools
protocol with one difference: a `POST` to a hot verb's path is read by the parser's callbacks, handed
to `Verbs.answer` as bytes, and answered in one write. Everything else (/simulate, /metrics, /healthz,
a request with `Expect: 100-continue`, a request that arrives while another is being answered) takes
uvicorn's path unchanged, and so does every rule of the connection (keep-alive timeout, graceful
shutdown, TLS).

Requests on one connection are answered in order: while a hot verb is being answered, a request
behind it is queued by uvicorn (as any pipelined request is) and started once the answer is written.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from berth.extender.app import HOT_PATHS, MAX_BODY_BYTES, TOO_LARGE, Verbs

_HOT = {path.encode(): verb for path, verb in HOT_PATHS.items()}
_JSON = b"content-type: application/json\r\ncontent-length: "


class _Answering:
    """Stands where uvicorn keeps its request-response cycle while a hot verb is answered here, so
    that uvicorn queues a request pipelined behind it, and marks it done once the answer is written."""

    __slots__ = ("disconnected", "keep_alive", "response_complete")
    message_event = type("NoEvent", (), {"set": staticmethod(lambda: None)})()

    def __init__(self) -> None:
        self.response_complete = False
        self.disconnected = False
        self.keep_alive = True


class HotProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol answering the hot verbs itself (`verbs`), the rest through ASGI."""

    def __init__(self, *args: Any, verbs: Verbs, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.verbs = verbs
        self._verb: str | None = None  # the hot verb of the request being read
        self._body: list[bytes] = []
        self._size = 0

    def on_headers_complete(self) -> None:
        verb = None
        if (
            (self.cycle is None or self.cycle.response_complete)
            and not self.expect_100_continue
            and self.parser.get_method() == b"POST"
            and not self.parser.should_upgrade()
        ):
            verb = _HOT.get(self.url.partition(b"?")[0])
        if verb is None:
            self._verb = None
            super().on_headers_complete()
            return
        self._verb, self._body, self._size = verb, [], 0
        for name, value in self.headers:
            if name == b"content-length" and value.isdigit() and int(value) > MAX_BODY_BYTES:
                self._size = MAX_BODY_BYTES + 1  # refused without reading it
                break

    def on_body(self, body: bytes) -> None:
        if self._verb is None:
            super().on_body(body)
            return
        self._size += len(body)
        if self._size <= MAX_BODY_BYTES:
            self._body.append(body)

    def on_message_complete(self) -> None:
        if self._verb is None:
            super().on_message_complete()
            return
        verb, body, self._verb = self._verb, b"".join(self._body), None
        self._body = []
        answering = _Answering()
        answering.keep_alive = self.parser.should_keep_alive() and self.parser.get_http_version() == "1.1"
        self.cycle = answering  # type: ignore[assignment]
        if self._size > MAX_BODY_BYTES:
            self._respond(answering, 400, TOO_LARGE)
            return
        task = self.loop.create_task(self._answer(answering, verb, body))
        self.tasks.add(task)  # a graceful shutdown waits for it
        task.add_done_callback(self.tasks.discard)

    async def _answer(self, answering: _Answering, verb: str, body: bytes) -> None:
        responded = False

        def respond(status: int, answer: bytes) -> None:
            nonlocal responded
            responded = True
            self._respond(answering, status, answer)

        try:
            await self.verbs.answer(verb, body, respond)
        except BaseException:
            if not responded:
                answering.response_complete = True
                self.transport.close()
            raise

    def _respond(self, answering: _Answering, status: int, answer: bytes) -> None:
        answering.response_complete = True
        if self.transport.is_closing() or answering.disconnected:
            return
        keep_alive = answering.keep_alive  # uvicorn's shutdown() clears it: close after this answer
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [_JSON, str(len(answer)).encode(), b"\r\n"]
        if not keep_alive:
            head.append(b"connection: close\r\n")
        head += [b"\r\n", answer]
        self.transport.write(b"".join(head))
        if not keep_alive:
            self.transport.close()
            return
        # uvicorn's own: resume reading, start a request queued meanwhile or arm the keep-alive timeout
        self.on_response_complete()
