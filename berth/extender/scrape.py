"""The extender's second port: /metrics for authorised scrapers, /healthz /livez /readyz for the kubelet.

The verbs (filter, prioritize, bind, preempt) and /simulate stay on the loopback listener kube-scheduler
calls; nothing of them is routed here. /metrics is guarded the way kube-scheduler guards its secure port
(delegated authentication and authorisation): the bearer token is checked with a TokenReview, its user
with a SubjectAccessReview for `get` on the non-resource URL /metrics, so a scraper needs a ClusterRole
granting that (the chart's `<release>-metrics-reader`). Answers are cached for a few seconds, as kube's
delegating authenticator and authorizer do, so a scrape every 15 s costs at most two API calls. The
health endpoints answer anyone, as kube-scheduler's do (`--authorization-always-allow-paths`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from berth.cluster.kubeapi import ApiError

log = logging.getLogger("berth.extender")
CACHE_SECONDS = 10.0
CACHE_MAX = 1024  # tokens remembered at once; the oldest go first
HEALTH_PATHS = ("/healthz", "/livez", "/readyz")
METRICS_PATH = "/metrics"


class Poster(Protocol):
    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]: ...


class AccessVerdict:
    __slots__ = ("reason", "status")

    def __init__(self, status: int, reason: str) -> None:
        self.status, self.reason = status, reason


ALLOWED = AccessVerdict(200, "")


class DelegatedAuth:
    """Bearer token -> TokenReview -> SubjectAccessReview (get /metrics), each answer kept briefly."""

    def __init__(
        self, client: Poster, *, ttl: float = CACHE_SECONDS, clock: Callable[[], float] = time.monotonic
    ):
        self.client, self.ttl, self.clock = client, ttl, clock
        self._cache: dict[str, tuple[float, AccessVerdict]] = {}

    async def check(self, authorization: str | None, path: str) -> AccessVerdict:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return AccessVerdict(401, "a bearer token is required")
        key = hashlib.sha256(f"{path}\0{token.strip()}".encode()).hexdigest()
        now = self.clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            verdict = await self._review(token.strip(), path)
        except ApiError as exc:  # not cached: the next scrape asks again
            log.warning("metrics authorisation not checked: %s", exc)
            return AccessVerdict(503, "the API server could not check the token")
        if len(self._cache) >= CACHE_MAX:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = (now + self.ttl, verdict)
        return verdict

    async def _review(self, token: str, path: str) -> AccessVerdict:
        review = await self.client.post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return AccessVerdict(401, "the token is not valid")
        user = status.get("user") or {}
        spec: dict[str, Any] = {
            "user": user.get("username", ""),
            "groups": user.get("groups") or [],
            "nonResourceAttributes": {"path": path, "verb": "get"},
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        access = await self.client.post(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        if not (access.get("status") or {}).get("allowed"):
            return AccessVerdict(403, f"{spec['user']} may not get {path}")
        return ALLOWED


class NoAuth:
    """`--metrics-auth none`: for a local run without an API server to ask (a snapshot)."""

    async def check(self, authorization: str | None, path: str) -> AccessVerdict:
        return ALLOWED


Auth = DelegatedAuth | NoAuth


def health_app(
    ready: Callable[[], dict[str, Any]], registry: Any, auth: Auth
) -> Callable[[dict, Any, Any], Awaitable[None]]:
    """The ASGI app of the metrics port: GET /metrics (authorised), the health paths, 404 for the rest
    (served with uvicorn's lifespan off)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path, method = scope.get("path", ""), scope.get("method", "")
        if path not in (*HEALTH_PATHS, METRICS_PATH):
            await _answer(send, 404, {"error": f"{path}: not served on this port"})
        elif method not in ("GET", "HEAD"):
            await _answer(send, 405, {"error": f"{method} {path}: only GET"})
        elif path == "/readyz":
            body = ready()
            await _answer(send, 200 if body["ready"] else 503, body)
        elif path in HEALTH_PATHS:
            await _answer(send, 200, {"status": "ok"})
        else:
            headers = dict(scope.get("headers") or ())
            verdict = await auth.check(_text(headers.get(b"authorization")), path)
            if verdict.status != 200:
                await _answer(send, verdict.status, {"error": verdict.reason})
            else:
                await _send(send, 200, generate_latest(registry), CONTENT_TYPE_LATEST.encode())

    return app


def _text(value: bytes | None) -> str | None:
    return value.decode("latin-1") if value is not None else None


async def _answer(send: Any, status: int, body: dict[str, Any]) -> None:
    await _send(send, status, orjson.dumps(body), b"application/json")


async def _send(send: Any, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
