"""The `berth` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Sequence
from typing import Any

import msgspec

from berth import __version__
from berth.cluster.convert import pod_from_k8s, pod_template
from berth.cluster.model import Pod
from berth.cluster.snapshot import Snapshot, load_snapshot, read_documents
from berth.engine.decide import decide
from berth.engine.types import Decision
from berth.errors import BerthError, InvalidPolicy
from berth.pipeline import build_pipeline
from berth.report import headroom_table, table
from berth.validate import validate_files
from berth.vocab.alloc.config import AllocatorConfig, load_config
from berth.vocab.policy.files import load_policy_files

EXIT_PLACED, EXIT_NO_FIT, EXIT_INVALID = 0, 1, 2
LONG_RUNNING = ("serve", "operator")
CONFIG_HELP = "allocator configuration (allocationDescription, defaults, packages); see docs/allocator.md"


def _exit_code(decisions: Sequence[Decision]) -> int:
    codes = {d.error.code for d in decisions if d.error}
    if 400 in codes:
        return EXIT_INVALID
    return EXIT_NO_FIT if 409 in codes else EXIT_PLACED


def _pods_in(path: str, namespace: str | None = None, default: str = "default") -> list[dict[str, Any]]:
    """The pods of a file; those without a namespace are in `namespace` (-n, which the file must agree
    with, as for `kubectl apply -n`), else in `default`."""
    objects = [_in_namespace(obj, namespace, default, path) for obj in read_documents(path)]
    pods = [p for p in (pod_template(obj) for obj in objects) if p is not None]
    if not pods:
        raise BerthError(f"{path}: no Pod or workload with a pod template found")
    return pods


def cmd_simulate(args: argparse.Namespace) -> int:
    try:
        policies = load_policy_files(args.policy) if args.policy else None
    except InvalidPolicy as exc:
        for line in exc.errors:
            print(f"berth: {line}", file=sys.stderr)
        return EXIT_INVALID
    snapshot = _source_snapshot(args)
    if policies is not None:
        # Like Drove's simulate-placement --placement-policy: these govern every simulated pod.
        snapshot.view.override_policies(policies)
    pipeline = build_pipeline(_allocator_config(args.config), offline=True)
    decisions = []
    for i, raw in enumerate(_pods_in(args.pod, args.namespace, snapshot.namespace)):
        pod = pod_from_k8s(raw)
        seed = None if args.seed is None else args.seed + i
        decision = decide(pod, snapshot.view, pipeline, seed=seed)
        decisions.append(decision)
        if decision.chosen:
            # Later pods in the same file see this one where it was placed (a burst).
            snapshot.view.add_pod(_placed(pod, decision.chosen))
    if args.output == "json":
        body: Any = (
            decisions[0].to_dict(detail=args.detail)
            if len(decisions) == 1
            else {"decisions": [d.to_dict(detail=args.detail) for d in decisions]}
        )
        print(json.dumps(body, indent=2))
    else:
        print("\n\n".join(table(d, detail=args.detail) for d in decisions))
    return _exit_code(decisions)


def cmd_explain(args: argparse.Namespace) -> int:
    from berth.extender.placer import seed_for

    snapshot = _source_snapshot(args)
    key = args.pod if "/" in args.pod else f"{args.namespace or snapshot.namespace}/{args.pod}"
    pod = snapshot.view.pod(key)
    if pod is None:
        raise BerthError(f"no pod {key} in the cluster (terminal pods are not kept)")
    seed = seed_for(pod) if args.seed is None else args.seed
    decision = decide(
        pod, snapshot.view, build_pipeline(_allocator_config(args.config), offline=True), seed=seed
    )
    where = f"is on {pod.node_name}" if pod.node_name else "is not placed"
    if decision.chosen and pod.node_name:
        verdict = "the same node" if decision.chosen == pod.node_name else f"{decision.chosen}, another node"
        summary = f"{key} {where}; berth, asked now with the pod's own seed {seed}, chooses {verdict}"
    else:
        answer = decision.error.message if decision.error else f"would place it on {decision.chosen}"
        summary = f"{key} {where}; berth, asked now: {answer}"
    if args.output == "json":
        print(
            json.dumps(
                {"pod": key, "node": pod.node_name or None, "decision": decision.to_dict(detail=True)},
                indent=2,
            )
        )
    else:
        print(summary)
        print()
        print(table(decision, detail=True))
    return _exit_code([decision])


def _placed(pod: Pod, node: str) -> Pod:
    return msgspec.structs.replace(pod, node_name=node)


def _allocator_config(path: str | None) -> AllocatorConfig | None:
    """The allocator configuration of --config (None: berth's defaults); its warnings go to stderr."""
    if path is None:
        return None
    config = load_config(path)
    for warning in config.warnings:
        print(f"berth: warning: {path}: {warning}", file=sys.stderr)
    return config


def cmd_capacity(args: argparse.Namespace) -> int:
    from berth.vocab.alloc.headroom import headroom

    config = _allocator_config(args.config)
    snapshot = load_snapshot(args.cluster)
    reports = [
        headroom(pod_from_k8s(raw), snapshot.view, config or AllocatorConfig()) for raw in _pods_in(args.pod)
    ]
    if args.output == "json":
        body: Any = reports[0].to_dict() if len(reports) == 1 else {"pods": [r.to_dict() for r in reports]}
        print(json.dumps(body, indent=2))
    else:
        print("\n\n".join(headroom_table(r) for r in reports))
    return 0


def load_live_snapshot(kubeconfig: str | None, context: str | None = None) -> Snapshot:
    """The cluster now, through the kubeconfig and context as kubectl would read them; names without
    a namespace are in the context's namespace."""
    from berth.cluster.kubeapi import load_credentials
    from berth.cluster.live import fetch_snapshot

    creds = load_credentials(kubeconfig, context)  # a bad kubeconfig or plugin fails here, in one line
    snapshot = asyncio.run(fetch_snapshot(creds))  # type: ignore[arg-type]  (loaded credentials pass)
    snapshot.namespace = creds.namespace
    return snapshot


def _source_snapshot(args: argparse.Namespace) -> Snapshot:
    if args.live:
        return load_live_snapshot(args.kubeconfig, args.context)
    if args.kubeconfig or args.context:
        raise BerthError("--kubeconfig and --context go with --live")
    return load_snapshot(args.cluster)


def _in_namespace(obj: dict[str, Any], namespace: str | None, default: str, path: str) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        return obj  # the pod's own checks name what is wrong with it
    if namespace and meta.get("namespace") and meta["namespace"] != namespace:
        raise BerthError(
            f"{path}: {obj.get('kind', 'object')} {meta.get('name', '')} is in namespace "
            f"{meta['namespace']}, not {namespace} (as kubectl: the file and -n must agree)"
        )
    return {**obj, "metadata": {**meta, "namespace": meta.get("namespace") or namespace or default}}


def cmd_serve(args: argparse.Namespace) -> int:
    from berth.extender.serve import serve

    if bool(args.tls_cert) != bool(args.tls_key):
        raise BerthError("--tls-cert and --tls-key go together")
    config = _allocator_config(args.config)
    serve(
        host=args.host,
        port=args.port,
        online=build_pipeline(config, offline=False),
        offline=build_pipeline(config, offline=True),
        cluster_file=args.cluster,
        kubeconfig=args.kubeconfig,
        context=args.context,
        certfile=args.tls_cert,
        keyfile=args.tls_key,
        log_level=args.log_level,
    )
    return 0


def cmd_operator(args: argparse.Namespace) -> int:
    from berth.operator.run import OperatorOptions, run

    if not args.webhook_self_signed and bool(args.webhook_cert) != bool(args.webhook_key):
        raise BerthError("--webhook-cert and --webhook-key go together (or use --webhook-self-signed)")
    if not args.webhook_self_signed and not args.webhook_cert:
        raise BerthError(
            "the webhook needs TLS: give --webhook-cert and --webhook-key, or --webhook-self-signed"
        )
    options = OperatorOptions(
        namespaces=tuple(args.namespace),
        peering=None if args.standalone else args.peering,
        priority=args.priority,
        webhook_port=args.webhook_port,
        webhook_addr=args.webhook_addr,
        webhook_host=args.webhook_host,
        webhook_cert=args.webhook_cert,
        webhook_key=args.webhook_key,
        webhook_ca=args.webhook_ca,
        self_signed=args.webhook_self_signed,
        manage_webhooks=args.manage_webhooks,
        liveness=args.liveness,
    )
    run(options, kubeconfig=args.kubeconfig, context=args.context)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    problems, checked = validate_files(args.files, config=_allocator_config(args.config))
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} problem(s) in {checked} object(s)", file=sys.stderr)
        return EXIT_INVALID
    print(f"ok: {checked} object(s) checked")
    return 0


