"""Watches on a connection of their own (berth.cluster.watchstream), through KubeClient.watch, against a
raw HTTP/1.1 server on loopback that writes the stream byte by byte as the test says. The same server
also stands as the HTTP proxy of a cluster reached through `proxy-url`, whose watches go through
aiohttp: both ways must read a stream the same."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from berth.cluster import watchstream
from berth.cluster.credentials import Credentials
from berth.cluster.kubeapi import OPENED, ApiError, KubeClient

Script = Callable[[asyncio.StreamWriter], Awaitable[None]]

STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(kind: str, name: str, rv: int) -> bytes:
    obj = {"metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)}}
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


@contextlib.asynccontextmanager
async def raw_server(
    script: Script, path: str = "", *, proxied: bool = False
) -> AsyncIterator[tuple[list[bytes], KubeClient]]:
    """A server that records each request's head, then runs `script` on the connection; `proxied`:
    the client reaches a cluster through it as an HTTP proxy."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            heads.append(await reader.readuntil(b"\r\n\r\n"))
            await script(writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    listener = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    here = f"http://127.0.0.1:{port}"
    if proxied:
        creds = Credentials(
            server=f"http://cluster.invalid{path}", ssl_context=False, token="t0k", proxy=here
        )
    else:
        creds = Credentials(server=here + path, ssl_context=False, token="t0k")
    client = KubeClient(creds)
    try:
        yield heads, client
    finally:
        await client.aclose()
        listener.close()


async def collect(client: KubeClient, **kw) -> list[dict]:
    params = {"resourceVersion": "7", "fieldSelector": "status.phase!=Succeeded"}
    return [e async for e in client.watch("/api/v1/pods", params, **kw)]


WAYS = pytest.mark.parametrize("proxied", [False, True], ids=["own connection", "through a proxy"])


def names(events: list[dict]) -> list[str]:
    return [e["object"]["metadata"]["name"] for e in events if e["type"] != OPENED]


@WAYS
def test_events_cut_anywhere_by_chunks_and_writes_arrive_whole_and_in_order(proxied):
    stream = b"".join(event("ADDED", f"p{i}", 10 + i) for i in range(5))

    async def script(writer: asyncio.StreamWriter) -> None:
        writer.write(STREAM_HEAD)
        # Chunks of 7 bytes, each written in two halves with a pause between: no line comes in one piece.
        for at in range(0, len(stream), 7):
            data = chunk(stream[at : at + 7])
            writer.write(data[:5])
            await writer.drain()
            await asyncio.sleep(0.001)
            writer.write(data[5:])
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def scenario():
        async with raw_server(script, proxied=proxied) as (_, client):
            return await collect(client)

    events = asyncio.run(scenario())
    assert events[0] == {"type": OPENED}
    assert names(events) == ["p0", "p1", "p2", "p3", "p4"]
    assert [e["object"]["metadata"]["resourceVersion"] for e in events[1:]] == ["10", "11", "12", "13", "14"]


def test_the_request_names_the_watch_with_its_query_credentials_and_the_servers_path():
    async def script(writer: asyncio.StreamWriter) -> None:
        writer.write(STREAM_HEAD + chunk(event("ADDED", "p0", 8)) + b"0\r\n\r\n")
        await writer.drain()

    async def scenario():
        async with raw_server(script, path="/through/proxy") as (heads, client):
            await collect(client)
            return heads

    (head,) = asyncio.run(scenario())
    request_line, *lines = head.decode().split("\r\n")
    assert request_line == (
        "GET /through/proxy/api/v1/pods?resourceVersion=7&fieldSelector=status.phase%21%3DSucceeded"
        "&watch=true HTTP/1.1"
    )
    assert "Authorization: Bearer t0k" in lines
    assert "Accept: application/json" in lines


@WAYS
def test_an_expired_resource_version_is_an_api_error_with_the_servers_status_and_message(proxied):
    body = json.dumps({"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}).encode()

    async def script(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 410 Gone\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()

    async def scenario():
        async with raw_server(script, proxied=proxied) as (_, client):
            await collect(client)

    with pytest.raises(ApiError) as caught:
        asyncio.run(scenario())
    assert caught.value.status == 410
    assert caught.value.reason == "Expired"
    assert "too old" in caught.value.message


@WAYS
def test_a_stream_silent_for_the_idle_time_ends_the_watch_but_a_slow_one_does_not(proxied):
    async def slow(writer: asyncio.StreamWriter) -> None:
        writer.write(STREAM_HEAD)
        for i in range(6):  # a byte every 0.1 s for 0.6 s: never 0.3 s of silence
            await asyncio.sleep(0.1)
            writer.write(chunk(event("MODIFIED", f"p{i}", 20 + i)))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def silent(writer: asyncio.StreamWriter) -> None:
        writer.write(STREAM_HEAD + chunk(event("ADDED", "p0", 8)))
        await writer.drain()
        await asyncio.sleep(5)

    async def scenario(script: Script):
        async with raw_server(script, proxied=proxied) as (_, client):
            started = asyncio.get_running_loop().time()
            seen: list[dict] = []
            try:
                async for e in client.watch("/api/v1/pods", {}, idle=0.3):
                    seen.append(e)
            except ApiError as exc:
                return seen, exc, asyncio.get_running_loop().time() - started
            return seen, None, asyncio.get_running_loop().time() - started

    seen, error, _ = asyncio.run(scenario(slow))
    assert error is None
    assert names(seen) == [f"p{i}" for i in range(6)]

    seen, error, took = asyncio.run(scenario(silent))
    assert names(seen) == ["p0"]  # what came before the silence is kept
    assert error is not None and error.status == 0 and "TimeoutError" in error.message
    assert took < 2


def test_a_server_that_sends_no_headers_in_time_is_no_answer():
    async def script(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    async def scenario():
        async with raw_server(script) as (_, client):
            await collect(client, headers_within=0.2)

    with pytest.raises(ApiError) as caught:
        asyncio.run(scenario())
    assert caught.value.status == 0
    assert "no answer" in caught.value.message


@WAYS
def test_a_connection_lost_in_the_middle_of_the_stream_is_an_error_not_an_end(proxied):
    async def script(writer: asyncio.StreamWriter) -> None:
        # One whole event, then half of the next, then the connection closes without the last chunk.
        line = event("ADDED", "p1", 9)
        writer.write(STREAM_HEAD + chunk(event("ADDED", "p0", 8)) + chunk(line[:10]))
        await writer.drain()

    async def scenario():
        seen: list[dict] = []
        async with raw_server(script, proxied=proxied) as (_, client):
            with pytest.raises(ApiError) as caught:
                async for e in client.watch("/api/v1/pods", {}):
                    seen.append(e)
        return seen, caught.value

    seen, error = asyncio.run(scenario())
    assert names(seen) == ["p0"]  # the half event is not decoded as if it were whole
    assert error.status == 0 and error.message.startswith("watch /api/v1/pods: ")


def test_a_reader_far_behind_pauses_the_stream_and_loses_nothing(monkeypatch):
    monkeypatch.setattr(watchstream, "BACKLOG", 8)
    monkeypatch.setattr(watchstream, "RESUME_AT", 2)
    paused: list[bool] = []
    pause = asyncio.selector_events._SelectorSocketTransport.pause_reading

    def counted(self):
        paused.append(True)
        pause(self)

    monkeypatch.setattr(asyncio.selector_events._SelectorSocketTransport, "pause_reading", counted)

    async def script(writer: asyncio.StreamWriter) -> None:
        writer.write(STREAM_HEAD)
        for batch in range(15):  # 20 events at a time: the later ones are read only once resumed
            writer.write(
                chunk(b"".join(event("ADDED", f"p{i}", 100 + i) for i in range(batch * 20, batch * 20 + 20)))
            )
            await writer.drain()
            await asyncio.sleep(0.005)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def scenario():
        seen: list[dict] = []
        async with raw_server(script) as (_, client), asyncio.timeout(20):
            async for e in client.watch("/api/v1/pods", {}):
                seen.append(e)
                await asyncio.sleep(0.001)  # a reader slower than the stream
        return seen

    seen = asyncio.run(scenario())
    assert names(seen) == [f"p{i}" for i in range(300)]
    assert paused


def test_a_call_arriving_while_a_long_read_is_applied_is_taken_within_a_few_events():
    """A read that brought many events does not hold the event loop until all are applied: a call
    from kube-scheduler waiting meanwhile (here a callback scheduled at the first event) is taken
    after a few of them, not after the whole read."""

    async def script(writer: asyncio.StreamWriter) -> None:
        writer.write(STREAM_HEAD)
        writer.write(chunk(b"".join(event("ADDED", f"p{i}", 100 + i) for i in range(200))))
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def scenario() -> tuple[int, int]:
        applied, taken_at = 0, -1

        def call() -> None:
            nonlocal taken_at
            taken_at = applied

        async with raw_server(script) as (_, client), asyncio.timeout(20):
            async for e in client.watch("/api/v1/pods", {}):
                if e["type"] == OPENED:
                    continue
                if applied == 0:
                    asyncio.get_running_loop().call_soon(call)
                began = time.perf_counter()
                while time.perf_counter() - began < 0.0001:  # applied to the view: no await
                    pass
                applied += 1
        return applied, taken_at

    applied, taken_at = asyncio.run(scenario())
    assert applied == 200
    assert 0 < taken_at <= 10
