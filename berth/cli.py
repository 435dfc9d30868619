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
from berth.cluster.convert import pod_from_k8s, pod_template, replica_owner, replica_pods, replicas_of
from berth.cluster.model import Pod
from berth.cluster.snapshot import Snapshot, load_snapshot, read_documents
from berth.engine.decide import decide
from berth.engine.types import Decision
from berth.errors import BerthError, InvalidPolicy
from berth.pipeline import build_pipeline
from berth.report import replica_summary, summary_table, table
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


def _replicas_in(
    path: str,
    replicas: int | None,
    namespace: str | None = None,
    default: str = "default",
    owners: list[dict[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """The pods to simulate: a workload's `replicas` (a Job's parallelism) named <name>-0, -1, ...,
    `replicas` copies of each object when given, else a Pod once; and whether any object was
    expanded (the table then ends with a summary). Objects without a namespace are in `namespace`
    (-n, which the file must agree with, as for `kubectl apply -n`), else in `default`. The controllers
    that own the replicas are added to `owners` (kube's default spreading reads them)."""
    if replicas is not None and replicas < 1:
        raise BerthError(f"--replicas should be at least 1, found {replicas}")
    pods: list[dict[str, Any]] = []
    expanded = replicas is not None
    for obj in (_in_namespace(o, namespace, default, path) for o in read_documents(path)):
        if pod_template(obj) is None:
            continue
        count = replicas if replicas is not None else replicas_of(obj)
        if count is None or (count == 1 and replicas is None):
            pods.append(pod_template(obj))  # type: ignore[arg-type]
        else:
            pods += replica_pods(obj, count)
            expanded = True
            owner = replica_owner(obj)
            if owner is not None and owners is not None:
                owners.append(owner)
    if not pods and not expanded:
        raise BerthError(f"{path}: no Pod or workload with a pod template found")
    return pods, expanded


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
    owners: list[dict[str, Any]] = []
    raws, expanded = _replicas_in(args.pod, args.replicas, args.namespace, snapshot.namespace, owners)
    for owner in owners:  # the replicas' controller, for kube's default spreading over them
        snapshot.view.upsert_workload(owner)
    for i, raw in enumerate(raws):
        pod = pod_from_k8s(raw)
        if expanded:
            # A replica stands in for a running pod of its name, as a StatefulSet's recreated pod does:
            # the old one is no neighbour of it or of the replicas after it.
            snapshot.view.remove_pod(pod.key)
        seed = None if args.seed is None else args.seed + i
        decision = decide(pod, snapshot.view, pipeline, seed=seed)
        decisions.append(decision)
        if decision.chosen:
            # Later pods in the same file see this one where it was placed (a burst).
            snapshot.view.add_pod(_placed(pod, decision.chosen))
    summary = replica_summary(decisions) if expanded else None
    if args.output == "json":
        body: Any = (
            decisions[0].to_dict(detail=args.detail)
            if len(decisions) == 1 and summary is None
            else {"decisions": [d.to_dict(detail=args.detail) for d in decisions]}
        )
        if summary is not None:
            body["summary"] = summary.to_dict()
        print(json.dumps(body, indent=2))
    else:
        parts = [table(d, detail=args.detail) for d in decisions]
        if summary is not None:
            parts.append(summary_table(summary))
        print("\n\n".join(parts))
    return _exit_code(decisions)


def cmd_audit(args: argparse.Namespace) -> int:
    from berth.audit import audit
    from berth.report import audit_table

    try:
        policies = _what_if_policies(args.policy or [])
    except InvalidPolicy as exc:
        for line in exc.errors or [exc.message]:
            print(f"berth: {line}", file=sys.stderr)
        return EXIT_INVALID
    config = _allocator_config(args.config)
    snapshot = _source_snapshot(args)
    for obj in policies:
        # As `kubectl apply` would: added to its namespace, or in place of the policy of that name.
        snapshot.view.upsert_policy(obj)
    report = audit(snapshot.view, build_pipeline(config, offline=False), namespaces=args.namespace or ())
    if args.output == "json":
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(audit_table(report))
    return EXIT_PLACED if report.clean else EXIT_NO_FIT


def _what_if_policies(paths: Sequence[str]) -> list[dict[str, Any]]:
    """The PlacementPolicy objects of the files, checked; a bare policy tree has no namespace or
    selector to apply it with, so it is refused here."""
    load_policy_files(paths)  # every problem of every invalid policy, or nothing
    objects = []
    for path in paths:
        for obj in read_documents(path):
            if obj.get("kind") != "PlacementPolicy":
                raise InvalidPolicy(
                    f"{path}: a {obj.get('kind') or 'bare policy tree'} is not a PlacementPolicy object: "
                    "the what-if applies PlacementPolicy objects (metadata.namespace, spec.selector)",
                    field="policy",
                )
            objects.append(obj)
    return objects


def cmd_explain(args: argparse.Namespace) -> int:
    from berth.extender.placer import seed_for

    snapshot = _source_snapshot(args)
    key = args.pod if "/" in args.pod else f"{args.namespace or snapshot.namespace}/{args.pod}"
    pod = snapshot.view.pod(key)
    if pod is None:
        raise BerthError(f"no pod {key} in the cluster (terminal pods are not kept)")
    record = _record(pod)
    if args.seed is not None:
        seed = args.seed
    elif isinstance(record.get("seed"), int):
        seed = record["seed"]
    else:
        seed = seed_for(pod)
    config = _allocator_config(args.config)
    decision = decide(pod, snapshot.view, build_pipeline(config, offline=True), seed=seed)
    where = f"is on {pod.node_name}" if pod.node_name else "is not placed"
    if decision.chosen and pod.node_name:
        verdict = "the same node" if decision.chosen == pod.node_name else f"{decision.chosen}, another node"
        summary = f"{key} {where}; berth, asked now with the pod's own seed {seed}, chooses {verdict}"
    else:
        answer = decision.error.message if decision.error else f"would place it on {decision.chosen}"
        summary = f"{key} {where}; berth, asked now: {answer}"
    differs = _replay_differs(record, decision, build_pipeline(config, offline=False).digest)
    if args.output == "json":
        out: dict[str, Any] = {
            "pod": key,
            "node": pod.node_name or None,
            "decision": decision.to_dict(detail=True),
        }
        if record:
            out["record"] = record
            out["replayDiffers"] = differs
        print(json.dumps(out, indent=2))
    else:
        print(summary)
        if record:
            print(f"recorded at binding: {_record_line(record)}")
            print(
                "the replay now differs: " + "; ".join(differs)
                if differs
                else "the replay agrees with the record"
            )
        print()
        print(table(decision, detail=True))
    return _exit_code([decision])


def _record(pod: Pod) -> dict[str, Any]:
    """The berth.dev/placement record on a pod ({} when it has none or it cannot be read)."""
    if not pod.record:
        return {}
    try:
        record = json.loads(pod.record)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _record_line(record: dict[str, Any]) -> str:
    parts = [f"node {record.get('node')}"]
    if "score" in record:
        parts.append(f"score {record['score']}")
    if "margin" in record:
        parts.append(f"margin {record['margin']}")
    if record.get("top"):
        parts.append("top " + ", ".join(f"{n} ({s})" for n, s in record["top"]))
    if "feasible" in record:
        parts.append(f"{record['feasible']} feasible")
    if record.get("noChoice"):
        parts.append("had no choice")
    parts.append(f"seed {record.get('seed')}, chain {record.get('chain')}")
    return "; ".join(parts)


def _replay_differs(record: dict[str, Any], decision: Decision, digest: str) -> list[str]:
    """What the replay says that the record at binding did not."""
    if not record:
        return []
    out = []
    if record.get("node") != decision.chosen:
        now = decision.chosen or "no node"
        out.append(f"it chooses {now}, the record says {record.get('node')}")
    if record.get("chain") and record.get("chain") != digest:
        out.append(f"the chain or configuration changed (digest {digest}, recorded {record.get('chain')})")
    return out


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
    from berth.capacity import capacity
    from berth.report import capacity_table

    policies = load_policy_files(args.policy) if args.policy else None  # InvalidPolicy: main says it
    if args.max < 1:
        raise BerthError(f"--max should be at least 1, found {args.max}")
    pipeline = build_pipeline(_allocator_config(args.config), offline=True)
    snapshot = _source_snapshot(args)
    if policies is not None:
        snapshot.view.override_policies(policies)
    reports = []
    for raw in _pods_in(args.pod, args.namespace, snapshot.namespace):
        # Each shape counted on the cluster as it is: a fresh view per pod of the file.
        view = snapshot.view if not reports else _source_snapshot(args).view
        if policies is not None:
            view.override_policies(policies)
        reports.append(capacity(pod_from_k8s(raw), view, pipeline, limit=args.max))
    if args.output == "json":
        body: Any = reports[0].to_dict() if len(reports) == 1 else {"pods": [r.to_dict() for r in reports]}
        print(json.dumps(body, indent=2))
    else:
        print("\n\n".join(capacity_table(r) for r in reports))
    return EXIT_INVALID if any(r.invalid for r in reports) else 0


def load_live_snapshot(kubeconfig: str | None, context: str | None = None) -> Snapshot:
    """The cluster now, through the kubeconfig and context as kubectl would read them; names without
    a namespace are in the context's namespace."""
    from berth.cluster.kubeapi import load_credentials
    from berth.cluster.live import fetch_snapshot

    creds = load_credentials(kubeconfig, context)  # a bad kubeconfig or plugin fails here, in one line
    snapshot = asyncio.run(fetch_snapshot(creds))
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
    from berth.extender.serve import MetricsPort, serve

    if bool(args.tls_cert) != bool(args.tls_key):
        raise BerthError("--tls-cert and --tls-key go together")
    if args.follow_lease is not None:
        namespace, _, name = args.follow_lease.partition("/")
        if not namespace or not name:
            raise BerthError(f"--follow-lease should be NAMESPACE/NAME, found {args.follow_lease!r}")
        if args.cluster:
            raise BerthError("--follow-lease goes with a live cluster, not --cluster")
    if bool(args.metrics_cert) != bool(args.metrics_key):
        raise BerthError("--metrics-cert and --metrics-key go together")
    if args.metrics_port and args.metrics_auth == "delegated" and args.cluster:
        raise BerthError(
            "--metrics-auth delegated asks the API server who may scrape: with --cluster, use none"
        )
    config = _allocator_config(args.config)
    metrics = None
    if args.metrics_port:
        metrics = MetricsPort(
            args.metrics_port, args.metrics_host, args.metrics_auth, args.metrics_cert, args.metrics_key
        )
    serve(
        metrics=metrics,
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
        reservation_seconds=args.reservation_seconds,
        placement_events=_placement_events(args.placement_events),
        follow_lease=args.follow_lease,
        identity=args.identity,
    )
    return 0


def _placement_events(value: str) -> tuple[str, ...]:
    from berth.extender.placer import PLACEMENT_EVENTS

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
    warnings: list[str] = []
    problems, checked = validate_files(args.files, config=_allocator_config(args.config), warnings=warnings)
    for line in warnings:
        print(f"warning: {line}")
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


def _add_cluster_source(parser: argparse.ArgumentParser, *, namespace: bool = True) -> None:
    """--cluster FILE or --live [--kubeconfig FILE --context NAME]: where the offline commands read the
    cluster."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cluster", metavar="FILE", help="snapshot: kubectl get nodes,pods -A -o yaml")
    source.add_argument(
        "--live", action="store_true", help="read the cluster through the kubeconfig, change nothing"
    )
    add_kubeconfig_args(parser, namespace=namespace, live=True)


def build_parser(prog: str = "berth") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Placement policies for Kubernetes.")
    parser.add_argument("--version", action="version", version=f"berth {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser(
        "simulate",
        help="where would this pod go, and why",
        description="Decide where a pod would go on a cluster snapshot, changing nothing. Exit 0 when "
        "placed, 1 when nothing fits (409) for any pod, 2 when the specification is invalid (400). Several "
        "pods in the pod file are placed in order, each seeing the ones before; a Deployment, ReplicaSet "
        "or StatefulSet places its replicas (a Job its parallelism) that way, as kube-scheduler would "
        "take them, and the table ends with a summary.",
    )
    _add_cluster_source(sim)
    sim.add_argument("--pod", required=True, metavar="FILE", help="a Pod, or a workload with a pod template")
    sim.add_argument(
        "--replicas",
        type=int,
        metavar="N",
        help="place N pods of each object (default: a workload's spec.replicas, a Job's parallelism)",
    )
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
        description="Count how many more pods shaped like the given pod fit by placing them one after "
        "another, as simulate would, until one is refused: N more fit means simulate places N and refuses "
        "the next. Per node: how many went there, and why it refused the next one. Changes nothing.",
    )
    _add_cluster_source(cap)
    cap.add_argument("--pod", required=True, metavar="FILE", help="a Pod, or a workload with a pod template")
    cap.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    cap.add_argument(
        "--policy",
        action="append",
        metavar="FILE",
        help="what-if: policies that govern the counted pods, as for simulate (repeatable)",
    )
    cap.add_argument(
        "--max", type=int, default=10_000, metavar="N", help="stop counting at N pods (default 10000)"
    )
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

    aud = sub.add_parser(
        "audit",
        help="which running pods break their rules now, or would after a change",
        description="Evaluate every bound pod that carries berth rules or is governed by a PlacementPolicy "
        "against the cluster as it is now, through the same engine (the pod is never its own neighbour): "
        "hard rules its node breaks, pods no node would take at their next reschedule, deprecated "
        "weighted affinity, invalid specifications. With --policy and --config, as if those policies or "
        "that allocator configuration were in force. Reads the cluster, changes nothing. Exit 0 when "
        "clean, 1 when anything is found, 2 for bad input.",
    )
    _add_cluster_source(aud, namespace=False)  # audit's -n takes several namespaces
    aud.add_argument(
        "--policy",
        action="append",
        metavar="FILE",
        help="what-if: PlacementPolicy objects applied over the cluster's own, as kubectl apply would "
        "(repeatable)",
    )
    aud.add_argument("--config", metavar="FILE", help=CONFIG_HELP + "; the what-if of another one")
    aud.add_argument(
        "-n", "--namespace", action="append", metavar="NAME", help="audit only this namespace (repeatable)"
    )
    aud.add_argument("--output", choices=("table", "json"), default="table")
    aud.set_defaults(func=cmd_audit)

    srv = sub.add_parser(
        "serve",
        help="run the scheduler extender",
        description="Serve the kube-scheduler extender verbs (POST /filter /prioritize /bind /preempt), the "
        "Placement Simulation API (POST /simulate), /healthz, /readyz and /metrics. The cluster comes from "
        "list+watch through the kubeconfig (or the pod's service account), or from a snapshot file.",
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
    srv.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
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
        "it (after listing the cluster again when it takes it) and bind is refused once it no longer does",
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
