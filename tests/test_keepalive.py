"""berth's writes to the API server on connections of their own (berth.cluster.keepalive), through
KubeClient.post, against a raw HTTP/1.1 server on loopback that the test scripts byte by byte."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from berth.cluster.credentials import Credentials
from berth.cluster.kubeapi import ApiError, KubeClient

Answer = Callable[[int, bytes], Awaitable[bytes | None]]  # (connection number, request) -> response


class RawServer:
    """Reads requests (Content-Length bodies) and writes whatever `answer` returns; None closes the
    connection without an answer."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[tuple[int, bytes]] = []
        self.close_after_answer = False

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                request = head + await reader.readexactly(length)
                self.requests.append((number, request))
                response = await self.answer(number, request)
                if response is None:
                    break
                writer.write(response)
                await writer.drain()
                if self.close_after_answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def raw_server(answer: Answer, path: str = "") -> AsyncIterator[tuple[RawServer, KubeClient]]:
    server = RawServer(answer)
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    client = KubeClient(Credentials(server=f"http://127.0.0.1:{port}{path}", ssl_context=False, token="t0k"))
    try:
        yield server, client
    finally:
        await client.aclose()
        listener.close()


def created(body: dict, *, close: bool = False, chunked: bool = False) -> bytes:
    data = json.dumps(body).encode()
    head = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
    if close:
        head += b"Connection: close\r\n"
    if chunked:
        half = len(data) // 2
        chunks = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, data[:half], len(data) - half, data[half:])
        return head + b"Transfer-Encoding: chunked\r\n\r\n" + chunks
    return head + b"Content-Length: %d\r\n\r\n" % len(data) + data


BINDING = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"name": "n1"}}


def test_posts_reuse_one_connection_and_carry_the_body_and_the_credential():
    async def answer(number: int, request: bytes) -> bytes:
        return created(
            {"kind": "Status", "status": "Success", "n": len(server.requests)}, chunked=number % 2 == 0
        )

    async def scenario():
        nonlocal server
        async with raw_server(answer) as (server, client):
            return [await client.post("/api/v1/namespaces/a/pods/p/binding", BINDING) for _ in range(5)]

    server: RawServer
    answers = asyncio.run(scenario())
    assert [a["n"] for a in answers] == [1, 2, 3, 4, 5]
    assert server.connections == 1
    head, _, body = server.requests[0][1].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /api/v1/namespaces/a/pods/p/binding HTTP/1.1"
    assert b"Authorization: Bearer t0k" in lines and b"Content-Type: application/json" in lines
    assert json.loads(body) == BINDING


def test_bindings_are_not_held_back_by_the_cap_on_reads():
    """A burst of Bindings reaches the API server at once, each on a connection of its own, while the
    server takes its time over each: here it answers none until 20 have arrived (more than the 8
    requests berth keeps in flight for reads). Held back behind a cap of 8, the burst never completes."""
    burst = 20
    all_in = asyncio.Event()

    async def answer(number: int, request: bytes) -> bytes:
        if len(server.requests) >= burst:
            all_in.set()
        await all_in.wait()
        return created({"kind": "Status", "status": "Success"})

    async def scenario():
        nonlocal server
        async with raw_server(answer) as (server, client):
            posts = [client.post(f"/api/v1/namespaces/a/pods/p{i}/binding", BINDING) for i in range(burst)]
            return await asyncio.wait_for(asyncio.gather(*posts), timeout=10)

    server: RawServer
    answers = asyncio.run(scenario())
    assert [a["status"] for a in answers] == ["Success"] * burst
    assert server.connections == burst


def test_a_chunked_answer_and_a_server_path_prefix():
    async def answer(number: int, request: bytes) -> bytes:
        return created({"kind": "Status", "status": "Success", "padding": "x" * 5000}, chunked=True)

    async def scenario():
        nonlocal server
        async with raw_server(answer, path="/k8s/clusters/c-1/") as (server, client):
            return await client.post("/api/v1/namespaces/a/events", {"kind": "Event"})

    server: RawServer
    assert asyncio.run(scenario())["padding"] == "x" * 5000
    assert server.requests[0][1].startswith(b"POST /k8s/clusters/c-1/api/v1/namespaces/a/events HTTP/1.1\r\n")


