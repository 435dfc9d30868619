"""`berth completion`: the shell completion script."""

from __future__ import annotations

import argparse
from typing import Any

from berth.cli.options import (
    examples,
)

SHELLS = ("bash", "zsh", "fish")


def add_parser(sub: Any, prog: str, root: argparse.ArgumentParser) -> None:
    comp = sub.add_parser(
        "completion",
        help="the shell completion script for bash, zsh or fish",
        description="Print a script that completes berth's commands and options in the shell.",
        epilog=examples(
            prog,
            "completion bash > ~/.local/share/bash-completion/completions/berth",
            'completion zsh > "${fpath[1]}/_berth"',
            "completion fish > ~/.config/fish/completions/berth.fish",
        ),
    )
    comp.add_argument("shell", choices=SHELLS)
    comp.set_defaults(func=lambda args: run(args, root))


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import shtab

    print(shtab.complete(parser, shell=args.shell), end="")
    return 0
