"""`berth`: the root parser, each command's own module adding its subcommand, and main()."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

from berth import __version__
from berth.cli import (
    audit_cmd,
    capacity_cmd,
    check_cmd,
    completion_cmd,
    explain_cmd,
    operator_cmd,
    rebalance_cmd,
    serve_cmd,
    simulate_cmd,
    validate_cmd,
    version_cmd,
)
from berth.cli.options import (
    EXIT_INVALID,
    CommandParser,
    Formatter,
    examples,
)
from berth.errors import BerthError

LONG_RUNNING = ("serve", "operator")
# The commands in the order `berth --help` lists them (rebalance after audit).
COMMANDS = (simulate_cmd, capacity_cmd, explain_cmd, audit_cmd)


def build_parser(prog: str = "berth") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Placement policies for Kubernetes.",
        epilog=examples(prog, "version", "completion bash > /etc/bash_completion.d/berth"),
        formatter_class=Formatter,
    )
    parser.add_argument("--version", action="version", version=f"berth {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)

    for command in COMMANDS:
        command.add_parser(sub, prog)
    rebalance_cmd.add_parser(sub, prog)
    serve_cmd.add_parser(sub, prog)
    operator_cmd.add_parser(sub, prog)
    check_cmd.add_parser(sub, prog)
    validate_cmd.add_parser(sub, prog)
    version_cmd.add_parser(sub, prog)
    completion_cmd.add_parser(sub, prog, parser)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "berth") -> int:
    args = build_parser(prog).parse_args(argv)
    if args.command not in LONG_RUNNING and hasattr(signal, "SIGPIPE"):
        # `berth simulate ... | head` ends quietly. Never for the servers: a client that hangs up
        # mid-answer would kill them.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    # Only the errors of reading input are mapped: each reader names the file, the object and the
    # field (berth.cluster.convert, berth.inputs, berth.cli.sources). Anything else is a bug in
    # berth, and its traceback says where.
    try:
        return args.func(args)
    except BerthError as exc:
        lines = getattr(exc, "errors", None) or [exc.message]
        for line in lines if len(lines) > 1 else [exc.message]:
            print(f"berth: {_one_line(line)}", file=sys.stderr)
        return EXIT_INVALID


def _one_line(text: str) -> str:
    return " ".join(text.split()) if "\n" in text else text
