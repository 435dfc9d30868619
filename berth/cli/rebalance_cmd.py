"""`berth rebalance`: move the running pods whose node breaks their hard rules."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from berth.analysis.rebalance import Limits
from berth.cli.options import (
    EXIT_NO_FIT,
    EXIT_PLACED,
    WHAT_IF_CONFIG,
    Formatter,
    add_cluster_source,
    add_config,
    add_policy,
    count,
    examples,
)
from berth.cli.sources import (
    allocator_config,
    apply_what_if,
    source_snapshot,
    what_if_policies,
)
from berth.configure import build_pipeline
from berth.errors import BerthError
from berth.output import add_output_args, emit, render

REBALANCE_DEFAULTS = Limits()


def add_parser(sub: Any, prog: str) -> None:
    reb = sub.add_parser(
        "rebalance",
        help="move the running pods whose node breaks their hard rules",
        description="Plan the moves that take running pods off the nodes that break their hard rules (what "
        "berth audit reports), each only when berth would place its replacement on another node, with the "
        "other moves of the round counted; print the plan, and with --apply evict the planned pods through "
        "the Eviction API, honouring PodDisruptionBudgets (the plan says which budget allows no disruption "
        "now). berth-scheduler then places each replacement on its planned node. Pods without a "
        'controller, DaemonSet, static and system pods, and pods annotated berth.dev/rebalance: "never" are '
        "not moved. As kubectl, it acts on the namespace of the kubeconfig context (of a snapshot: "
        "default) unless -n or -A says otherwise. Exit 0 when no pod breaks a rule, 1 when some do, 2 for "
        "bad input.",
        epilog=examples(
            prog,
            "rebalance --live -A",
            "rebalance --live -n shop -o json",
            "rebalance --live -n shop --apply",
            "rebalance --cluster cluster.yaml -A --policy one-per-host.yaml",
        ),
        formatter_class=Formatter,
    )
    add_cluster_source(reb, namespace=False)
    where = reb.add_mutually_exclusive_group()
    where.add_argument(
        "-n",
        "--namespace",
        action="append",
        metavar="NAME",
        help="this namespace (repeatable); default: the kubeconfig context's, as kubectl",
    )
    where.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    add_policy(
        reb,
        "what-if: PlacementPolicy objects applied over the cluster's own (repeatable)",
    )
    add_config(reb, WHAT_IF_CONFIG)
    reb.add_argument("--apply", action="store_true", help="evict the planned pods (needs --live)")
    reb.add_argument(
        "--include-bare", action="store_true", help="also evict pods that no controller will replace"
    )
    for flag, default, what in (
        ("--max", REBALANCE_DEFAULTS.per_round, "evictions per round"),
        ("--max-per-node", REBALANCE_DEFAULTS.per_node, "evictions from one node per round"),
        ("--max-per-namespace", REBALANCE_DEFAULTS.per_namespace, "evictions in one namespace per round"),
    ):
        reb.add_argument(flag, type=count, default=default, metavar="N", help=f"{what} (default {default})")
    reb.add_argument(
        "--pushgateway",
        metavar="URL",
        help="with --apply: push the eviction counters to a Prometheus Pushgateway",
    )
    reb.add_argument(
        "--exit-zero",
        action="store_true",
        help="exit 0 when pods break rules too (a CronJob's round then fails only on an error)",
    )
    add_output_args(reb, wide_help="the same as table", name_help="pod/NAME of each pod to move")
    reb.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from berth.analysis.rebalance import plan
    from berth.report import plan_table

    if args.apply and not args.live:
        raise BerthError("--apply evicts pods of a live cluster: it goes with --live")
    policies = what_if_policies(args.policy or [])  # InvalidPolicy: main says every problem
    config = allocator_config(args.config)
    snapshot = source_snapshot(args)
    namespaces = () if args.all_namespaces else (args.namespace or [snapshot.namespace])
    for warning in apply_what_if(snapshot, policies, namespaces):
        print(f"berth: warning: {warning}", file=sys.stderr)
    limits = Limits(per_node=args.max_per_node, per_namespace=args.max_per_namespace, per_round=args.max)
    found = plan(
        snapshot.view,
        build_pipeline(config, kube_filters=False),
        build_pipeline(config, kube_filters=True),
        namespaces=namespaces,
        limits=limits,
        include_bare=args.include_bare,
    )
    outcomes = asyncio.run(_evict(args, found.moves)) if args.apply and found.moves else []

    def body() -> dict[str, Any]:
        out = found.to_dict() | {"applied": args.apply}
        return out | ({"evictions": [o.to_dict() for o in outcomes]} if args.apply else {})

    emit(
        render(
            args,
            body=body,
            table=lambda wide, headers: plan_table(found, applied=args.apply, outcomes=outcomes),
            names=lambda: [f"pod/{m.pod.partition('/')[2]}" for m in found.moves],
        )
    )
    return EXIT_PLACED if found.clean or args.exit_zero else EXIT_NO_FIT


async def _evict(args: argparse.Namespace, moves: list[Any]) -> list[Any]:
    from berth.cluster.kubeapi import KubeClient, load_credentials
    from berth.evict import evict, push_metrics

    client = KubeClient(load_credentials(args.kubeconfig, args.context))
    try:
        outcomes = await evict(client, moves)
    finally:
        await client.aclose()
    if args.pushgateway:
        push_metrics(args.pushgateway)
    return outcomes
