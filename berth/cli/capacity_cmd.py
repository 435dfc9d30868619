"""`berth capacity`: how many more pods of a shape fit, or the room left per node and zone."""

from __future__ import annotations

import argparse
from typing import Any

from berth.cli.options import (
    EXIT_INVALID,
    add_cluster_source,
    add_config,
    add_pod,
    add_policy,
    examples,
)
from berth.cli.sources import (
    allocator_config,
    one_stdin,
    pod_of,
    pods_in,
    source_snapshot,
)
from berth.configure import build_pipeline
from berth.errors import BerthError
from berth.output import add_output_args, emit, render
from berth.vocab.policy.files import load_policy_files


def add_parser(sub: Any, prog: str) -> None:
    cap = sub.add_parser(
        "capacity",
        help="how many more pods of this shape fit, per node and in the cluster",
        description="Count how many more pods shaped like the given pod fit by placing them one after "
        "another, as simulate would, until one is refused: N more fit means simulate places N and refuses "
        "the next. Per node: how many went there, and why it refused the next one. Changes nothing.",
        epilog=examples(
            prog,
            "capacity --cluster cluster.yaml --pod app-1.yaml",
            "capacity --live -n shop --pod app-1.yaml --max 500 -o json",
        ),
    )
    add_cluster_source(cap)
    add_pod(
        cap,
        required=False,
        help="a Pod, or a workload with a pod template (- reads stdin); without it, the room left per "
        "node and per zone (CPU, memory, pods)",
    )
    add_config(cap)
    add_policy(
        cap,
        "what-if: policies that govern the counted pods, as for simulate (repeatable)",
    )
    cap.add_argument(
        "--max", type=int, default=10_000, metavar="N", help="stop counting at N pods (default 10000)"
    )
    add_output_args(
        cap,
        wide_help="and the decision that refuses the next pod",
        name_help="node/NAME of each node that fits one",
    )
    cap.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from berth.analysis.room import capacity
    from berth.report import capacity_table

    if args.pod is None:
        return _room_left(args)
    one_stdin(args.cluster, args.pod, *(args.policy or ()), args.config)
    policies = load_policy_files(args.policy) if args.policy else None  # InvalidPolicy: main says it
    if args.max < 1:
        raise BerthError(f"--max should be at least 1, found {args.max}")
    pipeline = build_pipeline(allocator_config(args.config), kube_filters=True)
    snapshot = source_snapshot(args)
    if policies is not None:
        snapshot.view.override_policies(policies)
    reports = []
    for raw in pods_in(args.pod, args.namespace, snapshot.namespace):
        # Each shape counted on the cluster as it is: a fresh view per pod of the file.
        view = snapshot.view if not reports else source_snapshot(args).view
        if policies is not None:
            view.override_policies(policies)
        reports.append(capacity(pod_of(raw, args.pod), view, pipeline, limit=args.max))
    emit(
        render(
            args,
            body=lambda: (
                reports[0].to_dict() if len(reports) == 1 else {"pods": [r.to_dict() for r in reports]}
            ),
            table=lambda wide, headers: "\n\n".join(
                capacity_table(r, wide=wide, headers=headers) for r in reports
            ),
            names=lambda: list(dict.fromkeys(f"node/{n.name}" for r in reports for n in r.nodes if n.fits)),
        )
    )
    return EXIT_INVALID if any(r.invalid for r in reports) else 0


def _room_left(args: argparse.Namespace) -> int:
    """berth capacity without --pod: the room each node and zone has left (no shape to count)."""
    from berth.analysis.room import room_left
    from berth.report import room_table

    if args.policy or args.config:
        raise BerthError("--policy and --config count pods of a shape: they go with --pod")
    found = room_left(source_snapshot(args).view)
    emit(
        render(
            args,
            body=found.to_dict,
            table=lambda wide, headers: room_table(found, headers=headers),
            names=lambda: [f"node/{n.name}" for n in found.nodes if n.takes_pods and n.pods],
        )
    )
    return 0
