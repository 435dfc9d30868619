"""`berth serve`: the scheduler extender."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from berth.cli.options import (
    add_config,
    add_kubeconfig_args,
    examples,
)
from berth.cli.sources import (
    allocator_config,
)
from berth.configure import build_pipeline
from berth.errors import BerthError

if TYPE_CHECKING:
    from berth.extender.serve import ServeOptions


def add_parser(sub: Any, prog: str) -> None:
    srv = sub.add_parser(
        "serve",
        help="run the scheduler extender",
        description="Serve the kube-scheduler extender verbs (POST /filter /prioritize /bind /preempt), the "
        "Placement Simulation API (POST /simulate), /healthz, /readyz and /metrics. The cluster comes from "
        "list+watch through the kubeconfig (or the pod's service account), or from a snapshot file.",
        epilog=examples(
            prog,
            "serve --cluster examples/cluster.yaml",
            "serve --port 8888 --kube-sample berth-scheduler=0,berth-scheduler-exhaustive=100",
        ),
    )
    srv.add_argument("--cluster", metavar="FILE", help="serve from a snapshot file instead of a live cluster")
    add_kubeconfig_args(srv)
    srv.add_argument(
        "--host", default="127.0.0.1", help="loopback address the verbs listen on (default 127.0.0.1)"
    )
    srv.add_argument("--port", type=int, default=8888)
    srv.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate")
    srv.add_argument("--tls-key", metavar="FILE")
    srv.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    add_config(srv)
    srv.add_argument(
        "--kube-sample",
        metavar="PROFILE=PERCENT,...",
        default="",
        help="kube-scheduler's percentageOfNodesToScore for each profile that asks this extender (0: "
        "kube's adaptive default). For a pod of such a profile whose rules few nodes meet, berth looks "
        "past kube's sample and hands the pod over to a node outside it; a profile not listed is "
        "taken as asking about every node",
    )
    srv.add_argument(
        "--reservation-seconds",
        type=float,
        default=30.0,
        metavar="S",
        help="how long a placement the watch has not shown bound counts on its node before berth asks the "
        "API server whether it is bound (default 30; it is undone only when the API server says not bound)",
    )
    srv.add_argument(
        "--placement-events",
        default="none",
        metavar="LIST",
        help="events written on each placed pod: none (default; the placement record rides on the pod as "
        "the berth.dev/placement annotation), all, or a comma list of Placed, HadNoChoice, FinalCandidates, "
        "HighestAffinity. Refusals and invalid specifications are always events",
    )
    srv.add_argument(
        "--follow-lease",
        metavar="NAMESPACE/NAME",
        help="the Lease the kube-scheduler beside berth leads by: filter is answered only while it holds "
        "it (once the view holds every placement made before it took it) and bind is refused once it no "
        "longer does",
    )
    srv.add_argument(
        "--fence-pod",
        metavar="NAMESPACE/NAME",
        help="with --follow-lease: berth serve's own pod (the chart gives it from the downward API). When "
        "the scheduler takes the Lease, berth writes a condition on it and waits for its watch to show it, "
        "instead of listing the cluster again (default: list again)",
    )
    srv.add_argument(
        "--identity",
        metavar="NAME",
        help="with --follow-lease: the scheduler's identity in the Lease, before its '_' (default: this "
        "host's name, which kube-scheduler uses)",
    )
    srv.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        metavar="PORT",
        help="serve /metrics (to bearer tokens the API server allows to get /metrics) and /healthz "
        "/livez /readyz (to anyone) over HTTPS on this port too; never the verbs (default 0: off)",
    )
    srv.add_argument(
        "--metrics-host", default="0.0.0.0", help="address of the metrics port (default 0.0.0.0)"
    )
    srv.add_argument(
        "--metrics-auth",
        choices=("delegated", "none"),
        default="delegated",
        help="delegated (default): TokenReview and SubjectAccessReview, as kube-scheduler; none: local runs",
    )
    srv.add_argument(
        "--metrics-cert", metavar="FILE", help="certificate of the metrics port (default: self-signed)"
    )
    srv.add_argument("--metrics-key", metavar="FILE")
    srv.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from berth.extender.serve import serve

    serve(complete(args))
    return 0


def complete(args: argparse.Namespace) -> ServeOptions:
    """The command line made into berth serve's options, each flag read once (serve validates them)."""
    from berth.extender.sample import parse_profiles
    from berth.extender.serve import MetricsPort, ServeOptions

    lease = _namespaced("--follow-lease", args.follow_lease)
    fence_pod = _namespaced("--fence-pod", args.fence_pod)
    config = allocator_config(args.config)
    try:
        kube_sample = parse_profiles(args.kube_sample)
    except ValueError as exc:
        raise BerthError(str(exc)) from None
    metrics = None
    if args.metrics_port:
        metrics = MetricsPort(
            args.metrics_port, args.metrics_host, args.metrics_auth, args.metrics_cert, args.metrics_key
        )
    options = ServeOptions(
        rules=build_pipeline(config, kube_filters=False),
        with_kube=build_pipeline(config, kube_filters=True),
        host=args.host,
        port=args.port,
        cluster_file=args.cluster,
        kubeconfig=args.kubeconfig,
        context=args.context,
        certfile=args.tls_cert,
        keyfile=args.tls_key,
        log_level=args.log_level,
        reservation_seconds=args.reservation_seconds,
        placement_events=_placement_events(args.placement_events),
        lease=lease,
        identity=args.identity,
        fence_pod=fence_pod,
        metrics=metrics,
        kube_sample=kube_sample,
    )
    return options


def _namespaced(flag: str, value: str | None) -> tuple[str, str] | None:
    """A flag's NAMESPACE/NAME as (namespace, name); None when it is not given."""
    if value is None:
        return None
    namespace, _, name = value.partition("/")
    if not namespace or not name:
        raise BerthError(f"{flag} should be NAMESPACE/NAME, found {value!r}")
    return namespace, name


def _placement_events(value: str) -> tuple[str, ...]:
    from berth.extender.pod_events import PLACEMENT_EVENTS

    if value in ("", "none"):
        return ()
    if value == "all":
        return PLACEMENT_EVENTS
    wanted = tuple(v.strip() for v in value.split(",") if v.strip())
    unknown = [v for v in wanted if v not in PLACEMENT_EVENTS]
    if unknown:
        raise BerthError(
            f"--placement-events: unknown event {unknown[0]!r}; "
            f"give none, all, or a comma list of {', '.join(PLACEMENT_EVENTS)}"
        )
    return wanted
