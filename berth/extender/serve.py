"""`berth serve`: the extender on a live cluster (list+watch) or on a snapshot file."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import ipaddress
import logging
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import uvicorn

from berth.certs import self_signed
from berth.cluster.events import event_body, involved, retry_patch
from berth.cluster.kubeapi import Credentials, KubeClient, load_credentials
from berth.cluster.leadership import Leadership
from berth.cluster.live import RESERVATION_SECONDS, LiveCluster
from berth.cluster.model import Pod
from berth.cluster.snapshot import load_snapshot
from berth.cluster.view import ClusterView
from berth.engine import Event, Pipeline
from berth.errors import BerthError
from berth.extender.app import HotVerbs, build_extender, readiness
from berth.extender.placer import Writes
from berth.extender.protocol import HotProtocol
from berth.extender.scrape import DelegatedAuth, NoAuth, health_app

log = logging.getLogger("berth.extender")
# Python collects its young generation after 700 net allocations of containers, and that collection
# walks every container made since the last one. The engine keeps, with the view, up to 64 candidate
# dicts of up to every node alive between decisions (berth.engine.slots), so at 5000 nodes that walk
# paused a filter for 4 to 6 ms about once every 40 pods (bench/HISTORY.md). berth's garbage is freed
# by reference counting; the young generation is collected far less often instead.
GC_THRESHOLDS = (50_000, 10, 10)


class SnapshotCluster:
    """A fixed view from a file: always ready; placements are kept in memory."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def ready(self) -> bool:
        return True

    def lag_seconds(self) -> float:
        return 0.0

    def reserve(self, pod: Pod, node: str) -> None:
        self.view.add_pod(msgspec.structs.replace(pod, node_name=node))

    def release(self, pod: Pod) -> None:
        current = self.view.pod(pod.key)
        if current is not None:
            self.view.add_pod(msgspec.structs.replace(current, node_name=""))


async def _no_binding(pod: Pod, node: str, annotations: dict[str, str]) -> None:
    return None


async def _log_events(pod: Pod, events: list[Event]) -> None:
    for event in events:
        log.info("%s %s %s: %s", pod.key, event.type, event.reason, event.message)


