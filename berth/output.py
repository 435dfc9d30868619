"""`-o/--output` as kubectl has it, for every command that prints results.

table (the default) and wide are for people, wide with more in it (each command's help says what);
--no-headers leaves out their column headers. json and yaml are the same document, for tools. name
prints the names of what the command found, one per line, as `kubectl get -o name` does (`node/NAME`,
`pod/NAME`), for the shell.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

import yaml

FORMATS = ("table", "json", "yaml", "wide", "name")


def add_output_args(parser: argparse.ArgumentParser, *, name_help: str, wide_help: str) -> None:
    parser.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default="table",
        help=f"table (default), wide ({wide_help}), json, yaml, or name ({name_help})",
    )
    parser.add_argument(
        "--no-headers", action="store_true", help="with table or wide: leave out the column headers"
    )


def render(
    args: argparse.Namespace,
    *,
    body: Callable[[], Any],
    table: Callable[[bool, bool], str],
    names: Callable[[], Sequence[str]],
) -> str:
    """The command's output in the format asked: `table(wide, headers)` for people, `body()` as JSON
    or YAML, `names()` one per line."""
    if args.output == "json":
        return json.dumps(body(), indent=2)
    if args.output == "yaml":
        # Through JSON: the document is exactly the json one (enums as their strings, tuples as lists).
        plain = json.loads(json.dumps(body()))
        return yaml.safe_dump(plain, sort_keys=False, allow_unicode=True).rstrip("\n")
    if args.output == "name":
        return "\n".join(names())
    return table(args.output == "wide", not getattr(args, "no_headers", False))


def emit(text: str) -> None:
    if text:
        print(text)
