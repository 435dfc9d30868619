"""`berth explain`: why a pod of the cluster is where it is, or why it is Pending."""

from __future__ import annotations

import argparse
from typing import Any

from berth.cli.options import (
    add_cluster_source,
    add_config,
    examples,
)
from berth.cli.sources import (
    allocator_config,
    exit_code,
    find_pod,
    source_snapshot,
)
from berth.cluster import placement_record
from berth.configure import build_pipeline
from berth.engine.decide import decide
from berth.engine.decision import Decision
from berth.output import add_output_args, emit, render
from berth.report import table


def add_parser(sub: Any, prog: str) -> None:
    exp = sub.add_parser(
        "explain",
        help="why a pod of the cluster is where it is, or why it is Pending",
        description="Replay the decision for a pod that is in the cluster, as the cluster is now, with the "
        "pod's own seed (the one the extender used): the verdict, the record written at binding and the "
        "table of nodes; --detail adds the steps that acted. The pod is never its own neighbour. Exit "
        "codes as for simulate.",
        epilog=examples(
            prog,
            "explain shop/web-1 --live",
            "explain shop/web-1 --live --detail",
            "explain web-1 -A --live -o json",
            "explain web-1 -n shop --cluster c.yaml",
        ),
    )
    exp.add_argument("pod", metavar="[NAMESPACE/]NAME")
    add_cluster_source(exp, all_namespaces=True)
    add_config(exp)
    exp.add_argument("--seed", type=int, help="another seed than the pod's own")
    exp.add_argument("--detail", action="store_true", help="show the steps that removed or scored nodes")
    add_output_args(exp, wide_help="the table with --detail", name_help="node/NAME berth chooses now")
    exp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    snapshot = source_snapshot(args)
    pod = find_pod(snapshot, args.pod, args.namespace, args.all_namespaces)
    key = pod.key
    record = placement_record.read(pod)
    if args.seed is not None:
        seed = args.seed
    elif isinstance(record.get("seed"), int):
        seed = record["seed"]
    else:
        seed = placement_record.seed_for(pod)
    config = allocator_config(args.config)
    decision = decide(pod, snapshot.view, build_pipeline(config, kube_filters=True), seed=seed)
    where = f"is on {pod.node_name}" if pod.node_name else "is not placed"
    if decision.chosen and pod.node_name:
        verdict = "the same node" if decision.chosen == pod.node_name else f"{decision.chosen}, another node"
        summary = f"{key} {where}; berth, asked now with the pod's own seed {seed}, chooses {verdict}"
    elif decision.error:  # the table's first line says why, with the code: once
        answer = "finds its specification invalid" if decision.error.code == 400 else "places it on no node"
        summary = f"{key} {where}; berth, asked now, {answer} (below)"
    else:
        summary = f"{key} {where}; berth, asked now, would place it on {decision.chosen}"
    differs = _replay_differs(record, decision, build_pipeline(config, kube_filters=False).digest)

    def body() -> dict[str, Any]:
        out: dict[str, Any] = {
            "pod": key,
            "node": pod.node_name or None,
            "decision": decision.to_dict(detail=True),
        }
        if record:
            out["record"] = record
            out["replayDiffers"] = differs
        return out

    def people(wide: bool, headers: bool) -> str:
        lines = [summary]
        if record:
            lines.append(f"recorded at binding: {_record_line(record)}")
            lines.append(
                "the replay now differs: " + "; ".join(differs)
                if differs
                else "the replay agrees with the record"
            )
        return "\n".join([*lines, "", table(decision, detail=args.detail or wide, headers=headers)])

    emit(
        render(
            args,
            body=body,
            table=people,
            names=lambda: [f"node/{decision.chosen}"] if decision.chosen else [],
        )
    )
    return exit_code([decision])


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
    if isinstance(record.get("setAside"), dict) and record["setAside"]:
        shown = ", ".join(f"{n} by {step}" for step, n in record["setAside"].items())
        parts.append(f"set aside: {shown}")
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
