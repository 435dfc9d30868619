"""The extender's HTTP surface: POST /filter /prioritize /bind /preempt /simulate, GET /healthz
/readyz /metrics.

The hot verbs read the raw body and decode it straight into the wire types with msgspec; a body that
does not decode is a 400 at once. Everything else is plain FastAPI, so /simulate is in the OpenAPI
schema.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import msgspec
import orjson
from fastapi import FastAPI, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from berth import __version__
from berth.errors import BerthError
from berth.extender import openapi, wire
from berth.extender.placer import Placer

log = logging.getLogger("berth.extender")
MAX_BODY_BYTES = 64 * 1024 * 1024  # 5000 full Node objects fit; anything larger is refused

_decoders = {
    "filter": msgspec.json.Decoder(wire.ExtenderArgs),
    "prioritize": msgspec.json.Decoder(wire.ExtenderArgs),
    "bind": msgspec.json.Decoder(wire.ExtenderBindingArgs),
    "preempt": msgspec.json.Decoder(wire.ExtenderPreemptionArgs),
}


class Metrics:
    def __init__(self, placer: Placer) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "berth_extender_request_seconds",
            "Time to answer an extender request, by verb.",
            ["verb"],
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.decisions = Counter(
            "berth_decisions_total", "Decisions made, by outcome.", ["outcome"], registry=self.registry
        )
        lag = Gauge(
            "berth_cache_lag_seconds",
            "Seconds since the cache last heard from the API server.",
            registry=self.registry,
        )
        lag.set_function(lambda: min(getattr(placer.cluster, "lag_seconds", lambda: 0.0)(), 1e9))
        ready = Gauge("berth_cache_ready", "1 when the cluster cache has synced.", registry=self.registry)
        ready.set_function(lambda: 1.0 if placer.cluster.ready() else 0.0)
        nodes = Gauge("berth_cache_nodes", "Nodes in the cluster view.", registry=self.registry)
        nodes.set_function(lambda: len(placer.cluster.view))
        reservations = Gauge(
            "berth_cache_reservations",
            "Placements berth counts on a node that the watch has not shown bound yet.",
            registry=self.registry,
        )
        reservations.set_function(lambda: getattr(placer.cluster, "reservations", lambda: 0)())


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _wire(body: Any) -> Response:
    return Response(wire.ENCODER.encode(body), media_type="application/json")


def create_app(placer: Placer) -> FastAPI:
    app = FastAPI(title="berth extender", version=__version__)
    metrics = Metrics(placer)
    placer.observe = lambda outcome: metrics.decisions.labels(outcome).inc()
    app.state.placer = placer
    app.state.metrics = metrics

    async def _decode(request: Request, verb: str) -> Any:
        if int(request.headers.get("content-length") or 0) > MAX_BODY_BYTES:
            raise _BadRequest(f"body larger than {MAX_BODY_BYTES} bytes")
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            raise _BadRequest(f"body larger than {MAX_BODY_BYTES} bytes")
        try:
            return _decoders[verb].decode(body)
        except msgspec.DecodeError as exc:
            raise _BadRequest(f"{verb}: {exc}") from exc

    async def _verb(request: Request, verb: str) -> Response:
        start = time.perf_counter()
        try:
            args = await _decode(request, verb)
            if verb == "filter":
                return _wire(await placer.filter(args))
            if verb == "prioritize":
                return _wire(await placer.prioritize(args))
            if verb == "bind":
                return _wire(await placer.bind(args))
            # berth never proposes victims: every candidate node keeps the victims the scheduler chose.
            return _wire(
                wire.ExtenderPreemptionResult(node_name_to_meta_victims=args.node_name_to_meta_victims)
            )
        except _BadRequest as exc:
            return _json({"error": exc.args[0]}, 400)
        except Exception as exc:  # a bug must cost one attempt, never the scheduler's connection
            log.exception("%s failed", verb)
            return _wire(_failed(verb, f"berth: {verb} failed: {type(exc).__name__}: {exc}"))
        finally:
            metrics.latency.labels(verb).observe(time.perf_counter() - start)

    for verb, (schema, responses) in openapi.VERBS.items():
        app.add_api_route(
            f"/{verb}",
            _route(_verb, verb),
            methods=["POST"],
            name=verb,
            responses=responses,
            openapi_extra=openapi.body(schema),
        )

    @app.post(
        "/simulate", responses=openapi.SIMULATE_RESPONSES, openapi_extra=openapi.body(openapi.SIMULATE_ARGS)
    )
    async def simulate(request: Request) -> Response:
        """The Placement Simulation API: where would this pod go, and why. Changes nothing."""
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError as exc:
            return _json({"error": f"body is not JSON: {exc}"}, 400)
        if not isinstance(body, dict) or not isinstance(body.get("pod"), dict):
            return _json({"error": "body must be an object with a `pod` (a Pod object)"}, 400)
        seed = body.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            return _json({"error": "seed must be an integer"}, 400)
        try:
            decision = placer.simulate(body["pod"], seed=seed)
        except BerthError as exc:
            return _json({"error": exc.message}, 400)
        status = decision.error.code if decision.error else 200
        return _json(decision.to_dict(detail=True), status)

    @app.get("/healthz", responses=openapi.HEALTH_RESPONSES)
    async def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/readyz", responses=openapi.READY_RESPONSES)
    async def readyz() -> Response:
        ready = placer.cluster.ready()
        body: dict[str, Any] = {"ready": ready}
        if not ready and hasattr(placer.cluster, "waiting"):
            body["waiting"] = placer.cluster.waiting()
        return _json(body, 200 if ready else 503)

    @app.get("/metrics", responses=openapi.METRICS_RESPONSES)
    async def metrics_route() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


class _BadRequest(Exception):
    pass


def _failed(verb: str, message: str) -> Any:
    """The verb's own way of saying it failed: the scheduler counts it as a failed attempt."""
    if verb == "filter":
        return wire.ExtenderFilterResult(error=message)
    if verb == "bind":
        return wire.ExtenderBindingResult(error=message)
    if verb == "preempt":
        return wire.ExtenderPreemptionResult()  # no node: preemption does not go ahead
    return []  # prioritize: the scheduler ignores its errors; give no scores


def _route(handler, verb: str):
    async def endpoint(request: Request) -> Response:
        return await handler(request, verb)

    endpoint.__name__ = verb
    return endpoint
