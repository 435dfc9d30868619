"""`berth audit`: which running pods break their rules now, or would after a change."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from berth.cli.options import (
    EXIT_NO_FIT,
    EXIT_PLACED,
    WHAT_IF_CONFIG,
    add_cluster_source,
    add_config,
    add_policy,
    examples,
)
from berth.cli.sources import (
    allocator_config,
    apply_what_if,
    one_stdin,
    source_snapshot,
    what_if_policies,
)
from berth.configure import build_pipeline
from berth.errors import BerthError
from berth.output import add_output_args, emit, render


def add_parser(sub: Any, prog: str) -> None:
    aud = sub.add_parser(
        "audit",
        help="which running pods break their rules now, or would after a change",
        description="Evaluate every bound pod that carries berth rules or is governed by a PlacementPolicy "
        "against the cluster as it is now, through the same engine (the pod is never its own neighbour): "
        "hard rules its node breaks, pods no node would take at their next reschedule, deprecated "
        "weighted affinity, invalid specifications. With --policy and --config, as if those policies or "
        "that allocator configuration were in force. Reads the cluster, changes nothing. Exit 0 when "
        "clean, 1 when anything --fail-on names is found, 2 for bad input.",
        epilog=examples(
            prog,
            "audit --live -A",
            "audit --live -n shop --policy api-ssd.yaml",
            "audit --cluster cluster.yaml --fail-on violation,refused -o json",
        ),
    )
    add_cluster_source(aud, namespace=False)  # audit's -n takes several namespaces
    add_policy(
        aud,
        "what-if: PlacementPolicy objects applied over the cluster's own, as kubectl apply would "
        "(repeatable)",
    )
    add_config(aud, WHAT_IF_CONFIG)
    where = aud.add_mutually_exclusive_group()
    where.add_argument(
        "-n", "--namespace", action="append", metavar="NAME", help="audit only this namespace (repeatable)"
    )
    where.add_argument(
        "-A", "--all-namespaces", action="store_true", help="audit every namespace (the default without -n)"
    )
    aud.add_argument(
        "--fail-on",
        default="all",
        metavar="KINDS",
        help="the kinds of finding that exit 1: a comma list of violation, refused, deprecated, invalid; "
        "all (default) or none (always exit 0 unless the input is bad)",
    )
    add_output_args(
        aud,
        wide_help="one row per finding, with the pods it collides with",
        name_help="pod/NAME of each pod with a finding",
    )
    aud.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from berth.analysis.audit import FINDING_KINDS, audit
    from berth.report import audit_table

    fail_on = _fail_on(args.fail_on, FINDING_KINDS)
    one_stdin(args.cluster, *(args.policy or ()), args.config)
    policies = what_if_policies(args.policy or [])  # InvalidPolicy: main says every problem
    config = allocator_config(args.config)
    snapshot = source_snapshot(args)
    namespaces = () if args.all_namespaces else tuple(args.namespace or ())
    warnings = apply_what_if(snapshot, policies, namespaces)
    report = audit(snapshot.view, build_pipeline(config, kube_filters=False), namespaces=namespaces)
    report.warnings.extend(warnings)
    emit(
        render(
            args,
            body=report.to_dict,
            table=lambda wide, headers: audit_table(report, wide=wide, headers=headers),
            names=lambda: [f"pod/{key.partition('/')[2]}" for key in report.pods_found()],
        )
    )
    return EXIT_NO_FIT if report.fails(fail_on) else EXIT_PLACED


def _fail_on(value: str, kinds: Sequence[str]) -> frozenset[str]:
    """--fail-on: a comma list of kinds of finding, `all` or `none`."""
    if value == "all":
        return frozenset(kinds)
    if value == "none":
        return frozenset()
    wanted = frozenset(v.strip() for v in value.split(",") if v.strip())
    unknown = sorted(wanted - set(kinds))
    if unknown or not wanted:
        raise BerthError(
            f"--fail-on: unknown kind {(unknown or [value])[0]!r}; give all, none, or a comma list of "
            + ", ".join(kinds)
        )
    return wanted
