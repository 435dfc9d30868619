"""The extender's HTTP surface: POST /filter /prioritize /bind /preempt /simulate, GET /healthz
/readyz /metrics.

The hot verbs (filter, prioritize, bind, preempt) are answered by a plain ASGI front, `HotVerbs`, before
any framework code runs: the raw body is decoded straight into the wire types with msgspec and the
answer encoded straight back; a body that does not decode is a 400 at once. Everything else is plain
FastAPI, where the hot verbs are also declared so the OpenAPI document describes them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
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
from berth.extender.decisions import Cluster
from berth.extender.placer import BIND_OUTCOMES, Observers, Placer

log = logging.getLogger("berth.extender")
MAX_BODY_BYTES = 64 * 1024 * 1024  # 5000 full Node objects fit; anything larger is refused

_decoders = {
    "filter": msgspec.json.Decoder(wire.ExtenderFilterArgs),
    "prioritize": msgspec.json.Decoder(wire.ExtenderArgs),
    "bind": msgspec.json.Decoder(wire.ExtenderBindingArgs),
    "preempt": msgspec.json.Decoder(wire.ExtenderPreemptionArgs),
}


# berth's answers take 0.3 to 5 ms: buckets that close together there, so that a quantile read from
# them (the dashboard's histogram_quantile) is a figure, not a guess between 1 and 2.5 ms.
ANSWER_BUCKETS = (
    0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075,
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
)  # fmt: skip


class Metrics:
    """berth serve's metrics: the verbs' counters (given to the Placer as its Observers) and the
    cache's gauges (read from the cluster when scraped)."""

    def __init__(self, cluster: Cluster) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "berth_extender_request_seconds",
            "Time to answer an extender request, by verb.",
            ["verb"],
            registry=self.registry,
            buckets=ANSWER_BUCKETS,
        )
        self.decisions = Counter(
            "berth_decisions_total", "Decisions made, by outcome.", ["outcome"], registry=self.registry
        )
        self.binds = Counter(
            "berth_binds_total",
            "Binds by outcome: confirmed (nothing changed since filter), rechecked (decided again for "
            "the node, then bound), refused (not bound; the scheduler tries the pod again), failed (the "
            "Binding write failed).",
            ["outcome"],
            registry=self.registry,
        )
        for outcome in BIND_OUTCOMES:
            self.binds.labels(outcome)  # shown at 0 before the first bind
        self.errors = Counter(
            "berth_extender_errors_total",
            "Verb requests answered with an error of berth's own: a body that does not decode, or a failure.",
            ["verb"],
            registry=self.registry,
        )
        for verb in _decoders:
            self.errors.labels(verb)  # shown at 0, so that a rate over it exists before the first error
        self.sample = Counter(
            "berth_sample_total",
            "Pods kube-scheduler asked about a sample of the nodes: decided over the sample (decided), "
            "their rules thin there so decided over every node with the best node in the sample "
            "(widened), handed over to a node outside it or nominated on arrival, before kube's first "
            "attempt (handed_over), or refused (refused).",
            ["outcome"],
            registry=self.registry,
        )
        for outcome in ("decided", "widened", "handed_over", "refused"):
            self.sample.labels(outcome)
        self.names = Counter(
            "berth_filter_node_names_total",
            "Filter calls by how their node names were read: found from the bytes (bytes), found as a run "
            "of kube-scheduler's node order learned from earlier calls (recalled), or decoded.",
            ["read"],
            registry=self.registry,
        )
        self.pods = Counter(
            "berth_filter_pods_total",
            "Filter calls by how their pod was read: the record the watch made of the same "
            "resourceVersion (watched), or decoded from the call.",
            ["read"],
            registry=self.registry,
        )
        lag = Gauge(
            "berth_cache_lag_seconds",
            "Seconds since the cache last heard from the API server.",
            registry=self.registry,
        )
        lag.set_function(lambda: min(getattr(cluster, "lag_seconds", lambda: 0.0)(), 1e9))
        ready = Gauge("berth_cache_ready", "1 when the cluster cache has synced.", registry=self.registry)
        ready.set_function(lambda: 1.0 if cluster.ready() else 0.0)
        nodes = Gauge("berth_cache_nodes", "Nodes in the cluster view.", registry=self.registry)
        nodes.set_function(lambda: len(cluster.view))
        reservations = Gauge(
            "berth_cache_reservations",
            "Placements berth counts on a node that the watch has not shown bound yet.",
            registry=self.registry,
        )
        reservations.set_function(lambda: getattr(cluster, "reservations", lambda: 0)())

    def observers(self) -> Observers:
        """The Placer's counters: each label's child looked up once, not on every call."""
        return Observers(
            decision=_counting(self.decisions),
            bind=_counting(self.binds),
            sample=_counting(self.sample),
            names_read=_counting(self.names),
            pod_read=_counting(self.pods),
        )


def _counting(counter: Counter) -> Callable[[str], None]:
    """Count one under a label value, the labelled child kept after its first use."""
    children: dict[str, Any] = {}

    def count(value: str) -> None:
        child = children.get(value)
        if child is None:
            child = children[value] = counter.labels(value)
        child.inc()

    return count


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


