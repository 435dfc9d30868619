"""A small async client for the Kubernetes API: the strict point of cut-off between berth and the
API server. Credentials come from berth.cluster.credentials (a kubeconfig as kubectl reads it, or the
pod's service account); requests go through one httpx.AsyncClient. Only what berth needs: get, list
pages, watch lines, create."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from berth.cluster.credentials import Credentials, load_credentials
from berth.errors import BerthError

__all__ = ["OPENED", "ApiError", "Credentials", "KubeClient", "load_credentials"]

OPENED = "BERTH_WATCH_OPENED"  # the first item of every watch: the stream is established


class ApiError(BerthError):
    """The API server answered with an error status."""

    def __init__(self, message: str, *, status: int, reason: str = "") -> None:
        super().__init__(message, status=status, reason=reason)
        self.status = status
        self.reason = reason


REQUESTS_IN_FLIGHT = 8  # besides the watches, each of which holds a connection of its own


class KubeClient:
    def __init__(
        self, creds: Credentials, *, timeout: float = 30.0, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.creds = creds
        self._http = httpx.AsyncClient(
            base_url=creds.server,
            verify=creds.ssl_context,
            timeout=httpx.Timeout(timeout, read=None),
            transport=transport,
            proxy=creds.proxy,
        )
        # tls-server-name: the name the server's certificate is checked against, when not the URL's host
        self._extensions = {"sni_hostname": creds.tls_server_name} if creds.tls_server_name else {}
        self._refreshing = asyncio.Lock()
        # httpcore matches every waiting request against every pooled connection at each step: with
        # hundreds of requests at once (an event per placed pod) that costs more CPU than the requests.
        # A few at a time over kept-alive connections keeps it cheap; the rest wait their turn here.
        self._slots = asyncio.Semaphore(REQUESTS_IN_FLIGHT)

    async def aclose(self) -> None:
        await self._http.aclose()

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
    def _raise(response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        try:
            body = orjson.loads(response.content)
            message, reason = body.get("message", ""), body.get("reason", "")
        except orjson.JSONDecodeError:
            message, reason = response.text[:500], ""
        raise ApiError(
            f"{response.request.method} {response.request.url.path}: {response.status_code} {message}",
            status=response.status_code,
            reason=reason,
        )

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; a transport failure (refused, reset, timeout) becomes an ApiError, so callers
        handle every failure of the API server in one way."""
        extra = kwargs.pop("headers", None)
        for attempt in (1, 2):
            headers = await self._headers(extra)
            try:
                async with self._slots:
                    response = await self._http.request(
                        method, path, headers=headers, extensions=self._extensions, **kwargs
                    )
            except httpx.TransportError as exc:
                raise ApiError(f"{method} {path}: {type(exc).__name__}: {exc}", status=0) from exc
            if response.status_code == 401 and attempt == 1 and self.creds.refreshable:
                # As kubectl: a credential the server no longer takes is renewed once, then retried.
                await self._refresh(force=True)
                continue
            break
        self._raise(response)
        return response

    async def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await self._send("GET", path, params=params)
        return orjson.loads(response.content)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        response = await self._send("POST", path, content=orjson.dumps(body), headers=headers)
        return orjson.loads(response.content) if response.content else {}

    async def list_pages(self, path: str, params: dict[str, Any] | None = None, limit: int = 500):
        """(items, resourceVersion) of a whole list, read page by page."""
        items: list[dict[str, Any]] = []
        query = dict(params or {}, limit=limit)
        while True:
            page = await self.get(path, query)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                return items, meta.get("resourceVersion", "")
            query["continue"] = meta["continue"]

    async def watch(
        self, path: str, params: dict[str, Any], *, idle: float = 150.0, headers_within: float = 30.0
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events as decoded dicts until the server closes the stream; the first item is
        {"type": OPENED} once the server has accepted the watch. A server that sends no headers
        within `headers_within` seconds, or a stream silent for `idle` seconds, ends the watch with an
        ApiError, so a watch that an API server restart left hanging is noticed and restarted."""
        request = self._http.build_request(
            "GET",
            path,
            params=dict(params, watch="true"),
            headers=await self._headers(),
            timeout=httpx.Timeout(30.0, read=idle),
            extensions=self._extensions,
        )
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that arrives
            # as the request completes, and a cancelled reflector would then never stop.
            async with asyncio.timeout(headers_within):
                response = await self._http.send(request, stream=True)
        except (httpx.TransportError, TimeoutError) as exc:
            raise ApiError(f"watch {path}: no answer: {type(exc).__name__}: {exc}", status=0) from exc
        try:
            if response.status_code >= 400:
                await response.aread()
                if response.status_code == 401 and self.creds.refreshable:
                    await self._refresh(force=True)  # the caller's next watch goes with a new credential
                self._raise(response)
            yield {"type": OPENED}
            async for line in response.aiter_lines():
                if line:
                    yield orjson.loads(line)
        except httpx.TransportError as exc:
            raise ApiError(f"watch {path}: {type(exc).__name__}: {exc}", status=0) from exc
        finally:
            await response.aclose()
