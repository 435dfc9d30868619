"""A small async client for the Kubernetes API: the strict point of cut-off between berth and the
API server. Credentials come from a kubeconfig or from the pod's service account; requests go through
one httpx.AsyncClient. Only what berth needs: get, list pages, watch lines, create."""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

from berth.errors import BerthError

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD_SECONDS = 60  # projected tokens rotate; re-read the file regularly
OPENED = "BERTH_WATCH_OPENED"  # the first item of every watch: the stream is established


class ApiError(BerthError):
    """The API server answered with an error status."""

    def __init__(self, message: str, *, status: int, reason: str = "") -> None:
        super().__init__(message, status=status, reason=reason)
        self.status = status
        self.reason = reason


@dataclass
class Credentials:
    server: str
    ssl_context: ssl.SSLContext | bool
    token: str = ""
    token_file: str = ""
    namespace: str = "default"


def _materialise(data_b64: str | None, path: str | None, base: Path, suffix: str) -> str | None:
    """A file path for kubeconfig `*-data` (written 0600 to a temp file) or a relative `*` path."""
    if data_b64:
        fd, name = tempfile.mkstemp(prefix="berth-", suffix=suffix)
        with os.fdopen(fd, "wb") as fh:
            fh.write(base64.b64decode(data_b64))
        return name
    if path:
        return str((base / path).resolve()) if not os.path.isabs(path) else path
    return None


def from_kubeconfig(path: str | None = None, context: str | None = None) -> Credentials:
    path = path or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or str(Path.home() / ".kube/config")
    try:
        config = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise BerthError(f"kubeconfig {path}: {exc.strerror}") from exc
    base = Path(path).resolve().parent
    name = context or config.get("current-context")
    ctx = next((c["context"] for c in config.get("contexts", []) if c.get("name") == name), None)
    if ctx is None:
        raise BerthError(f"kubeconfig {path}: no context {name!r}")
    cluster = next(
        (c["cluster"] for c in config.get("clusters", []) if c.get("name") == ctx.get("cluster")), {}
    )
    user = next((u["user"] for u in config.get("users", []) if u.get("name") == ctx.get("user")), {})
    server = cluster.get("server")
    if not server:
        raise BerthError(f"kubeconfig {path}: cluster {ctx.get('cluster')!r} has no server")
    verify: ssl.SSLContext | bool
    if cluster.get("insecure-skip-tls-verify"):
        verify = False
    else:
        verify = ssl.create_default_context()
        ca = _materialise(
            cluster.get("certificate-authority-data"), cluster.get("certificate-authority"), base, ".crt"
        )
        if ca:
            verify.load_verify_locations(ca)
    cert = _materialise(user.get("client-certificate-data"), user.get("client-certificate"), base, ".crt")
    key = _materialise(user.get("client-key-data"), user.get("client-key"), base, ".key")
    if cert and key:
        if verify is False:
            verify = ssl.create_default_context()
            verify.check_hostname = False
            verify.verify_mode = ssl.CERT_NONE
        verify.load_cert_chain(cert, key)
    return Credentials(
        server=server.rstrip("/"),
        ssl_context=verify,
        token=user.get("token", ""),
        token_file=user.get("tokenFile", ""),
        namespace=ctx.get("namespace", "default"),
    )


def in_cluster() -> Credentials:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise BerthError("not running in a cluster (KUBERNETES_SERVICE_HOST is unset); give --kubeconfig")
    context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
    namespace_file = SERVICE_ACCOUNT / "namespace"
    return Credentials(
        server=f"https://{host}:{port}" if ":" not in host else f"https://[{host}]:{port}",
        ssl_context=context,
        token_file=str(SERVICE_ACCOUNT / "token"),
        namespace=namespace_file.read_text().strip() if namespace_file.exists() else "default",
    )


def load_credentials(kubeconfig: str | None = None) -> Credentials:
    if kubeconfig:
        return from_kubeconfig(kubeconfig)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster()
    return from_kubeconfig(None)


REQUESTS_IN_FLIGHT = 8  # besides the watches, each of which holds a connection of its own


class KubeClient:
    def __init__(
        self, creds: Credentials, *, timeout: float = 30.0, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.creds = creds
        self._token = creds.token
        self._token_read = 0.0
        self._http = httpx.AsyncClient(
            base_url=creds.server,
            verify=creds.ssl_context,
            timeout=httpx.Timeout(timeout, read=None),
            transport=transport,
        )
        # httpcore matches every waiting request against every pooled connection at each step: with
        # hundreds of requests at once (an event per placed pod) that costs more CPU than the requests.
        # A few at a time over kept-alive connections keeps it cheap; the rest wait their turn here.
        self._slots = asyncio.Semaphore(REQUESTS_IN_FLIGHT)

    async def aclose(self) -> None:
        await self._http.aclose()

    def _headers(self) -> dict[str, str]:
        if self.creds.token_file and time.monotonic() - self._token_read > TOKEN_REREAD_SECONDS:
            self._token = Path(self.creds.token_file).read_text().strip()
            self._token_read = time.monotonic()
        headers = {"Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
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
        try:
            async with self._slots:
                response = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ApiError(f"{method} {path}: {type(exc).__name__}: {exc}", status=0) from exc
        self._raise(response)
        return response

    async def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await self._send("GET", path, params=params, headers=self._headers())
        return orjson.loads(response.content)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {**self._headers(), "Content-Type": "application/json"}
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
            headers=self._headers(),
            timeout=httpx.Timeout(30.0, read=idle),
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
                self._raise(response)
            yield {"type": OPENED}
            async for line in response.aiter_lines():
                if line:
                    yield orjson.loads(line)
        except httpx.TransportError as exc:
            raise ApiError(f"watch {path}: {type(exc).__name__}: {exc}", status=0) from exc
        finally:
            await response.aclose()
