"""`berth operator`: PlacementPolicy status and the admission webhooks."""

from __future__ import annotations

import argparse
from typing import Any

from berth.cli.options import (
    CONFIG_HELP,
    add_config,
    add_kubeconfig_args,
    examples,
)
from berth.cli.sources import (
    allocator_config,
)
from berth.errors import BerthError


def add_parser(sub: Any, prog: str) -> None:
    op = sub.add_parser(
        "operator",
        help="run the operator: PlacementPolicy status and admission webhooks",
        description="Compile every PlacementPolicy and write its Ready condition, observedGeneration and "
        "governed pod count; serve the admission webhooks that refuse pods, workloads and policies with "
        "invalid berth specifications (HTTPS).",
        epilog=examples(prog, "operator --standalone --webhook-self-signed --manage-webhooks"),
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
    add_config(
        op,
        CONFIG_HELP + ": the one berth serve schedules with, so that the webhook refuses a pod naming "
        "a package it does not define, or whose limits break the package's RAM bounds",
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
    op.add_argument(
        "--scheduler-names",
        metavar="NAME,...",
        default="berth-scheduler,berth-scheduler-exhaustive",
        help="the schedulerNames berth serves (its kube-scheduler's profiles): a pod or workload with berth "
        "annotations and another scheduler is admitted with a warning that they are ignored",
    )
    op.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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
        config=allocator_config(args.config),
        scheduler_names=tuple(n.strip() for n in args.scheduler_names.split(",") if n.strip()),
    )
    run(options, kubeconfig=args.kubeconfig, context=args.context)
    return 0