def api_binder(client: KubeClient):
    async def bind(pod: Pod, node: str, annotations: dict[str, str]) -> None:
        # kube-apiserver copies a Binding's annotations onto the pod in the same write: the placement
        # record costs no API call of its own.
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": pod.name,
                "namespace": pod.namespace,
                **({"uid": pod.uid} if pod.uid else {}),
                **({"annotations": annotations} if annotations else {}),
            },
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await client.post(f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding", body)

    return bind


def api_nominator(client: KubeClient):
    async def nominate(pod: Pod, node: str) -> None:
        # The hand-over past kube-scheduler's sample (berth.extender.sample): its next attempt
        # evaluates the nominated node first.
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
        await client.patch(path, {"status": {"nominatedNodeName": node}})

    return nominate


def api_retrier(client: KubeClient):
    async def retry(pod: Pod, why: str) -> None:
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
        await client.patch(path, retry_patch("NeighbourLeft", why), strategic=True)

    return retry


def api_recorder(client: KubeClient):
    tasks: set[asyncio.Task] = set()
    instance = socket.gethostname()

    async def post(pod: Pod, event: Event) -> None:
        about = involved("v1", "Pod", pod.namespace, pod.name, pod.uid)
        body = event_body(about, event.type, event.reason, event.message, instance)
        try:
            await client.post(f"/api/v1/namespaces/{pod.namespace}/events", body)
        except Exception as exc:  # an event is best effort: never fail a verb for it
            log.warning("event for %s not recorded: %s", pod.key, exc)

    async def record(pod: Pod, events: list[Event]) -> None:
        # Off the request path: the scheduler waits for the verb, not for the event.
        for event in events:
            task = asyncio.create_task(post(pod, event))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    return record


@dataclass(frozen=True)
class MetricsPort:
    """The port of /metrics and the health endpoints (berth.extender.scrape), HTTPS."""

    port: int
    host: str = "0.0.0.0"
    auth: str = "delegated"  # or "none"
    certfile: str | None = None  # empty: a self-signed certificate made at start, as kube-scheduler's
    keyfile: str | None = None


def loopback(host: str) -> str:
    """The verbs' address: loopback only. kube-scheduler calls them from inside the pod, and /bind
    writes Bindings with the extender's own rights, so nothing else may reach them."""
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        if host == "localhost":
            return host
    raise BerthError(
        f"--host {host}: the extender's verbs and /simulate listen on loopback only (127.0.0.1 or ::1); "
        "serve /metrics and the health endpoints beyond the pod with --metrics-port"
    )


class _Beside(uvicorn.Server):
    """A second server in the same event loop: the first one handles the signals and stops it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _metrics_server(front: Any, metrics: MetricsPort, client: KubeClient | None, log_level: str) -> _Beside:
    if metrics.auth == "delegated":
        assert client is not None  # ServeOptions.validate refuses delegated auth over a --cluster file
        auth: Any = DelegatedAuth(client)
    else:
        auth = NoAuth()
    certfile, keyfile = metrics.certfile, metrics.keyfile
    if not certfile:
        files = self_signed(
            Path(tempfile.mkdtemp(prefix="berth-metrics-")), [socket.gethostname(), "localhost"]
        )
        certfile, keyfile = str(files.cert), str(files.key)
    app = health_app(lambda: readiness(front.state.placer), front.state.metrics.registry, auth)
    config = uvicorn.Config(
        app,
        host=metrics.host,
        port=metrics.port,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        ssl_certfile=certfile,
        ssl_keyfile=keyfile,
    )
    return _Beside(config)


@dataclass(frozen=True)
class ServeOptions:
    """What `berth serve` was told, completed from its command line (berth.cli.serve_cmd) and checked
    once by `validate`, as kubectl's commands complete, validate and run their options."""

    rules: Pipeline  # berth's chain over the nodes kube-scheduler's filters passed
    with_kube: Pipeline  # the same with kube's filters as berth models them
    host: str = "127.0.0.1"
    port: int = 8888
    cluster_file: str | None = None  # a snapshot to serve instead of a live cluster
    kubeconfig: str | None = None
    context: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    log_level: str = "info"
    reservation_seconds: float = RESERVATION_SECONDS
    placement_events: tuple[str, ...] = ()
    lease: tuple[str, str] | None = None  # --follow-lease: the scheduler's Lease, (namespace, name)
    identity: str | None = None
    fence_pod: tuple[str, str] | None = None  # --fence-pod: berth serve's own pod, (namespace, name)
    metrics: MetricsPort | None = None
    kube_sample: dict[str, int] = field(default_factory=dict)

    def validate(self) -> None:
        """Every rule between options, each broken one a BerthError naming the flags."""
        loopback(self.host)
        if bool(self.certfile) != bool(self.keyfile):
            raise BerthError("--tls-cert and --tls-key go together")
        if self.lease is not None and self.cluster_file:
            raise BerthError("--follow-lease goes with a live cluster, not --cluster")
        if self.fence_pod is not None and self.lease is None:
            raise BerthError(
                "--fence-pod goes with --follow-lease: the fence is written when the lease is taken"
            )
        metrics = self.metrics
        if metrics is not None:
            if bool(metrics.certfile) != bool(metrics.keyfile):
                raise BerthError("--metrics-cert and --metrics-key go together")
            if metrics.auth == "delegated" and self.cluster_file:
                raise BerthError(
                    "--metrics-auth delegated asks the API server who may scrape: with --cluster, use none"
                )


@dataclass
class Extender:
    """What `build` makes of the options: the app and what runs beside it."""

    app: HotVerbs
    live: LiveCluster | None
    leadership: Leadership | None
    client: KubeClient | None


def serve(options: ServeOptions) -> None:
    """Validate, build, run until a signal stops the server."""
    options.validate()
    # Before the event loop: a bad kubeconfig, context or credential plugin is one line, at once.
    creds = None if options.cluster_file else load_credentials(options.kubeconfig, options.context)

    async def main() -> None:
        gc.set_threshold(*GC_THRESHOLDS)
        await run(build(options, creds), options)

    logging.basicConfig(
        level=getattr(logging, options.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        import uvloop

        uvloop.run(main())
    except ImportError:  # pragma: no cover - uvloop is a dependency; stay usable without it
        asyncio.run(main())


def build(options: ServeOptions, creds: Credentials | None) -> Extender:
    """The extender over a snapshot file, or over the live cluster of `creds` (its cache not started)."""
    common: dict[str, Any] = {
        "rules": options.rules,
        "with_kube": options.with_kube,
        "placement_events": options.placement_events,
    }
    if options.cluster_file:
        snapshot = SnapshotCluster(load_snapshot(options.cluster_file).view)
        # The snapshot is long-lived: keep it out of every later collection, as the live cache does.
        gc.collect()
        gc.freeze()
        app = build_extender(snapshot, writes=Writes(bind=_no_binding, record=_log_events), **common)
        return Extender(app, None, None, None)
    assert creds is not None
    client = KubeClient(creds)
    live = LiveCluster(
        client,
        reservation_seconds=options.reservation_seconds,
        fence_pod=options.fence_pod,
    )
    leadership = None
    if options.lease is not None:
        namespace, name = options.lease
        leadership = Leadership(
            client, namespace, name, options.identity or socket.gethostname(), on_lead=live.catch_up
        )
    writes = Writes(
        bind=api_binder(client),
        record=api_recorder(client),
        nominate=api_nominator(client),
        retry=api_retrier(client),
    )
    app = build_extender(
        live,
        writes=writes,
        leadership=leadership,
        kube_sample=options.kube_sample,
        **common,
    )
    live.add_handler(app.state.placer)
    return Extender(app, live, leadership, client)


async def run(extender: Extender, options: ServeOptions) -> None:
    """Start the cache and the leadership watch, serve until stopped, then stop them."""
    following: asyncio.Task | None = None
    if extender.live is not None:
        await extender.live.start()
    if extender.leadership is not None:
        following = asyncio.create_task(extender.leadership.run(), name="leadership")
    app = extender.app
    config = uvicorn.Config(
        app,
        host=options.host,
        port=options.port,
        log_level=options.log_level,
        access_log=False,
        # uvicorn's httptools protocol, answering filter/prioritize/bind/preempt on the connection
        http=functools.partial(HotProtocol, verbs=app.verbs),
        timeout_keep_alive=75,
        ssl_certfile=options.certfile,
        ssl_keyfile=options.keyfile,
    )
    server = uvicorn.Server(config)
    metrics = options.metrics
    beside = _metrics_server(app, metrics, extender.client, options.log_level) if metrics else None
    side = asyncio.create_task(beside.serve(), name="metrics port") if beside else None
    try:
        await server.serve()
    finally:
        if beside is not None and side is not None:
            beside.should_exit = True
            await asyncio.gather(side, return_exceptions=True)
        if following is not None:
            following.cancel()
        if extender.live is not None:
            await extender.live.stop()
