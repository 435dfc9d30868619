"""The `berth` command."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence
from typing import Any

import msgspec

from berth import __version__
from berth.cluster.convert import pod_from_k8s, pod_template
from berth.cluster.model import Pod
from berth.cluster.snapshot import load_snapshot, read_documents
from berth.engine.decide import decide
from berth.engine.types import Decision
from berth.errors import BerthError
from berth.pipeline import default_pipeline
from berth.report import table
from berth.validate import validate_files

EXIT_PLACED, EXIT_NO_FIT, EXIT_INVALID = 0, 1, 2


def _exit_code(decisions: Sequence[Decision]) -> int:
    codes = {d.error.code for d in decisions if d.error}
    if 400 in codes:
        return EXIT_INVALID
    return EXIT_NO_FIT if 409 in codes else EXIT_PLACED


def _pods_in(path: str) -> list[dict[str, Any]]:
    pods = [p for p in (pod_template(obj) for obj in read_documents(path)) if p is not None]
    if not pods:
        raise BerthError(f"{path}: no Pod or workload with a pod template found")
    return pods


def cmd_simulate(args: argparse.Namespace) -> int:
    snapshot = load_snapshot(args.cluster)
    pipeline = default_pipeline(offline=True)
    decisions = []
    for i, raw in enumerate(_pods_in(args.pod)):
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


def _placed(pod: Pod, node: str) -> Pod:
    return msgspec.structs.replace(pod, node_name=node)


def cmd_validate(args: argparse.Namespace) -> int:
    problems, checked = validate_files(args.files)
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} problem(s) in {checked} object(s)", file=sys.stderr)
        return EXIT_INVALID
    print(f"ok: {checked} object(s) checked")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="berth", description="Placement policies for Kubernetes.")
    parser.add_argument("--version", action="version", version=f"berth {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser(
        "simulate",
        help="where would this pod go, and why",
        description="Decide where a pod would go on a cluster snapshot, changing nothing. Exit 0 when "
        "placed, 1 when nothing fits (409), 2 when the specification is invalid (400). Several pods in "
        "the pod file are placed in order, each seeing the ones before.",
    )
    sim.add_argument(
        "--cluster", required=True, metavar="FILE", help="snapshot: kubectl get nodes,pods -A -o yaml"
    )
    sim.add_argument("--pod", required=True, metavar="FILE", help="a Pod, or a workload with a pod template")
    sim.add_argument("--seed", type=int, help="make every random choice reproducible")
    sim.add_argument("--output", choices=("table", "json"), default="table")
    sim.add_argument("--detail", action="store_true", help="show the chain and what each step did")
    sim.set_defaults(func=cmd_simulate)

    val = sub.add_parser(
        "validate",
        help="check berth annotations in manifests without a cluster",
        description="Check the berth annotations of pods and workloads in manifest files. Prints every "
        "problem; exit 2 when there is any.",
    )
    val.add_argument("files", nargs="+", metavar="FILE")
    val.set_defaults(func=cmd_validate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `berth simulate ... | head` ends quietly
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BerthError as exc:
        print(f"berth: {exc.message}", file=sys.stderr)
        return EXIT_INVALID


if __name__ == "__main__":
    sys.exit(main())
