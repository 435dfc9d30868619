"""A scripted API server on 127.0.0.1 for the client and cache tests: a real HTTP server (aiohttp)
in the test's event loop that hands every request, as an httpx.Request, to a plain function and
sends back the httpx.Response it returns, streamed when it is a stream (a watch)."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from aiohttp import web

Handler = Callable[[httpx.Request], Any]  # returns an httpx.Response, or an awaitable of one
HOP_BY_HOP = {"content-length", "transfer-encoding", "connection", "content-encoding"}


@contextlib.asynccontextmanager
async def api_server(handler: Handler) -> AsyncIterator[str]:
    """Serve `handler`; yields the server's URL (http://127.0.0.1:PORT)."""

    async def bridge(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        scripted = handler(
            httpx.Request(request.method, str(request.url), headers=request.headers, content=body)
        )
        if inspect.isawaitable(scripted):
            scripted = await scripted
        headers = {k: v for k, v in scripted.headers.items() if k.lower() not in HOP_BY_HOP}
        out = web.StreamResponse(status=scripted.status_code, headers=headers)
        await out.prepare(request)
        try:
            content = scripted.content
        except httpx.ResponseNotRead:  # a stream: a watch whose events come when the test sends them
            async for chunk in scripted.stream:
                await out.write(chunk)
        else:
            await out.write(content)
        await out.write_eof()
        return out

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", bridge)
    runner = web.AppRunner(app, shutdown_timeout=0.1, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
