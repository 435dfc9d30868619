"""The hot verbs answered on the HTTP connection (berth.extender.protocol), through a real uvicorn
server on loopback and a raw socket: what kube-scheduler's HTTP client sees, byte for byte."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from berth.configure import default_pipeline
from berth.extender import protocol
from berth.extender.app import build_extender
from berth.extender.placer import Placer, Writes
from berth.extender.protocol import HotProtocol
from berth.extender.serve import SnapshotCluster
from tests.builders import node, pod, view


class Server:
    def __init__(self) -> None:
        self.asgi_calls: list[str] = []  # paths that went through the ASGI app
        self.bound: list[tuple[str, str]] = []
        self.bind_gate: asyncio.Event | None = None  # set: binds wait for it
        self.port = 0
        self.uvicorn: uvicorn.Server | None = None
        self.placer: Placer | None = None


@contextlib.asynccontextmanager
async def hot_server(*objects: dict[str, Any]) -> AsyncIterator[Server]:
    server = Server()

    async def binder(p, n, annotations):
        if server.bind_gate is not None:
            await server.bind_gate.wait()
        server.bound.append((p.key, n))

    async def recorder(p, evs):
        return None

    app = build_extender(
        SnapshotCluster(view(*(objects or (node("n1"), node("n2"), pod("web-0", uid="u-0"))))),
        rules=default_pipeline(kube_filters=False),
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=binder, record=recorder),
    )
    placer = app.state.placer

    async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            server.asgi_calls.append(scope["path"])
        await app(scope, receive, send)

    server.placer = placer
    config = uvicorn.Config(
        counted,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        access_log=False,
        lifespan="off",
        http=functools.partial(HotProtocol, verbs=app.verbs),
    )
    server.uvicorn = uvicorn.Server(config)
    task = asyncio.create_task(server.uvicorn.serve())
    while not server.uvicorn.started:
        await asyncio.sleep(0.01)
    server.port = server.uvicorn.servers[0].sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        server.uvicorn.should_exit = True
        await asyncio.wait_for(task, 10)


def request(method: str, path: str, body: Any = None, headers: str = "") -> bytes:
    data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    head = f"{method} {path} HTTP/1.1\r\nHost: berth\r\n{headers}Content-Length: {len(data)}\r\n\r\n"
    return head.encode() + data


async def response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = dict(line.split(": ", 1) for line in lines[1:] if line)
    headers = {k.lower(): v for k, v in headers.items()}
    return status, headers, await reader.readexactly(int(headers["content-length"]))


FILTER = {"Pod": pod("web-0", uid="u-0"), "Nodes": None, "NodeNames": ["n1", "n2"]}


def test_filter_then_bind_on_one_kept_alive_connection_are_answered_without_the_asgi_app():
    async def scenario():
        async with hot_server() as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(request("POST", "/filter", FILTER))
            status, headers, body = await response(reader)
            chosen = json.loads(body)["NodeNames"]
            bind = {"PodName": "web-0", "PodNamespace": "default", "PodUID": "u-0", "Node": chosen[0]}
            writer.write(request("POST", "/bind", bind))
            bind_status, _, bind_body = await response(reader)
            writer.write(request("GET", "/healthz"))
            health = await response(reader)
            writer.close()
            return server, status, headers, chosen, bind_status, json.loads(bind_body), health

    server, status, headers, chosen, bind_status, bind_body, health = asyncio.run(scenario())
    assert status == 200 and headers["content-type"] == "application/json" and len(chosen) == 1
    assert (
        bind_status == 200 and not bind_body.get("Error") and server.bound == [("default/web-0", chosen[0])]
    )
    assert health[0] == 200 and json.loads(health[2]) == {"status": "ok"}
    assert server.asgi_calls == ["/healthz"]  # the hot verbs never reached the ASGI app


def test_requests_pipelined_in_one_write_are_answered_in_order():
    async def scenario():
        async with hot_server() as server:
            server.bind_gate = asyncio.Event()  # the bind is answered last of all to be ready
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            bind = {"PodName": "web-0", "PodNamespace": "default", "PodUID": "u-0", "Node": "n1"}
            writer.write(
                request("POST", "/bind", bind)
                + request("GET", "/healthz")
                + request("POST", "/filter", FILTER)
                + request("POST", "/filter", b"not json")
            )
            await asyncio.sleep(0.2)
            server.bind_gate.set()
            answers = [await response(reader) for _ in range(4)]
            writer.close()
            return answers

    bind, health, filtered, bad = asyncio.run(scenario())
    assert bind[0] == 200 and not json.loads(bind[2]).get("Error")
    assert health[0] == 200 and json.loads(health[2]) == {"status": "ok"}
    assert filtered[0] == 200 and "NodeNames" in json.loads(filtered[2])
    assert bad[0] == 400 and json.loads(bad[2])["error"].startswith("filter: ")


def test_a_body_over_the_limit_is_refused_and_the_connection_stays_usable(monkeypatch):
    monkeypatch.setattr(protocol, "MAX_BODY_BYTES", 1000)

    async def scenario():
        async with hot_server() as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(request("POST", "/filter", {**FILTER, "NodeNames": ["n1"] * 500}))
            refused = await response(reader)
            writer.write(request("POST", "/filter", FILTER))
            answered = await response(reader)
            writer.close()
            return refused, answered

    refused, answered = asyncio.run(scenario())
    assert refused[0] == 400 and "larger than" in json.loads(refused[2])["error"]
    assert answered[0] == 200 and json.loads(answered[2])["NodeNames"]


def test_connection_close_and_http_1_0_close_the_connection_after_the_answer():
    async def one(version: str, headers: str) -> tuple[int, dict[str, str], bytes, bytes]:
        async with hot_server() as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(
                request("POST", "/filter", FILTER, headers).replace(b"HTTP/1.1", version.encode(), 1)
            )
            status, head, body = await response(reader)
            rest = await asyncio.wait_for(reader.read(), 10)  # b"" once the server has closed
            writer.close()
            return status, head, body, rest

    for version, headers in (("HTTP/1.1", "Connection: close\r\n"), ("HTTP/1.0", "")):
        status, head, body, rest = asyncio.run(one(version, headers))
        assert status == 200 and json.loads(body)["NodeNames"] and head["connection"] == "close"
        assert rest == b""


def test_a_graceful_shutdown_waits_for_a_bind_being_answered():
    async def scenario():
        async with hot_server() as server:
            server.bind_gate = asyncio.Event()
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            bind = {"PodName": "web-0", "PodNamespace": "default", "PodUID": "u-0", "Node": "n1"}
            writer.write(request("POST", "/bind", bind))
            await asyncio.sleep(0.1)
            assert server.uvicorn is not None
            server.uvicorn.should_exit = True  # the server begins to shut down with the bind in flight
            await asyncio.sleep(0.3)
            server.bind_gate.set()
            answer = await response(reader)
            rest = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            return server, answer, rest

    server, answer, rest = asyncio.run(scenario())
    assert answer[0] == 200 and server.bound == [("default/web-0", "n1")]
    assert answer[1]["connection"] == "close" and rest == b""


def test_a_filters_answer_is_sent_before_its_bookkeeping_and_the_next_call_sees_the_node_taken(monkeypatch):
    """kube-scheduler's cycle waits for the answer, not for berth counting the node taken: the answer
    is written first. The next call is still decided with the first pod on its node: two pods that
    each fill a node go to different nodes."""
    order: list[str] = []
    respond = HotProtocol._respond

    def written(self, answering, status, answer):
        order.append(f"answer {json.loads(answer).get('NodeNames')}")
        respond(self, answering, status, answer)

    monkeypatch.setattr(HotProtocol, "_respond", written)
    full = [node("n1", cpu="1"), node("n2", cpu="1")]
    new = [pod(name, uid=f"u-{name}", cpu="1", phase="Pending") for name in ("a-0", "b-0")]

    async def scenario():
        async with hot_server(*full) as server:
            reserve = server.placer.cluster.reserve

            def counted(p, n):
                order.append(f"taken {p.name} {n}")
                reserve(p, n)

            server.placer.cluster.reserve = counted
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            answers = []
            for p in new:  # one after the other on one connection, as kube-scheduler asks
                writer.write(request("POST", "/filter", {"Pod": p, "Nodes": None, "NodeNames": ["n1", "n2"]}))
                answers.append(json.loads((await response(reader))[2])["NodeNames"])
            writer.close()
            return answers

    first, second = asyncio.run(scenario())
    assert len(first) == 1 and len(second) == 1 and first != second
    assert order == [f"answer {first}", f"taken a-0 {first[0]}", f"answer {second}", f"taken b-0 {second[0]}"]


def test_every_decision_kept_for_bind_has_its_summary_worked_out_once_the_call_is_answered():
    """A kept decision whose summary is still to be worked out holds the decision's whole ledger:
    once a filter or prioritize call is answered, none is left so, on any path."""

    async def recorder(p, evs):
        return None

    app = build_extender(
        SnapshotCluster(view(node("n1"), node("n2"))),
        rules=default_pipeline(kube_filters=False),
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=None, record=recorder),
    )
    placer = app.state.placer
    verbs = app.verbs
    answered = []
    for i, verb in enumerate(("filter", "prioritize", "filter")):
        body = {"Pod": pod(f"p-{i}", uid=f"u-{i}", phase="Pending"), "Nodes": None, "NodeNames": ["n1", "n2"]}
        status, _ = asyncio.run(
            verbs.answer(verb, json.dumps(body).encode(), lambda s, a: answered.append(s))
        )
        kept = placer.decisions.recall(f"u-{i}", f"default/p-{i}")
        assert status == 200 and kept is not None and kept.decision.chosen in ("n1", "n2")
        assert kept.decision._rest is None or kept.decision._rest.work is None  # worked out, ledger let go
        assert kept.decision.summary is not None and kept.decision.events[-1].reason == "Placed"
    assert answered == [200, 200, 200]  # each answer handed to the respond callback
