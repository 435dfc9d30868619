"""`berth rebalance`: the subcommand (berth.rebalance plans, berth.evict carries the plan out)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from berth.rebalance import Limits, Plan, plan

DEFAULTS = Limits()
EXAMPLES = """examples:
  berth rebalance --live -A                         # the plan for every namespace; evicts nothing
  berth rebalance --live -n shop --output json      # the same, for one namespace, as JSON
  berth rebalance --live -n shop --apply            # evict the planned pods (PodDisruptionBudgets hold)
  berth rebalance --cluster cluster.yaml --policy one-per-host.yaml   # what a new policy would move
"""


def add_parser(sub: Any) -> None:
    from berth.cli import CONFIG_HELP, _add_cluster_source

    reb = sub.add_parser(
        "rebalance",
        help="move the running pods whose node breaks their hard rules",
        description="Plan the moves that take running pods off the nodes that break their hard rules (what "
        "berth audit reports), each only when berth would place its replacement on another node, with the "
        "other moves of the round counted; print the plan, and with --apply evict the planned pods through "
        "the Eviction API, honouring PodDisruptionBudgets. berth-scheduler then places each replacement on "
        "its planned node. Pods without a controller, DaemonSet, static and system pods, and pods "
        'annotated berth.dev/rebalance: "never" are not moved. Exit 0 when no pod breaks a rule, 1 when '
        "some do, 2 for bad input.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_cluster_source(reb, namespace=False)
    where = reb.add_mutually_exclusive_group()
    where.add_argument(
        "-n", "--namespace", action="append", metavar="NAME", help="only this namespace (repeatable)"
    )
    where.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace (the default)")
    reb.add_argument(
        "--policy",
        action="append",
        metavar="FILE",
        help="what-if: PlacementPolicy objects applied over the cluster's own (repeatable)",
    )
    reb.add_argument("--config", metavar="FILE", help=CONFIG_HELP + "; the what-if of another one")
    reb.add_argument("--apply", action="store_true", help="evict the planned pods (needs --live)")
    reb.add_argument(
        "--include-bare", action="store_true", help="also evict pods that no controller will replace"
    )
    reb.add_argument("--max", type=int, default=DEFAULTS.per_round, metavar="N", help="evictions per round")
    reb.add_argument(
        "--max-per-node",
        type=int,
        default=DEFAULTS.per_node,
        metavar="N",
        help="evictions from one node per round",
    )
    reb.add_argument(
        "--max-per-namespace",
        type=int,
        default=DEFAULTS.per_namespace,
        metavar="N",
        help="evictions in one namespace per round",
    )
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
    reb.add_argument("-o", "--output", choices=("table", "json"), default="table")
    reb.set_defaults(func=cmd_rebalance)


def cmd_rebalance(args: argparse.Namespace) -> int:
    from berth.cli import (
        EXIT_INVALID,
        EXIT_NO_FIT,
        EXIT_PLACED,
        _allocator_config,
        _source_snapshot,
        _what_if_policies,
    )
    from berth.errors import BerthError, InvalidPolicy
    from berth.pipeline import build_pipeline

    if args.apply and not args.live:
        raise BerthError("--apply evicts pods of a live cluster: it goes with --live")
    for flag in ("max", "max_per_node", "max_per_namespace"):
        if getattr(args, flag) < 0:
            raise BerthError(f"--{flag.replace('_', '-')}: must be 0 or more")
    try:
        policies = _what_if_policies(args.policy or [])
    except InvalidPolicy as exc:
        for line in exc.errors or [exc.message]:
            print(f"berth: {line}", file=sys.stderr)
        return EXIT_INVALID
    config = _allocator_config(args.config)
    snapshot = _source_snapshot(args)
    for obj in policies:
        snapshot.view.upsert_policy(obj)
    limits = Limits(per_node=args.max_per_node, per_namespace=args.max_per_namespace, per_round=args.max)
    found = plan(
        snapshot.view,
        build_pipeline(config, offline=False),
        build_pipeline(config, offline=True),
        namespaces=args.namespace or (),
        limits=limits,
        include_bare=args.include_bare,
    )
    outcomes = asyncio.run(_apply(args, found)) if args.apply and found.moves else []
    if args.output == "json":
        out = found.to_dict() | {"applied": args.apply}
        if args.apply:
            out["evictions"] = [o.to_dict() for o in outcomes]
        print(json.dumps(out, indent=2))
    else:
        print(plan_table(found, applied=args.apply, outcomes=outcomes))
    return EXIT_PLACED if found.clean or args.exit_zero else EXIT_NO_FIT


async def _apply(args: argparse.Namespace, found: Plan) -> list[Any]:
    from berth.cluster.kubeapi import KubeClient, load_credentials
    from berth.evict import evict, push_metrics

    client = KubeClient(load_credentials(args.kubeconfig, args.context))
    try:
        outcomes = await evict(client, found.moves)
    finally:
        await client.aclose()
    if args.pushgateway:
        push_metrics(args.pushgateway)
    return outcomes


def plan_table(found: Plan, *, applied: bool, outcomes: list[Any]) -> str:
    """The plan for people, like Nomad's `job plan`: the moves, then the pods left in place and why."""
    if found.clean:
        return f"clean: {found.checked} pod(s) checked, no node breaks a pod's hard rule"
    lines = [
        f"{len(found.moves)} to move, {len(found.kept)} left in place ({found.checked} pod(s) checked)"
        + ("" if applied else "; dry run: --apply evicts")
    ]
    done = {o.move.pod: o for o in outcomes}
    if found.moves:
        lines += ["", "MOVES"]
        for m in found.moves:
            outcome = done.get(m.pod)
            status = (
                f"  [{outcome.outcome}{': ' + outcome.detail if outcome.detail else ''}]" if outcome else ""
            )
            lines.append(f"  ~ {m.pod}: {m.node} -> {m.target}{status}")
            lines += [f"      {reason}" for reason in m.reasons]
    if found.kept:
        lines += ["", "LEFT IN PLACE"]
        for k in found.kept:
            rules = f" ({', '.join(k.rules)})" if k.rules else ""
            lines.append(f"  = {k.pod} on {k.node}{rules}: {k.why}")
    return "\n".join(lines)