def test_a_connection_the_server_closes_is_not_used_again():
    async def answer(number: int, request: bytes) -> bytes:
        return created({"connection": number}, close=True)

    async def scenario():
        nonlocal server
        async with raw_server(answer) as (server, client):
            return [(await client.post("/api/v1/x", {}))["connection"] for _ in range(3)]

    server: RawServer
    assert asyncio.run(scenario()) == [1, 2, 3]


def test_a_request_on_an_idle_connection_the_server_dropped_goes_once_more_on_a_new_one():
    # The first connection answers once, then closes on the next request without a byte of answer
    # (a server's idle timeout racing the request): the request is sent again on a new connection.
    async def answer(number: int, request: bytes) -> bytes | None:
        if number == 1 and sum(1 for n, _ in server.requests if n == 1) == 2:
            return None
        return created({"connection": number})

    async def scenario():
        nonlocal server
        async with raw_server(answer) as (server, client):
            return [(await client.post("/api/v1/x", {}))["connection"] for _ in range(3)]

    server: RawServer
    assert asyncio.run(scenario()) == [1, 2, 2]
    assert len(server.requests) == 4


def test_a_connection_closed_after_part_of_an_answer_is_an_api_error_not_a_retry():
    # The server may have acted on a request it began to answer: it is not sent again, even on a
    # reused connection.
    async def answer(number: int, request: bytes) -> bytes | None:
        if len(server.requests) == 1:
            return created({"connection": number})
        server.close_after_answer = True
        return b'HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{"kind":'

    async def scenario():
        nonlocal server
        async with raw_server(answer) as (server, client):
            await client.post("/api/v1/namespaces/a/pods/p/binding", BINDING)
            await client.post("/api/v1/namespaces/a/pods/p/binding", BINDING)

    server: RawServer
    with pytest.raises(ApiError) as caught:
        asyncio.run(scenario())
    assert caught.value.status == 0 and "/api/v1/namespaces/a/pods/p/binding" in caught.value.message
    assert len(server.requests) == 2 and server.connections == 1


def test_an_error_status_is_an_api_error_with_the_servers_message():
    async def answer(number: int, request: bytes) -> bytes:
        body = json.dumps({"kind": "Status", "message": "pod p is already assigned", "reason": "Conflict"})
        return b"HTTP/1.1 409 Conflict\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body.encode())

    async def scenario():
        async with raw_server(answer) as (_, client):
            await client.post("/api/v1/namespaces/a/pods/p/binding", BINDING)

    with pytest.raises(ApiError) as caught:
        asyncio.run(scenario())
    assert caught.value.status == 409 and caught.value.reason == "Conflict"
    assert "pod p is already assigned" in caught.value.message


def test_a_refused_connection_and_a_server_that_never_answers_are_api_errors_with_status_0():
    async def refused():
        listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        listener.close()
        await listener.wait_closed()
        client = KubeClient(Credentials(server=f"http://127.0.0.1:{port}", ssl_context=False))
        try:
            await client.post("/api/v1/namespaces/a/events", {})
        finally:
            await client.aclose()

    with pytest.raises(ApiError) as caught:
        asyncio.run(refused())
    assert caught.value.status == 0 and "/api/v1/namespaces/a/events" in caught.value.message

    async def silent(number: int, request: bytes) -> bytes:
        await asyncio.sleep(30)
        return b""

    async def hanging():
        server = RawServer(silent)
        listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        client = KubeClient(Credentials(server=f"http://127.0.0.1:{port}", ssl_context=False), timeout=0.3)
        try:
            await client.post("/api/v1/namespaces/a/pods/p/binding", BINDING)
        finally:
            await client.aclose()
            listener.close()

    with pytest.raises(ApiError) as caught:
        asyncio.run(asyncio.wait_for(hanging(), 10))
    assert caught.value.status == 0 and "no answer within 0.3s" in caught.value.message
