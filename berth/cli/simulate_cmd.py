"""`berth simulate`: where would this pod go, and why."""

from __future__ import annotations

import argparse
from typing import Any

from berth.analysis.preemption import preemption_events
from berth.analysis.simulate_diff import changes
from berth.cli.options import (
    add_cluster_source,
    add_config,
    add_pod,
    add_policy,
    examples,
)
from berth.cli.sources import (
    allocator_config,
    exit_code,
    one_stdin,
    placed_copy,
    pod_of,
    replicas_in,
    source_snapshot,
)
from berth.cluster.model import Pod
from berth.cluster.snapshot import Snapshot
from berth.configure import build_pipeline
from berth.engine.decide import decide
from berth.engine.decision import Decision
from berth.errors import BerthError
from berth.output import add_output_args, emit, render
from berth.report import diff_table, replica_summary, summary_table, table
from berth.vocab.alloc.config import AllocatorConfig
from berth.vocab.policy.files import load_policy_files


def add_parser(sub: Any, prog: str) -> None:
    sim = sub.add_parser(
        "simulate",
        help="where would this pod go, and why",
        description="Decide where a pod would go on a cluster snapshot, changing nothing. Exit 0 when "
        "placed, 1 when nothing fits (409) for any pod, 2 when the specification is invalid (400). Several "
        "pods in the pod file are placed in order, each seeing the ones before; a Deployment, ReplicaSet "
        "or StatefulSet places its replicas (a Job its parallelism) that way, as kube-scheduler would "
        "take them, and the table ends with a summary.",
        epilog=examples(
            prog,
            "simulate --cluster cluster.yaml --pod web.yaml",
            "simulate --live -n shop --pod web.yaml -o wide",
            "simulate --cluster cluster.yaml --pod api.yaml --replicas 200 --summary",
            "simulate --live --pod api.yaml --policy one-per-host.yaml --diff",
            "kubectl get nodes,pods -A -o yaml | berth simulate --cluster - --pod web.yaml",
        ),
    )
    add_cluster_source(sim)
    add_pod(sim)
    sim.add_argument(
        "--replicas",
        type=int,
        metavar="N",
        help="place N pods of each object (default: a workload's spec.replicas, a Job's parallelism)",
    )
    sim.add_argument("--seed", type=int, help="make every random choice reproducible")
    add_output_args(sim, wide_help="the table with --detail", name_help="node/NAME of each placed pod")
    sim.add_argument("--detail", action="store_true", help="show the chain and what each step did")
    sim.add_argument(
        "--summary",
        action="store_true",
        help="only how many pods went to each node and how many were placed and refused, not one table "
        "per pod (for workloads, --replicas N)",
    )
    sim.add_argument(
        "--diff",
        action="store_true",
        help="with --policy or --config: only the pods whose node or verdict the what-if changes, before "
        "and after, and why (both sides with the same seeds: --seed, else 0)",
    )
    add_policy(
        sim,
        'a PlacementPolicy or a bare policy tree {"type": ...}; repeatable. Given policies govern '
        "every simulated pod, in place of the cluster's selectors and annotations",
    )
    add_config(sim)
    sim.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    one_stdin(args.cluster, args.pod, *(args.policy or ()), args.config)
    if args.summary and args.diff:
        raise BerthError("--summary and --diff go separately: the diff is per pod, the summary per node")
    policies = load_policy_files(args.policy) if args.policy else None  # InvalidPolicy: main says it
    config = allocator_config(args.config)
    if args.diff:
        if policies is None and config is None:
            raise BerthError("--diff compares a what-if with the cluster as it is: give --policy or --config")
        # The same seeds on both sides, so that only the what-if can tell them apart.
        seed = 0 if args.seed is None else args.seed
        snapshot = source_snapshot(args)  # read once: a live cluster could change between two reads
        before, _ = _simulate(args, snapshot, None, None, seed, restore=True)
        after, _ = _simulate(args, snapshot, policies, config, seed)
        found = changes(before, after)
        emit(
            render(
                args,
                body=lambda: {"pods": len(after), "changes": [c.to_dict() for c in found]},
                table=lambda wide, headers: diff_table(found, len(after), headers=headers),
                names=lambda: [f"pod/{c.pod.partition('/')[2]}" for c in found],
            )
        )
        return exit_code(after)
    decisions, expanded = _simulate(args, source_snapshot(args), policies, config, args.seed)
    summary = replica_summary(decisions) if expanded or args.summary else None

    def body() -> Any:
        if args.summary and summary is not None:
            return {"summary": summary.to_dict()}
        if len(decisions) == 1 and summary is None:
            return decisions[0].to_dict(detail=args.detail)
        out: dict[str, Any] = {"decisions": [d.to_dict(detail=args.detail) for d in decisions]}
        if summary is not None:
            out["summary"] = summary.to_dict()
        return out

    def people(wide: bool, headers: bool) -> str:
        if args.summary and summary is not None:
            return summary_table(summary, per_node=True, headers=headers)
        parts = [table(d, detail=args.detail or wide, headers=headers) for d in decisions]
        if summary is not None:
            parts.append(summary_table(summary))
        return "\n\n".join(parts)

    emit(
        render(
            args, body=body, table=people, names=lambda: [f"node/{d.chosen}" for d in decisions if d.chosen]
        )
    )
    return exit_code(decisions)


def _simulate(
    args: argparse.Namespace,
    snapshot: Snapshot,
    policies: list[Any] | None,
    config: AllocatorConfig | None,
    seed: int | None,
    *,
    restore: bool = False,
) -> tuple[list[Decision], bool]:
    """The pods of --pod placed in order on the snapshot, each seeing the ones before; and whether a
    workload was expanded into replicas. With `restore`, the snapshot is left as it was found."""
    if policies is not None:
        # Like Drove's simulate-placement --placement-policy: these govern every simulated pod.
        snapshot.view.override_policies(policies)
    pipeline = build_pipeline(config, kube_filters=True)
    decisions = []
    owners: list[dict[str, Any]] = []
    raws, expanded = replicas_in(args.pod, args.replicas, args.namespace, snapshot.namespace, owners)
    for owner in owners:  # the replicas' controller, for kube's default spreading over them
        snapshot.view.upsert_workload(owner)
    placed: list[Pod] = []
    replaced: list[Pod] = []
    try:
        for i, raw in enumerate(raws):
            pod = pod_of(raw, args.pod)
            if expanded:
                # A replica stands in for a running pod of its name, as a StatefulSet's recreated pod
                # does: the old one is no neighbour of it or of the replicas after it.
                old = snapshot.view.remove_pod(pod.key)
                if old is not None:
                    replaced.append(old)
            decision = decide(pod, snapshot.view, pipeline, seed=None if seed is None else seed + i)
            if decision.error is not None and decision.error.code == 409:
                # A pod that fits only by evicting lower-priority pods: where, and whom (exit code kept).
                more = preemption_events(pod, decision, snapshot.view, pipeline, detail=args.detail)
                decision.events = (*decision.events, *more)
            decisions.append(decision)
            if decision.chosen:
                # Later pods in the same file see this one where it was placed (a burst).
                placed.append(placed_copy(pod, decision.chosen))
                snapshot.view.add_pod(placed[-1])
    finally:
        if restore:
            for pod in placed:
                snapshot.view.remove_pod(pod.key)
            for pod in replaced:
                snapshot.view.add_pod(pod)
            if policies is not None:
                snapshot.view.override_policies(None)
    return decisions, expanded