class Verbs:
    """The hot verbs free of any framework: a body in, a status and a body out."""

    def __init__(self, placer: Placer, metrics: Metrics) -> None:
        self.placer = placer
        self.metrics = metrics
        self._latency = {verb: metrics.latency.labels(verb) for verb in _decoders}  # the children kept

    async def answer(
        self, verb: str, body: bytes, respond: Callable[[int, bytes], None] | None = None
    ) -> tuple[int, bytes]:
        """The status and body answering `body`; given `respond`, it is called with them as soon as
        they are known, and the placer's bookkeeping (Placer.bookkeep) runs after it: kube-scheduler's
        cycle waits for the answer only."""
        try:
            status, answer = await self._answer(verb, body)
            if respond is not None:
                respond(status, answer)
        finally:
            self.placer.bookkeep()
        return status, answer

    async def _answer(self, verb: str, body: bytes) -> tuple[int, bytes]:
        start = time.perf_counter()
        try:
            placer = self.placer
            try:
                args = _decoders[verb].decode(body)
                asked = placer.nodes_asked(args) if verb == "filter" else None
            except (msgspec.DecodeError, RecursionError) as exc:
                # (RecursionError: JSON nested past msgspec's depth where filter keeps it raw)
                self.metrics.errors.labels(verb).inc()
                return 400, orjson.dumps({"error": f"{verb}: {_why(verb, body, exc)}"})
            if verb == "filter":
                return 200, wire.ENCODER.encode(await placer.filter(args, asked, bookkeep=False))
            if verb == "prioritize":
                return 200, wire.ENCODER.encode(await placer.prioritize(args))
            if verb == "bind":
                return 200, wire.ENCODER.encode(await placer.bind(args))
            return 200, wire.ENCODER.encode(await placer.preempt(args))
        except Exception as exc:  # a bug must cost one attempt, never the scheduler's connection
            log.exception("%s failed", verb)
            self.metrics.errors.labels(verb).inc()
            return 200, wire.ENCODER.encode(
                _failed(verb, f"berth: {verb} failed: {type(exc).__name__}: {exc}")
            )
        finally:
            self._latency[verb].observe(time.perf_counter() - start)


_ARGS = msgspec.json.Decoder(wire.ExtenderArgs)


def _why(verb: str, body: bytes, exc: Exception) -> Exception:
    """The error as decoding the whole body says it, with the path to the field (filter decodes
    the Pod and NodeNames on its own)."""
    if verb != "filter":
        return exc
    try:
        _ARGS.decode(body)
    except (msgspec.DecodeError, RecursionError) as whole:
        return whole
    return exc


TOO_LARGE = orjson.dumps({"error": f"body larger than {MAX_BODY_BYTES} bytes"})
JSON_HEADERS = [(b"content-type", b"application/json")]
HOT_PATHS = {f"/{verb}": verb for verb in _decoders}


class HotVerbs:
    """ASGI: POST /filter, /prioritize, /bind and /preempt answered here; everything else goes to `app`."""

    def __init__(self, app: FastAPI, verbs: Verbs) -> None:
        self.app = app
        self.verbs = verbs
        self.state = app.state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        verb = HOT_PATHS.get(scope.get("path", "")) if scope["type"] == "http" else None
        if verb is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body = await _read_body(scope, receive)
        status, answer = (400, TOO_LARGE) if body is None else await self.verbs.answer(verb, body)
        headers = [*JSON_HEADERS, (b"content-length", str(len(answer)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


async def _read_body(scope: dict[str, Any], receive: Any) -> bytes | None:
    """The request body, or None when it is larger than MAX_BODY_BYTES (refused from its
    Content-Length before it is read, when it says)."""
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            try:
                if int(value) > MAX_BODY_BYTES:
                    return None
            except ValueError:
                pass
            break
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b""  # the client went away; any answer is dropped
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def build_extender(cluster: Cluster, **placer_options: Any) -> HotVerbs:
    """The extender's app over `cluster`: its metrics, and a Placer (made with `placer_options`)
    that counts into them."""
    metrics = Metrics(cluster)
    return create_app(Placer(cluster, observers=metrics.observers(), **placer_options), metrics)


def create_app(placer: Placer, metrics: Metrics) -> HotVerbs:
    """The app answering for `placer`, whose Observers are `metrics.observers()` (build_extender)."""
    app = FastAPI(title="berth extender", version=__version__)
    app.state.placer = placer
    app.state.metrics = metrics
    verbs = Verbs(placer, metrics)

    async def _verb(request: Request, verb: str) -> Response:
        # Reached only when the app is served without its HotVerbs front; the same answer either way.
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return Response(TOO_LARGE, status_code=400, media_type="application/json")
        status, answer = await verbs.answer(verb, body)
        return Response(answer, status_code=status, media_type="application/json")

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
        body = readiness(placer)
        return _json(body, 200 if body["ready"] else 503)

    @app.get("/metrics", responses=openapi.METRICS_RESPONSES)
    async def metrics_route() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return HotVerbs(app, verbs)


def readiness(placer: Placer) -> dict[str, Any]:
    """What /readyz says: ready once the cache has listed the cluster, else what it waits for."""
    ready = placer.cluster.ready()
    body: dict[str, Any] = {"ready": ready}
    if not ready and hasattr(placer.cluster, "waiting"):
        body["waiting"] = placer.cluster.waiting()
    return body


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
