"""`berth validate`: berth's annotations, policies and configurations in manifests, without a cluster."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from berth.analysis.validate import DEFAULT_SCHEDULER, validate_paths
from berth.cli.options import (
    EXIT_INVALID,
    add_config,
    examples,
)
from berth.cli.sources import (
    allocator_config,
)


def add_parser(sub: Any, prog: str) -> None:
    val = sub.add_parser(
        "validate",
        help="check berth annotations in manifests without a cluster",
        description="Check the berth annotations of pods and workloads, PlacementPolicies and allocator "
        "configurations in manifest files. Prints every problem and every warning (berth annotations "
        "that will not apply: misspelt, deprecated, outside the pod template, on pods another scheduler "
        "places; a file with nothing for berth). Exit 2 when there is any problem, 1 with --strict when "
        "there is a warning, else 0.",
        epilog=examples(prog, "validate deploy/*.yaml", "validate --config allocator.yaml app-1.yaml"),
    )
    val.add_argument("files", nargs="+", metavar="FILE", help="manifest files; - reads standard input")
    add_config(val, "an allocator configuration whose packages the pods may name")
    val.add_argument(
        "--scheduler-name",
        default=DEFAULT_SCHEDULER,
        metavar="NAME",
        help="the scheduler berth runs as, which pods with berth rules must name "
        f"(default {DEFAULT_SCHEDULER})",
    )
    val.add_argument("--strict", action="store_true", help="fail (exit 1) on warnings too")
    val.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default="text",
        help="json: the objects checked, the errors and the warnings, each with file, object, field and rule",
    )
    val.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = validate_paths(args.files, config=allocator_config(args.config), scheduler=args.scheduler_name)
    failed = bool(report.warnings) and args.strict
    code = EXIT_INVALID if report.errors else (1 if failed else 0)
    if args.output == "json":
        print(json.dumps({**report.to_dict(), "exit": code}, indent=2))
        return code
    for finding in report.warnings:
        print(f"warning: {finding.line()}")
    for finding in report.errors:
        print(finding.line())
    checked = len(report.checked)
    if report.errors:
        print(f"{len(report.errors)} problem(s) in {checked} object(s)", file=sys.stderr)
    elif failed:
        print(
            f"{len(report.warnings)} warning(s) in {checked} object(s), failing with --strict",
            file=sys.stderr,
        )
    else:
        warned = f", {len(report.warnings)} warning(s)" if report.warnings else ""
        print(f"ok: {checked} object(s) checked{warned}")
    return code
