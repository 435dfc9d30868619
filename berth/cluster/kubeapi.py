"""A small async client for the Kubernetes API: the strict point of cut-off between berth and the
API server. Credentials come from berth.cluster.credentials (a kubeconfig as kubectl reads it, or the
pod's service account); reads and lists go through one aiohttp session, creates (a Binding per placed
pod) over berth.cluster.keepalive's connections, and each watch on a connection of its own
(berth.cluster.watchstream). A cluster reached through a proxy gets aiohttp for everything. Only what
berth needs: get, list pages, watch lines, create."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson

from berth import __version__
from berth.cluster import lean
from berth.cluster.credentials import Credentials, load_credentials
from berth.cluster.keepalive import Endpoint, KeepAlive, TransportError
from berth.cluster.watchstream import Lines, WatchStream
from berth.errors import BerthError

__all__ = ["OPENED", "ApiError", "Credentials", "KubeClient", "load_credentials"]

OPENED = "BERTH_WATCH_OPENED"  # the first item of every watch: the stream is established


class ApiError(BerthError):
    """The API server answered with an error status."""

    def __init__(self, message: str, *, status: int, reason: str = "") -> None:
        super().__init__(message, status=status, reason=reason)
        self.status = status
        self.reason = reason


REQUESTS_IN_FLIGHT = 8  # besides the watches and the writes, each on connections of their own
# The writes (a Binding per placed pod) in flight at once, each on a kept-alive connection of its own.
# A Binding's round trip, from its write to its answer read, reached 29 to 42 ms on average under a
# 5000-node benchmark's load (the API server's own time for it 8 to 9 ms; kube-scheduler's binder 16 to
# 53 ms at the API server in the same runs): 8 at a time then capped berth's binds at about 230 a
# second, below the rate kube-scheduler schedules at, and the binds waiting behind the cap took 0.1
# to 0.4 s each (bench/HISTORY.md, "The binds behind a cap of 8"). kube-scheduler's own binder has
# no cap of its own (a goroutine per pod); berth keeps one well above what a scheduler's rate needs.
WRITES_IN_FLIGHT = 64
# A watch event is one JSON line; a Node with many images can be a few hundred KiB. Lines are split
# here, not by the stream reader, so no line is too long.
READ_BUFFER = 1 << 20


class _Answer:
    """What berth reads of a response: the status, the body, the method and path for messages."""

    __slots__ = ("body", "method", "path", "status")

    def __init__(self, status: int, body: bytes, method: str, path: str) -> None:
        self.status, self.body, self.method, self.path = status, body, method, path


class KubeClient:
    """The API server over one aiohttp session: kept-alive connections, a C HTTP parser, no framework
    between the socket and berth (about a third of the client CPU per request of httpx, measured)."""

    def __init__(self, creds: Credentials, *, timeout: float = 30.0) -> None:
        self.creds = creds
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)
        self._session: aiohttp.ClientSession | None = None
        # tls-server-name: the name the server's certificate is checked against, when not the URL's host
        self._request_options: dict[str, Any] = {}
        if creds.tls_server_name:
            self._request_options["server_hostname"] = creds.tls_server_name
        if creds.proxy:
            self._request_options["proxy"] = creds.proxy
        self._refreshing = asyncio.Lock()
        # A few requests at a time over kept-alive connections; the rest wait their turn here.
        self._slots = asyncio.Semaphore(REQUESTS_IN_FLIGHT)
        self._write_slots = asyncio.Semaphore(WRITES_IN_FLIGHT)
        # The writes (a Binding per placed pod) and the watches on connections of their own, without
        # the client framework's cost per request or per event; a cluster behind a proxy is reached
        # through aiohttp only.
        self._endpoint: Endpoint | None = None
        self._writes: KeepAlive | None = None
        # A server these connections cannot reach (not http(s), no TLS context) is left to aiohttp,
        # which also names any error.
        if not creds.proxy:
            with contextlib.suppress(ValueError):
                self._endpoint = Endpoint(
                    creds.server,
                    creds.ssl_context,
                    server_hostname=creds.tls_server_name,
                    user_agent=f"berth/{__version__}",
                )
                self._writes = KeepAlive(self._endpoint, timeout=timeout)

    def _http(self) -> aiohttp.ClientSession:
        # Made on first use, inside the event loop that uses it.
        if self._session is None:
            connector = aiohttp.TCPConnector(
                ssl=self.creds.ssl_context, limit=0, keepalive_timeout=75, enable_cleanup_closed=False
            )
            self._session = aiohttp.ClientSession(
                base_url=self.creds.server.rstrip("/") + "/",
                connector=connector,
                timeout=self._timeout,
                read_bufsize=READ_BUFFER,
                auto_decompress=True,
                skip_auto_headers=("User-Agent",),
                headers={"User-Agent": f"berth/{__version__}"},
            )
        return self._session

    async def aclose(self) -> None:
        if self._writes is not None:
            self._writes.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _refresh(self, *, force: bool = False) -> None:
        """Re-read the token file or run the exec plugin, off the event loop and once for all the
        requests waiting on it; a failure is an ApiError like any other failure to reach the server."""
        async with self._refreshing:
            if force or self.creds.stale():
                try:
                    await asyncio.to_thread(self.creds.refresh, force=force)
                except BerthError as exc:
                    raise ApiError(exc.message, status=0, reason="Credentials") from None

    async def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        if self.creds.stale():
            await self._refresh()
        headers = {"Accept": "application/json", **(extra or {})}
        authorization = self.creds.authorization()
        if authorization:
            headers["Authorization"] = authorization
        return headers

    @staticmethod
    def _raise(answer: _Answer) -> None:
        if answer.status < 400:
            return
        try:
            body = orjson.loads(answer.body)
            message, reason = body.get("message", ""), body.get("reason", "")
        except orjson.JSONDecodeError:
            message, reason = answer.body[:500].decode(errors="replace"), ""
        raise ApiError(
            f"{answer.method} {answer.path}: {answer.status} {message}", status=answer.status, reason=reason
        )

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> _Answer:
        """One request; a transport failure (refused, reset, timeout) becomes an ApiError, so callers
        handle every failure of the API server in one way."""
        query = _query(params)
        for attempt in (1, 2):
            sent = await self._headers(headers)
            try:
                if self._writes is not None and data is not None and not query:
                    async with self._write_slots:
                        status, body = await self._writes.request(method, path, data, sent)
                    answer = _Answer(status, body, method, path)
                else:
                    async with (
                        self._slots,
                        self._http().request(
                            method,
                            path.lstrip("/"),
                            params=query,
                            data=data,
                            headers=sent,
                            **self._request_options,
                        ) as response,
                    ):
                        answer = _Answer(response.status, await response.read(), method, path)
            except (aiohttp.ClientError, TransportError, TimeoutError, OSError) as exc:
                raise ApiError(f"{method} {path}: {type(exc).__name__}: {exc}", status=0) from exc
            if answer.status == 401 and attempt == 1 and self.creds.refreshable:
                # As kubectl: a credential the server no longer takes is renewed once, then retried.
                await self._refresh(force=True)
                continue
            break
        self._raise(answer)
        return answer

    async def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = await self._send("GET", path, params=params)
        return orjson.loads(answer.body)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        answer = await self._send("POST", path, data=orjson.dumps(body), headers=headers)
        return orjson.loads(answer.body) if answer.body else {}

    async def patch(self, path: str, body: dict[str, Any], *, strategic: bool = False) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386): a key set to None is removed. `strategic`: Kubernetes'
        strategic merge patch, which merges lists by their key (a pod's conditions by type)."""
        kind = "strategic-merge-patch" if strategic else "merge-patch"
        headers = {"Content-Type": f"application/{kind}+json"}
        answer = await self._send("PATCH", path, data=orjson.dumps(body), headers=headers)
        return orjson.loads(answer.body) if answer.body else {}

    async def list_pages(self, path: str, params: dict[str, Any] | None = None, limit: int = 500):
        """(items, resourceVersion) of a whole list, read page by page."""
        items: list[dict[str, Any]] = []
        rv = ""
        async for page, version in self.pages(path, params, limit):
            items.extend(page)
            rv = version
        return items, rv

    async def _page(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        """One page of a list, its objects without managedFields (berth.cluster.lean)."""
        answer = await self._send("GET", path, params=params)
        return lean.page(answer.body)

    async def pages(
        self, path: str, params: dict[str, Any] | None = None, limit: int = 500
    ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        """A list page by page, each (its items, the list's resourceVersion once the last page is
        read, "" before): a caller that takes each page in and lets it go never holds the whole list
        decoded (150,000 pods are about 1 GiB of Python objects)."""
        query = dict(params or {}, limit=limit)
        # The next page is asked for before this one is handed on: the API server makes it while the
        # caller converts this one (on a cluster of 150,000 pods, both are seconds of CPU).
        pending: asyncio.Future = asyncio.ensure_future(self._page(path, dict(query)))
        try:
            while True:
                page = await pending
                meta = page.get("metadata") or {}
                last = not meta.get("continue")
                if not last:
                    query["continue"] = meta["continue"]
                    pending = asyncio.ensure_future(self._page(path, dict(query)))
                    await asyncio.sleep(0)  # the request on its way before the caller's work
                yield page.get("items") or [], meta.get("resourceVersion", "") if last else ""
                if last:
                    return
                del page
        finally:
            if not pending.done():
                pending.cancel()

    async def watch(
        self, path: str, params: dict[str, Any], *, idle: float = 150.0, headers_within: float = 30.0
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events as decoded dicts until the server closes the stream; the first item is
        {"type": OPENED} once the server has accepted the watch. A server that sends no headers
        within `headers_within` seconds, or a stream silent for `idle` seconds, ends the watch with an
        ApiError, so a watch that an API server restart left hanging is noticed and restarted."""
        headers = await self._headers()
        query = _query(dict(params, watch="true"))
        if self._endpoint is not None:
            lines = self._own_watch(path, query, headers, idle=idle, headers_within=headers_within)
        else:
            lines = self._session_watch(path, query, headers, idle=idle, headers_within=headers_within)
        async with contextlib.aclosing(lines):
            async for line in lines:
                # The empty line stands for the stream's opening: a watch's own lines are never empty.
                yield lean.event(line) if line else {"type": OPENED}

    async def _own_watch(
        self,
        path: str,
        query: dict[str, str] | None,
        headers: dict[str, str],
        *,
        idle: float,
        headers_within: float,
    ) -> AsyncIterator[bytes]:
        assert self._endpoint is not None
        target = path + ("?" + urlencode(query) if query else "")
        try:
            async with asyncio.timeout(headers_within):
                stream = await WatchStream.open(self._endpoint, target, headers, idle=idle)
        except (TransportError, TimeoutError, OSError) as exc:
            raise ApiError(f"watch {path}: no answer: {type(exc).__name__}: {exc}", status=0) from exc
        try:
            if stream.status >= 400:
                await self._refused_watch(_Answer(stream.status, await stream.body(), "GET", path))
            yield b""
            async for line in stream.lines():
                yield line
        except (TransportError, TimeoutError, OSError) as exc:
            raise ApiError(f"watch {path}: {type(exc).__name__}: {exc}", status=0) from exc
        finally:
            stream.close()

    async def _session_watch(
        self,
        path: str,
        query: dict[str, str] | None,
        headers: dict[str, str],
        *,
        idle: float,
        headers_within: float,
    ) -> AsyncIterator[bytes]:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=headers_within, sock_read=idle)
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that arrives
            # as the request completes, and a cancelled reflector would then never stop.
            async with asyncio.timeout(headers_within):
                response = await self._http().get(
                    path.lstrip("/"), params=query, headers=headers, timeout=timeout, **self._request_options
                )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiError(f"watch {path}: no answer: {type(exc).__name__}: {exc}", status=0) from exc
        try:
            if response.status >= 400:
                await self._refused_watch(_Answer(response.status, await response.read(), "GET", path))
            yield b""
            cut = Lines()
            async for chunk in response.content.iter_any():
                for line in cut.feed(chunk):
                    yield line
            if rest := cut.rest():
                yield rest
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiError(f"watch {path}: {type(exc).__name__}: {exc}", status=0) from exc
        finally:
            response.release()

    async def _refused_watch(self, answer: _Answer) -> None:
        if answer.status == 401 and self.creds.refreshable:
            await self._refresh(force=True)  # the caller's next watch goes with a new credential
        self._raise(answer)


def _query(params: dict[str, Any] | None) -> dict[str, str] | None:
    """Query parameters as strings (aiohttp takes no numbers or booleans)."""
    if not params:
        return None
    return {
        k: v if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in params.items()
    }