def add_kubeconfig_args(
    parser: argparse.ArgumentParser, *, namespace: bool = False, live: bool = False
) -> None:
    """--kubeconfig FILE and --context NAME (and -n/--namespace NAME), taken as kubectl takes them: the
    file, else $KUBECONFIG's files merged, else ~/.kube/config, else the pod's service account."""
    where = "with --live: " if live else ""
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help=f"{where}the kubeconfig (default: $KUBECONFIG, merged; ~/.kube/config; in a pod, its "
        "service account)",
    )
    parser.add_argument("--context", metavar="NAME", help=f"{where}the kubeconfig context (default: current)")
    if namespace:
        parser.add_argument(
            "-n",
            "--namespace",
            metavar="NAME",
            help="namespace of names and pods that have none (default: the context's namespace with --live, "
            "else default)",
        )


def _add_cluster_source(parser: argparse.ArgumentParser) -> None:
    """--cluster FILE or --live [--kubeconfig FILE --context NAME]: where the offline commands read the
    cluster."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cluster", metavar="FILE", help="snapshot: kubectl get nodes,pods -A -o yaml")
    source.add_argument(
        "--live", action="store_true", help="read the cluster through the kubeconfig, change nothing"
    )
    add_kubeconfig_args(parser, namespace=True, live=True)


def build_parser(prog: str = "berth") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Placement policies for Kubernetes.")
    parser.add_argument("--version", action="version", version=f"berth {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser(
        "simulate",
        help="where would this pod go, and why",
        description="Decide where a pod would go on a cluster snapshot, changing nothing. Exit 0 when "
        "placed, 1 when nothing fits (409), 2 when the specification is invalid (400). Several pods in "
        "the pod file are placed in order, each seeing the ones before.",
    )
    _add_cluster_source(sim)
    sim.add_argument("--pod", required=True, metavar="FILE", help="a Pod, or a workload with a pod template")
    sim.add_argument("--seed", type=int, help="make every random choice reproducible")
    sim.add_argument("--output", choices=("table", "json"), default="table")
    sim.add_argument("--detail", action="store_true", help="show the chain and what each step did")
    sim.add_argument(
        "--policy",
        action="append",
        metavar="FILE",
        help='a PlacementPolicy or a bare policy tree {"type": ...}; repeatable. Given policies govern '
        "every simulated pod, in place of the cluster's selectors and annotations",
    )
    sim.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    sim.set_defaults(func=cmd_simulate)

    cap = sub.add_parser(
        "capacity",
        help="how many more pods of this shape fit, per node and in the cluster",
        description="Count how many more pods shaped like the given pod each node, and the cluster, can "
        "still take under the capacity filters of the allocator chain and its overprovision ratios, with "
        "the resource that limits each node.",
    )
    cap.add_argument(
        "--cluster", required=True, metavar="FILE", help="snapshot: kubectl get nodes,pods -A -o yaml"
    )
    cap.add_argument("--pod", required=True, metavar="FILE", help="a Pod, or a workload with a pod template")
    cap.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    cap.add_argument("--output", choices=("table", "json"), default="table")
    cap.set_defaults(func=cmd_capacity)

    exp = sub.add_parser(
        "explain",
        help="why a pod of the cluster is where it is, or why it is Pending",
        description="Replay the decision for a pod that is in the cluster, as the cluster is now, with the "
        "pod's own seed (the one the extender used), and show every step. The pod is never its own "
        "neighbour. Exit codes as for simulate.",
    )
    exp.add_argument("pod", metavar="NAMESPACE/NAME")
    _add_cluster_source(exp)
    exp.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    exp.add_argument("--seed", type=int, help="another seed than the pod's own")
    exp.add_argument("--output", choices=("table", "json"), default="table")
    exp.set_defaults(func=cmd_explain)

    srv = sub.add_parser(
        "serve",
        help="run the scheduler extender",
        description="Serve the kube-scheduler extender verbs (POST /filter /prioritize /bind /preempt), the "
        "Placement Simulation API (POST /simulate), /healthz, /readyz and /metrics. The cluster comes from "
        "list+watch through the kubeconfig (or the pod's service account), or from a snapshot file.",
    )
    srv.add_argument("--cluster", metavar="FILE", help="serve from a snapshot file instead of a live cluster")
    add_kubeconfig_args(srv)
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    srv.add_argument("--port", type=int, default=8888)
    srv.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate")
    srv.add_argument("--tls-key", metavar="FILE")
    srv.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    srv.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    srv.set_defaults(func=cmd_serve)

    op = sub.add_parser(
        "operator",
        help="run the operator: PlacementPolicy status and admission webhooks",
        description="Compile every PlacementPolicy and write its Ready condition, observedGeneration and "
        "governed pod count; serve the admission webhooks that refuse pods, workloads and policies with "
        "invalid berth specifications (HTTPS).",
    )
    add_kubeconfig_args(op)
    op.add_argument("--namespace", action="append", default=[], help="watch only this namespace (repeatable)")
    peers = op.add_mutually_exclusive_group()
    peers.add_argument("--peering", default="berth", help="kopf peering name: several replicas, one active")
    peers.add_argument("--standalone", action="store_true", help="one replica, no peering objects")
    op.add_argument(
        "--priority",
        type=int,
        default=0,
        help="peering priority (default: drawn at random, so one replica is active)",
    )
    op.add_argument("--webhook-addr", default="0.0.0.0", help="address the webhook listens on")
    op.add_argument("--webhook-port", type=int, default=9443)
    op.add_argument("--webhook-host", help="host name the API server uses to reach the webhook")
    op.add_argument("--webhook-cert", metavar="FILE", help="serving certificate (e.g. from cert-manager)")
    op.add_argument("--webhook-key", metavar="FILE")
    op.add_argument("--webhook-ca", metavar="FILE", help="CA bundle for a managed webhook configuration")
    op.add_argument(
        "--webhook-self-signed", action="store_true", help="generate a CA and certificate (local runs)"
    )
    op.add_argument(
        "--manage-webhooks",
        action="store_true",
        help="create the ValidatingWebhookConfiguration (local runs)",
    )
    op.add_argument(
        "--liveness", metavar="URL", help="serve a liveness probe, e.g. http://0.0.0.0:8080/healthz"
    )
    op.set_defaults(func=cmd_operator)

    val = sub.add_parser(
        "validate",
        help="check berth annotations in manifests without a cluster",
        description="Check the berth annotations of pods and workloads in manifest files. Prints every "
        "problem; exit 2 when there is any.",
    )
    val.add_argument("files", nargs="+", metavar="FILE")
    val.add_argument(
        "--config", metavar="FILE", help="an allocator configuration whose packages the pods may name"
    )
    val.set_defaults(func=cmd_validate)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "berth") -> int:
    args = build_parser(prog).parse_args(argv)
    if args.command not in LONG_RUNNING and hasattr(signal, "SIGPIPE"):
        # `berth simulate ... | head` ends quietly. Never for the servers: a client that hangs up
        # mid-answer would kill them.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        return args.func(args)
    except BerthError as exc:
        lines = getattr(exc, "errors", None) or [exc.message]
        for line in lines if len(lines) > 1 else [exc.message]:
            print(f"berth: {line}", file=sys.stderr)
        return EXIT_INVALID


if __name__ == "__main__":
    sys.exit(main())
